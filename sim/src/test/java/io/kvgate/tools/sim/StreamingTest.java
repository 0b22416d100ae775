package io.kvgate.tools.sim;

import static io.kvgate.tools.sim.SimHttp.chat;
import static io.kvgate.tools.sim.SimHttp.json;
import static io.kvgate.tools.sim.SimHttp.post;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** SSE framing byte for byte, usage chunks, one HTTP chunk per event, n and stop in streams. */
@Timeout(60)
@Tag("system")
class StreamingTest {
    static EngineSimulator vllm;
    static EngineSimulator sglang;

    @BeforeAll
    static void start() {
        vllm = EngineSimulator.start(SimHttp.fast(Dialect.VLLM));
        sglang = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG));
    }

    @AfterAll
    static void stop() {
        vllm.close();
        sglang.close();
    }

    private static final String HEAD = "{\"id\":\"chatcmpl-r1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,"
        + "\"model\":\"m\",";

    @Test
    void vllmChatStreamExactBytes() throws Exception {
        JsonNode plain = json(post(vllm, "/v1/chat/completions", chat("m", "hello there", "\"max_tokens\":3")));
        String[] words = plain.at("/choices/0/message/content").asText().split("(?= )");
        assertEquals(3, words.length);
        int prompt = plain.at("/usage/prompt_tokens").asInt();

        HttpResponse<String> r = post(vllm, "/v1/chat/completions",
            chat("m", "hello there", "\"max_tokens\":3,\"stream\":true,\"stream_options\":{}"), "x-request-id", "r1");
        assertEquals(200, r.statusCode());
        assertEquals("text/event-stream; charset=utf-8", r.headers().firstValue("content-type").orElseThrow());
        assertEquals("r1", r.headers().firstValue("x-request-id").orElseThrow());
        String expected =
            "data: " + HEAD + "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
                + "\"logprobs\":null,\"finish_reason\":null}]}\n\n"
            + "data: " + HEAD + "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + words[0] + "\"},"
                + "\"logprobs\":null,\"finish_reason\":null}]}\n\n"
            + "data: " + HEAD + "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + words[1] + "\"},"
                + "\"logprobs\":null,\"finish_reason\":null}]}\n\n"
            + "data: " + HEAD + "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + words[2] + "\"},"
                + "\"logprobs\":null,\"finish_reason\":\"length\",\"stop_reason\":null}]}\n\n"
            // stream_options present => vLLM's include_usage defaults to true
            + "data: " + HEAD + "\"choices\":[],\"usage\":{\"prompt_tokens\":" + prompt + ",\"total_tokens\":"
                + (prompt + 3) + ",\"completion_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":0}}}\n\n"
            + "data: [DONE]\n\n";
        assertEquals(expected, r.body());
    }

    @Test
    void sglangCompletionStreamExactBytes() throws Exception {
        JsonNode plain = json(post(sglang, "/v1/completions", "{\"model\":\"m\",\"prompt\":\"p\",\"max_tokens\":2}"));
        String[] words = plain.at("/choices/0/text").asText().split("(?= )");
        HttpResponse<String> r = post(sglang, "/v1/completions",
            "{\"model\":\"m\",\"prompt\":\"p\",\"max_tokens\":2,\"stream\":true}", "x-request-id", "q");
        String head = "{\"id\":\"cmpl-q\",\"object\":\"text_completion\",\"created\":1700000000,\"model\":\"m\",";
        String expected =
            "data: " + head + "\"choices\":[{\"index\":0,\"text\":\"" + words[0] + "\",\"logprobs\":null,"
                + "\"finish_reason\":null,\"matched_stop\":null}],\"usage\":null}\n\n"
            + "data: " + head + "\"choices\":[{\"index\":0,\"text\":\"" + words[1] + "\",\"logprobs\":null,"
                + "\"finish_reason\":\"length\",\"matched_stop\":null}],\"usage\":null}\n\n"
            + "data: [DONE]\n\n";
        assertEquals(expected, r.body(), "SGLang: no usage chunk without include_usage");
    }

    @Test
    void oneHttpChunkPerSseEvent() throws Exception {
        String body = chat("m", "x", "\"max_tokens\":4,\"stream\":true,\"n\":2");
        try (Socket s = new Socket("127.0.0.1", vllm.port())) {
            s.setSoTimeout(10_000);
            OutputStream out = s.getOutputStream();
            out.write(("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                + "content-length: " + body.length() + "\r\n\r\n" + body).getBytes(StandardCharsets.US_ASCII));
            out.flush();
            InputStream in = s.getInputStream();
            String head = readUntil(in, "\r\n\r\n");
            assertTrue(head.startsWith("HTTP/1.1 200 OK"), head);
            assertTrue(head.toLowerCase().contains("transfer-encoding: chunked"), head);
            List<String> chunks = new ArrayList<>();
            for (int i = 0; i < 100; i++) {
                int size = Integer.parseInt(readUntil(in, "\r\n").trim(), 16);
                if (size == 0) {
                    readUntil(in, "\r\n");
                    break;
                }
                chunks.add(new String(in.readNBytes(size), StandardCharsets.UTF_8));
                readUntil(in, "\r\n");
            }
            // 2 role events + 2 choices x 4 tokens + [DONE]
            assertEquals(11, chunks.size(), String.join("|", chunks));
            for (String c : chunks) {
                assertTrue(c.startsWith("data: ") && c.endsWith("\n\n") && c.indexOf("\n\n") == c.length() - 2, c);
            }
            assertEquals("data: [DONE]\n\n", chunks.get(chunks.size() - 1));
        }
    }

    @Test
    void streamedStopTextEqualsNonStreamedAndIsTrimmed() throws Exception {
        String plainText = json(post(vllm, "/v1/completions", "{\"model\":\"m\",\"prompt\":\"s\",\"max_tokens\":10}"))
            .at("/choices/0/text").asText();
        String[] words = plainText.split(" ");
        String stop = words[4].substring(words[4].length() - 2) + " " + words[5];
        int at = plainText.indexOf(stop);
        assertTrue(at > 0);
        String req = "{\"model\":\"m\",\"prompt\":\"s\",\"max_tokens\":10,\"stop\":[\"" + stop + "\"]";
        JsonNode plain = json(post(vllm, "/v1/completions", req + "}"));
        assertEquals(plainText.substring(0, at), plain.at("/choices/0/text").asText());
        assertEquals(stop, plain.at("/choices/0/stop_reason").asText());
        HttpResponse<String> r = post(vllm, "/v1/completions", req + ",\"stream\":true}");
        StringBuilder streamed = new StringBuilder();
        String finish = null;
        for (String event : r.body().split("\n\n")) {
            String data = event.substring("data: ".length());
            if (data.equals("[DONE]")) {
                continue;
            }
            JsonNode c = SimHttp.MAPPER.readTree(data).at("/choices/0");
            streamed.append(c.get("text").asText());
            if (!c.get("finish_reason").isNull()) {
                finish = c.get("finish_reason").asText();
            }
        }
        assertEquals(plainText.substring(0, at), streamed.toString(), "no part of the stop string leaks");
        assertEquals("stop", finish);
    }

    @Test
    void continuousUsageNeedsIncludeUsageOnVllm() throws Exception {
        HttpResponse<String> r = post(vllm, "/v1/chat/completions", chat("m", "x", "\"max_tokens\":2,\"stream\":true,"
            + "\"stream_options\":{\"include_usage\":false,\"continuous_usage_stats\":true}"));
        assertTrue(!r.body().contains("\"usage\""), r.body());
        HttpResponse<String> s = post(sglang, "/v1/chat/completions", chat("m", "x", "\"max_tokens\":2,\"stream\":true,"
            + "\"stream_options\":{\"include_usage\":false,\"continuous_usage_stats\":true}"));
        assertTrue(s.body().contains("\"completion_tokens\":1"), s.body());
    }

    @Test
    void batchedCompletionPrompts() throws Exception {
        JsonNode b = json(post(vllm, "/v1/completions", "{\"model\":\"m\",\"prompt\":[\"a\",\"b c\"],\"n\":2,\"max_tokens\":2}"));
        assertEquals(4, b.get("choices").size());
        assertEquals(3, b.at("/choices/3/index").asInt());
        assertEquals(3, b.at("/usage/prompt_tokens").asInt());
        assertEquals(8, b.at("/usage/completion_tokens").asInt());
        JsonNode ids = json(post(vllm, "/v1/completions", "{\"model\":\"m\",\"prompt\":[1,2,3,4,5],\"max_tokens\":1}"));
        assertEquals(5, ids.at("/usage/prompt_tokens").asInt());
    }

    @Test
    void keepAliveServesSequentialRequestsOnOneConnection() throws Exception {
        long before = vllm.stats().get("connections_accepted");
        for (int i = 0; i < 3; i++) {
            assertEquals(200, post(vllm, "/v1/completions", "{\"model\":\"m\",\"prompt\":\"k\",\"max_tokens\":1}")
                .statusCode());
        }
        assertTrue(vllm.stats().get("connections_accepted") - before <= 1, "HttpClient reuses the connection");
    }

    static String readUntil(InputStream in, String terminator) throws Exception {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        while (!buf.toString(StandardCharsets.ISO_8859_1).endsWith(terminator)) {
            int b = in.read();
            if (b < 0) {
                throw new IllegalStateException("EOF after " + buf);
            }
            buf.write(b);
        }
        return buf.toString(StandardCharsets.ISO_8859_1);
    }
}
