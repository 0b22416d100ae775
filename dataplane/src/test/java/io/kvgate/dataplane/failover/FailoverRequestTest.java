package io.kvgate.dataplane.failover;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** The continuation body of mid-stream failover (issue #41), and the requests it refuses. */
class FailoverRequestTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    private static FailoverRequest of(String body, boolean chat) {
        return FailoverRequest.of(body.getBytes(StandardCharsets.UTF_8), chat, null, true);
    }

    private static JsonNode json(byte[] b) throws Exception {
        return JSON.readTree(b);
    }

    @Test
    void completionsTextPromptGetsTheGeneratedTextAppendedAndTheBudgetLowered() throws Exception {
        FailoverRequest r = of("{\"model\":\"m\",\"prompt\":\"Tell me\",\"max_tokens\":10,\"stream\":true}", false);
        assertNull(r.refusal());
        JsonNode next = json(r.continuation(" the cache", null, null, 2));
        assertEquals("Tell me the cache", next.get("prompt").asText());
        assertEquals(8, next.get("max_tokens").asInt());
        assertEquals(true, next.get("stream").asBoolean(), "everything else as the client sent it");
    }

    /**
     * An engine that failed after its response head but before its first token: the request goes again as sent, a
     * token-id prompt included (no ids were reported to append; a perf/failover.sh run found it refused).
     */
    @Test
    void nothingGeneratedYetContinuesAsTheRequestItself() throws Exception {
        String ids = "{\"model\":\"m\",\"prompt\":[1,2,3],\"max_tokens\":5,\"return_token_ids\":true,\"stream\":true}";
        assertEquals(JSON.readTree(ids), json(of(ids, false).continuation("", null, null, 0)));
        String chat = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":5}";
        assertEquals(JSON.readTree(chat), json(of(chat, true).continuation("", null, null, 0)), "no empty assistant prefix");
    }

    /** Drain with --migrate moves a stream the engine has not answered at once, a non-streamed request at --within. */
    @Test
    void streamedIsTheClientsStreamFlag() {
        assertEquals(true, of("{\"model\":\"m\",\"prompt\":\"x\",\"stream\":true}", false).streamed());
        assertEquals(false, of("{\"model\":\"m\",\"prompt\":\"x\",\"stream\":false}", false).streamed());
        assertEquals(false, of("{\"model\":\"m\",\"prompt\":\"x\"}", false).streamed());
        assertEquals(false, FailoverRequest.of("{\"stream\":true}".getBytes(StandardCharsets.UTF_8), false, "off", true)
            .streamed(), "an opted-out request's body is not read");
    }

    @Test
    void completionsWithReportedIdsContinueAsTokenIds() throws Exception {
        FailoverRequest r = of("{\"model\":\"m\",\"prompt\":[1,2,3],\"max_tokens\":5,\"return_token_ids\":true}", false);
        JsonNode next = json(r.continuation(" a b", new int[] {1, 2, 3}, new int[] {7, 8}, 2));
        assertEquals("[1,2,3,7,8]", next.get("prompt").toString());
        assertEquals(3, next.get("max_tokens").asInt());
        // a token-id prompt without the generated ids has no form that carries the text
        assertNull(r.continuation(" a b", null, null, 2));
    }

    @Test
    void textPromptPrefersIdsWhenBothWereReported() throws Exception {
        FailoverRequest r = of("{\"model\":\"m\",\"prompt\":[\"Hi\"]}", false);
        assertEquals("[4,5,9]", json(r.continuation(" x", new int[] {4, 5}, new int[] {9}, 1)).get("prompt").toString());
        assertEquals("Hi x", json(r.continuation(" x", null, null, 1)).get("prompt").asText());
        assertNull(json(r.continuation(" x", null, null, 1)).get("max_tokens"), "no budget: none is added");
    }

    @Test
    void chatGetsAnAssistantPrefixToContinue() throws Exception {
        FailoverRequest r = of("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
            + "\"max_completion_tokens\":6,\"max_tokens\":9}", true);
        JsonNode next = json(r.continuation("the cache", null, null, 2));
        assertEquals(2, next.get("messages").size());
        assertEquals("assistant", next.at("/messages/1/role").asText());
        assertEquals("the cache", next.at("/messages/1/content").asText());
        assertEquals(true, next.get("continue_final_message").asBoolean());
        assertEquals(false, next.get("add_generation_prompt").asBoolean());
        assertEquals(4, next.get("max_completion_tokens").asInt(), "the field the engines read first");
    }

    @Test
    void chatThatAlreadyContinuesItsOwnPrefixExtendsIt() throws Exception {
        FailoverRequest r = of("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
            + "{\"role\":\"assistant\",\"content\":\"Sure,\"}],\"continue_final_message\":true,"
            + "\"add_generation_prompt\":false}", true);
        JsonNode next = json(r.continuation(" the cache", null, null, 2));
        assertEquals(2, next.get("messages").size());
        assertEquals("Sure, the cache", next.at("/messages/1/content").asText());
    }

    @Test
    void noBudgetLeftMeansNoContinuation() {
        assertNull(of("{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":3}", false).continuation(" a b c", null, null, 3));
    }

    @Test
    void refusedRequests() {
        assertEquals("n_gt_1", of("{\"prompt\":\"x\",\"n\":2}", false).refusal());
        assertEquals("n_gt_1", of("{\"prompt\":\"x\",\"best_of\":3}", false).refusal());
        assertEquals("several_prompts", of("{\"prompt\":[\"a\",\"b\"]}", false).refusal());
        assertEquals("guided_decoding", of("{\"messages\":[],\"response_format\":{\"type\":\"json_object\"}}", true).refusal());
        assertEquals("guided_decoding", of("{\"prompt\":\"x\",\"guided_regex\":\"a+\"}", false).refusal());
        assertEquals("guided_decoding", of("{\"prompt\":\"x\",\"structured_outputs\":{\"json\":{}}}", false).refusal());
        assertEquals("logprobs", of("{\"messages\":[],\"logprobs\":true}", true).refusal());
        assertEquals("logprobs", of("{\"prompt\":\"x\",\"logprobs\":2}", false).refusal());
        assertEquals("echo", of("{\"prompt\":\"x\",\"echo\":true}", false).refusal());
        assertEquals("unreadable_body", of("[1]", false).refusal());
        assertEquals("opted_out", FailoverRequest.of("{}".getBytes(StandardCharsets.UTF_8), true, " OFF", true).refusal());
        assertEquals("engine_cannot_continue_chat",
            FailoverRequest.of("{\"messages\":[]}".getBytes(StandardCharsets.UTF_8), true, null, false).refusal());
        assertNull(of("{\"messages\":[],\"response_format\":{\"type\":\"text\"},\"logprobs\":false}", true).refusal());
    }
}
