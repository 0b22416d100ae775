package io.kvgate.dataplane.exchange;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.dataplane.request.AnswerRewrite;
import io.kvgate.dataplane.request.RequestFields;
import io.kvgate.dataplane.route.Outcome;
import io.kvgate.dataplane.upstream.EmbeddedEngines.Completion;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * Answers rewritten (alias, greedy replication, forced usage) and counted ({@code kvgate_tokens_total}) through a
 * whole plain exchange over embedded connections, with the engine's bytes split at every byte.
 */
class AnswerRewriteExchangeTest {
    private static final String BODY = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    private static final String JSON = "{\"id\":\"c1\",\"model\":\"qwen3\",\"choices\":[{\"index\":0,\"message\":{\"content\":\"x\"}}],"
        + "\"usage\":{\"prompt_tokens\":12,\"total_tokens\":15,\"completion_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":8}}}";
    private static final String SSE_HEAD = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";

    private static String jsonAnswer(String json) {
        return "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: " + json.length() + "\r\n\r\n" + json;
    }

    private static String chunk(String s) {
        return Integer.toHexString(s.length()) + "\r\n" + s + "\r\n";
    }

    private static RequestFields fields(AnswerRewrite rw) {
        RequestFields f = ExchangeKit.fields();
        f.answerRewrite = rw;
        return f;
    }

    private static ExchangeKit started(AnswerRewrite rw) throws Exception {
        ExchangeKit k = new ExchangeKit("");
        k.metrics.modelLabels(Set.of("m"));
        k.plain(BODY, ExchangeKit.request(), fields(rw)).start();
        k.decide(k.ep1);
        k.engineGot(0);
        return k;
    }

    private static String tokens(ExchangeKit k) {
        StringBuilder b = new StringBuilder();
        for (String line : k.metrics.render().split("\n")) {
            if (line.startsWith("kvgate_tokens_total{")) {
                b.append(line).append('\n');
            }
        }
        return b.toString();
    }

    private static String tokensLines(long prompt, long completion, long cached) {
        // The client library writes a family's series sorted by their labels: kind cached, completion, prompt.
        return "kvgate_tokens_total{kind=\"cached\",model=\"m\",rule=\"r\"} " + (double) cached + "\n"
            + "kvgate_tokens_total{kind=\"completion\",model=\"m\",rule=\"r\"} " + (double) completion + "\n"
            + "kvgate_tokens_total{kind=\"prompt\",model=\"m\",rule=\"r\"} " + (double) prompt + "\n";
    }

    @Test
    void theByteForByteRelayCountsTokensWhereverTheAnswerIsSplit() throws Exception {
        String wire = jsonAnswer(JSON);
        for (int split = 1; split < wire.length(); split++) {
            try (ExchangeKit k = started(null)) {
                k.engineSends(0, wire.substring(0, split));
                k.engineSends(0, wire.substring(split));
                k.received();
                assertEquals(JSON, k.body.toString(), "relayed byte for byte (split " + split + ")");
                assertEquals(tokensLines(12, 3, 8), tokens(k), "split " + split);
            }
        }
    }

    @Test
    void anAliasedJsonAnswerIsWrittenBackWhereverItIsSplit() throws Exception {
        String wire = jsonAnswer(JSON);
        for (int split = 1; split < wire.length(); split++) {
            try (ExchangeKit k = started(new AnswerRewrite("m", 2, false))) {
                k.engineSends(0, wire.substring(0, split));
                k.engineSends(0, wire.substring(split));
                k.received();
                assertEquals(200, k.head.status().code());
                assertEquals("{\"id\":\"c1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"message\":{\"content\":\"x\"}},"
                    + "{\"index\":1,\"message\":{\"content\":\"x\"}}],\"usage\":{\"prompt_tokens\":12,\"total_tokens\":18,"
                    + "\"completion_tokens\":6,\"prompt_tokens_details\":{\"cached_tokens\":8}}}", k.body.toString(), "split " + split);
                assertEquals(String.valueOf(k.body.length()), k.head.headers().get("content-length"));
                assertEquals(tokensLines(12, 6, 8), tokens(k), "counted as the client sees them");
                assertEquals(List.of(new Completion(k.ep1, Outcome.SUCCESS)), k.engines.outcomes);
            }
        }
    }

    @Test
    void aRewrittenAnswerOverTheBodyLimitIs502NeverTruncated() throws Exception {
        try (ExchangeKit k = new ExchangeKit("limits: {max_body_bytes: 1024}")) {
            k.plain(BODY, ExchangeKit.request(), fields(new AnswerRewrite("m", 1, false))).start();
            k.decide(k.ep1);
            String big = "{\"model\":\"qwen3\",\"choices\":[{\"index\":0,\"text\":\"" + "x".repeat(2_000) + "\"}]}";
            k.engineSends(0, jsonAnswer(big));
            k.received();
            assertEquals(502, k.head.status().code());
            assertTrue(k.body.toString().contains("1024"), k.body.toString());
        }
    }

    @Test
    void aStreamsForcedUsageChunkIsCountedAndNeverReachesTheClient() throws Exception {
        String events = "data: {\"model\":\"qwen3\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n"
            + "data: {\"model\":\"qwen3\",\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":1}}\n\n"
            + "data: [DONE]\n\n";
        for (int split = 1; split < events.length(); split++) {
            try (ExchangeKit k = started(new AnswerRewrite("m", 1, true))) {
                k.engineSends(0, SSE_HEAD + chunk(events.substring(0, split)));
                k.engineSends(0, chunk(events.substring(split)) + "0\r\n\r\n");
                k.received();
                assertEquals("data: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n",
                    k.body.toString(), "split " + split);
                assertTrue(k.ended);
                assertEquals(tokensLines(4, 1, 0), tokens(k));
                assertTrue(k.metrics.render().contains("kvgate_requests_total{model=\"m\",rule=\"r\",status=\"200\"} 1"));
            }
        }
    }

    /** A body under a content coding cannot be read: relayed as it came, its usage is not counted (nor guessed). */
    @Test
    void anEncodedAnswerIsRelayedButNotCounted() throws Exception {
        try (ExchangeKit k = started(null)) {
            k.engineSends(0, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nContent-Encoding: identity\r\n"
                + "content-length: " + JSON.length() + "\r\n\r\n" + JSON);
            k.received();
            assertEquals(JSON, k.body.toString());
            assertEquals("", tokens(k));
            assertTrue(k.metrics.render().contains("kvgate_requests_total{model=\"m\",rule=\"r\",status=\"200\"} 1"));
        }
    }

    @Test
    void errorAnswersAreNotRewrittenOrCounted() throws Exception {
        try (ExchangeKit k = started(new AnswerRewrite("m", 2, true))) {
            String err = "{\"object\":\"error\",\"message\":\"bad\",\"type\":\"BadRequestError\",\"code\":400,\"usage\":{\"prompt_tokens\":1}}";
            k.engineSends(0, "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: " + err.length()
                + "\r\n\r\n" + err);
            k.received();
            assertEquals(400, k.head.status().code());
            assertFalse(k.body.toString().contains("\"model\""), k.body.toString());
            assertEquals("", tokens(k));
        }
    }
}
