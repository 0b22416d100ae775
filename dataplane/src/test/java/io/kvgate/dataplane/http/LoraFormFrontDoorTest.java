package io.kvgate.dataplane.http;

import static io.kvgate.dataplane.http.FrontDoorHarness.AUTH;
import static io.kvgate.dataplane.http.FrontDoorHarness.ascii;
import static io.kvgate.dataplane.http.FrontDoorHarness.output;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.dataplane.request.ParsedRequest;
import io.netty.channel.embedded.EmbeddedChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * What the exchange is handed for LoRA and template requests (issue #13 items 4, 6): SGLang's {@code lora_path}
 * form (after every other edit of the body, a clamped budget included), vLLM's body unchanged, and the
 * {@code X-Kvgate-Warning} computed for chat requests whose {@code chat_template_kwargs} the template does not read.
 */
class LoraFormFrontDoorTest {
    private static final ObjectMapper JSON = new ObjectMapper();
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
            rules:
              - name: sg
                models: [{name: base, adapters: [sql-lora]}]
                engine: sglang
                tokenizer: %1$s
                max_model_len: 64
                on_context_overflow: clamp
                endpoints:
                  - url: http://127.0.0.1:1
              - name: vl
                models: [{name: vbase, adapters: [v-lora]}]
                engine: vllm
                endpoints:
                  - url: http://127.0.0.1:2
            """.formatted(modelDir()));
    }

    @AfterAll
    static void tearDown() {
        h.close();
    }

    private static String send(String body) {
        EmbeddedChannel ch = h.channel();
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        ch.writeInbound(ascii("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + AUTH + "\r\nContent-Type: application/json\r\n"
            + "Content-Length: " + b.length + "\r\n\r\n"));
        ch.writeInbound(io.netty.buffer.Unpooled.wrappedBuffer(b));
        String out = output(ch);
        ch.finishAndReleaseAll();
        return out;
    }

    private static JsonNode lastBody() throws Exception {
        return JSON.readTree(h.bodies.get(h.bodies.size() - 1));
    }

    private static ParsedRequest last() {
        return h.started.get(h.started.size() - 1);
    }

    @Test
    void sglangAdapterRequestsGetLoraPathLastAfterTheClamp() throws Exception {
        int before = h.started.size();
        send("{\"model\":\"sql-lora\",\"max_tokens\":100000,\"lora_path\":\"other\","
            + "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"kv_transfer_params\":{}}");
        assertEquals(before + 1, h.started.size());
        String raw = h.bodies.get(h.bodies.size() - 1);
        assertTrue(raw.endsWith(",\"lora_path\":\"sql-lora\"}"), raw);
        JsonNode b = lastBody();
        assertEquals("sql-lora", b.get("model").asText(), "SGLang's model stays the client's: it echoes the adapter");
        assertEquals("sql-lora", b.get("lora_path").asText(), "the last lora_path wins over the client's");
        assertTrue(b.get("max_tokens").asInt() < 64, "the clamp applied too: " + raw);
        assertNull(b.get("kv_transfer_params"), "engine-internal fields still removed");
    }

    @Test
    void aBaseRequestsClientLoraPathIsNulledAndOtherwiseTheBodyIsUntouched() throws Exception {
        send("{\"model\":\"base\",\"lora_path\":\"sql-lora\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
        assertTrue(lastBody().get("lora_path").isNull(), "the engine runs the base model the gateway routed for");
        String plain = "{\"model\":\"base\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
        send(plain);
        assertEquals(plain, h.bodies.get(h.bodies.size() - 1), "no lora_path to neutralize: byte for byte");
        String vllm = "{\"model\":\"v-lora\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
        send(vllm);
        assertEquals(vllm, h.bodies.get(h.bodies.size() - 1), "vLLM's form is the client's own");
        assertNull(last().servingEndpoints(), "a configured adapter: every endpoint of the rule serves it");
    }

    @Test
    void undeclaredKwargsBecomeTheExchangesWarning() {
        send("{\"model\":\"base\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
            + "\"chat_template_kwargs\":{\"enable_thinking\":false,\"thinking\":true}}");
        String w = last().warning();
        assertTrue(w != null && w.startsWith("chat_template_kwargs 'thinking' is not declared"), w);
        send("{\"model\":\"base\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"chat_template_kwargs\":{\"enable_thinking\":false}}");
        assertNull(last().warning(), "Qwen3's template reads enable_thinking");
        send("{\"model\":\"v-lora\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"chat_template_kwargs\":{\"x\":1}}");
        assertNull(last().warning(), "a rule without a tokenizer has no template to judge by");
    }
}
