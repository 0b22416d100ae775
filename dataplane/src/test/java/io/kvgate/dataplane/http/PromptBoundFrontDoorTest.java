package io.kvgate.dataplane.http;

import static io.kvgate.dataplane.http.FrontDoorHarness.AUTH;
import static io.kvgate.dataplane.http.FrontDoorHarness.ascii;
import static io.kvgate.dataplane.http.FrontDoorHarness.output;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.netty.channel.embedded.EmbeddedChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * B-5 (M1): a 4 MiB one-word chat prompt on a rule with the default {@code max_prompt_tokens} (1 Mi) and a context
 * length of 8192 was merged whole on the I/O thread (hundreds of MB of scratch: an OutOfMemoryError at a 256 MB heap,
 * the client answered by a closed connection). The stage now tokenizes no further than the context length, and the
 * word's length proves it over that: OpenAI's 400 {@code context_length_exceeded}, with next to no allocation.
 */
class PromptBoundFrontDoorTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    /**
     * Beyond what the same body costs on a rule whose {@code max_prompt_tokens} (16) refuses it by length alone
     * (reading, parsing and rendering 4 MiB): merging the word takes ~150 MB more (36 B per byte; 380 MB before).
     */
    private static final long MOST_EXTRA_BYTES_ALLOCATED = 32L << 20;
    private static FrontDoorHarness h;

    private static Path modelDir() {
        Path d = Path.of("").toAbsolutePath();
        while (d != null && !Files.exists(d.resolve("mvnw"))) {
            d = d.getParent();
        }
        return d.resolve("deploy/models/qwen3");
    }

    @BeforeAll
    static void setUp() throws Exception {
        h = new FrontDoorHarness("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            api_keys: [k1]
            limits:
              max_body_bytes: 8388608
            rules:
              - name: kv
                models: [kv]
                policy: kv_exact
                tokenizer: %1$s
                max_model_len: 8192
                endpoints:
                  - url: http://127.0.0.1:1
              - name: counted
                models: [counted]
                tokenizer: %1$s
                max_model_len: 8192
                endpoints:
                  - url: http://127.0.0.1:2
              - name: tiny
                models: [tiny]
                policy: kv_exact
                tokenizer: %1$s
                max_prompt_tokens: 16
                endpoints:
                  - url: http://127.0.0.1:3
            """.formatted(modelDir()));
    }

    @AfterAll
    static void tearDown() {
        h.close();
    }

    private static String send(String path, String body) {
        EmbeddedChannel ch = h.channel();
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        ch.writeInbound(ascii("POST " + path + " HTTP/1.1\r\nHost: x\r\n" + AUTH + "\r\nContent-Type: application/json\r\n"
            + "Content-Length: " + b.length + "\r\n\r\n"));
        ch.writeInbound(io.netty.buffer.Unpooled.wrappedBuffer(b));
        String out = output(ch);
        ch.finishAndReleaseAll();
        return out;
    }

    private static long allocatedBytes() {
        return ((com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean())
            .getCurrentThreadAllocatedBytes();
    }

    private static String oneWordChat(String model) {
        return "{\"model\":\"" + model + "\",\"messages\":[{\"role\":\"user\",\"content\":\"" + "a".repeat(4 << 20)
            + "\"}]}";
    }

    @Test
    void b5_aFourMebibyteOneWordChatIsRefusedFromTheContextLengthWithoutMerging() throws Exception {
        send("/v1/chat/completions", "{\"model\":\"kv\",\"messages\":[{\"role\":\"user\",\"content\":\"warm up\"}]}");
        int startedBefore = h.started.size();
        for (String path : new String[] {"/v1/chat/completions", "/kvgate/v1/chat/completions/render"}) {
            String tiny = oneWordChat("tiny");
            long baseline = allocatedBytes();
            assertTrue(send(path, tiny).startsWith("HTTP/1.1 400 "));
            baseline = allocatedBytes() - baseline;
            for (String model : new String[] {"kv", "counted"}) {
                String body = oneWordChat(model);
                long before = allocatedBytes();
                String out = send(path, body);
                long allocated = allocatedBytes() - before;
                assertTrue(out.startsWith("HTTP/1.1 400 "), path + " " + model + ": " + out.substring(0, Math.min(200, out.length())));
                JsonNode e = JSON.readTree(out.substring(out.indexOf("\r\n\r\n") + 4)).get("error");
                assertEquals("context_length_exceeded", e.get("code").asText(), e.toString());
                assertEquals("messages", e.get("param").asText());
                assertTrue(e.get("message").asText().contains("maximum context length is 8192 tokens"), e.toString());
                assertTrue(allocated < baseline + MOST_EXTRA_BYTES_ALLOCATED, path + " " + model + ": allocated "
                    + allocated + " B, refused by max_prompt_tokens " + baseline + " B");
            }
        }
        assertEquals(startedBefore, h.started.size(), "no engine saw it");
    }
}
