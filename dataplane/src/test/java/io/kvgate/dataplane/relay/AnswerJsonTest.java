package io.kvgate.dataplane.relay;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.dataplane.request.AnswerRewrite;
import org.junit.jupiter.api.Test;

/** A whole (non-streamed) answer rewritten for an alias and greedy replication: only the changed values move. */
class AnswerJsonTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String VLLM_CHAT = "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"created\":1,\"model\":\"qwen3\","
        + "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"same \\\"words\\\"\",\"tool_calls\":[]},"
        + "\"logprobs\":null,\"finish_reason\":\"length\",\"stop_reason\":null}],\"usage\":{\"prompt_tokens\":7,"
        + "\"total_tokens\":10,\"completion_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":4}},"
        + "\"prompt_logprobs\":null,\"kv_transfer_params\":null}";

    @Test
    void anAliasChangesOnlyTheModel() {
        assertEquals(VLLM_CHAT.replace("\"model\":\"qwen3\"", "\"model\":\"gpt-4o-mini\""),
            AnswerJson.rewriteAnswer(VLLM_CHAT, new AnswerRewrite("gpt-4o-mini", 1, false)));
    }

    @Test
    void replicationAnswersEachChoiceNTimesWithUsageLikeSglangs() throws Exception {
        JsonNode r = JSON.readTree(AnswerJson.rewriteAnswer(VLLM_CHAT, new AnswerRewrite(null, 3, false)));
        JsonNode choices = r.get("choices");
        assertEquals(3, choices.size());
        for (int i = 0; i < 3; i++) {
            assertEquals(i, choices.get(i).get("index").asInt());
            assertEquals("same \"words\"", choices.get(i).at("/message/content").asText());
            assertEquals("length", choices.get(i).get("finish_reason").asText());
        }
        assertEquals(7, r.at("/usage/prompt_tokens").asInt(), "the prompt once");
        assertEquals(9, r.at("/usage/completion_tokens").asInt());
        assertEquals(16, r.at("/usage/total_tokens").asInt());
        assertEquals(4, r.at("/usage/prompt_tokens_details/cached_tokens").asInt());
        assertEquals("qwen3", r.get("model").asText());
    }

    @Test
    void aCompletionsBatchKeepsPromptMajorIndices() throws Exception {
        String batch = "{\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\"a\"},{\"text\":\"b\",\"index\":1}],"
            + "\"usage\":{\"completion_tokens\":2,\"prompt_tokens\":2,\"total_tokens\":4,"
            + "\"completion_tokens_details\":{\"reasoning_tokens\":1}}}";
        String out = AnswerJson.rewriteAnswer(batch, new AnswerRewrite("client", 2, false));
        assertEquals("{\"model\":\"client\",\"choices\":[{\"index\":0,\"text\":\"a\"},{\"index\":1,\"text\":\"a\"},"
            + "{\"text\":\"b\",\"index\":2},{\"text\":\"b\",\"index\":3}],\"usage\":{\"completion_tokens\":4,"
            + "\"prompt_tokens\":2,\"total_tokens\":6,\"completion_tokens_details\":{\"reasoning_tokens\":2}}}", out);
    }

    @Test
    void whatIsNotAnAnswerObjectIsLeftAlone() {
        AnswerRewrite rw = new AnswerRewrite("client", 2, false);
        for (String s : new String[] {"[1,2]", "{\"model\":\"m\"", "not json", "{\"error\":{\"message\":\"x\"},\"model\":\"m\"}",
            "{\"a\":1} {\"b\":2}"}) {
            assertEquals(s, AnswerJson.rewriteAnswer(s, rw));
        }
        assertEquals("{\"model\":null,\"choices\":\"x\"}", AnswerJson.rewriteAnswer("{\"model\":null,\"choices\":\"x\"}", rw),
            "no string model, no choices array: nothing to splice");
    }
}
