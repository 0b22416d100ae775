package io.kvgate.dataplane.relay;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import org.junit.jupiter.api.Test;

/** Engine error bodies (the simulator's exact bytes for each dialect) in the gateway's one vocabulary. */
class EngineErrorsTest {
    private static String err(String message, String type, String param, String code) {
        return io.kvgate.dataplane.openai.OpenAiErrors.json(message, type, param, code);
    }

    @Test
    void vllmNestedAndSglangFlatBecomeTheSameObject() {
        String vllm = "{\"error\":{\"message\":\"n must be 1 when using greedy sampling, got 2.\",\"type\":\"BadRequestError\","
            + "\"param\":\"n\",\"code\":400}}";
        String sglang = "{\"object\":\"error\",\"message\":\"n must be 1 when using greedy sampling, got 2.\",\"type\":"
            + "\"BadRequestError\",\"param\":\"n\",\"code\":400}";
        String want = err("n must be 1 when using greedy sampling, got 2.", "invalid_request_error", "n", null);
        assertEquals(want, EngineErrors.toOpenAiShape(vllm, 400, true));
        assertEquals(want, EngineErrors.toOpenAiShape(sglang, 400, true));
        // vLLM's RequestValidationError handler types it "Bad Request"
        assertEquals(err("Value error, x", "invalid_request_error", "top_logprobs", null), EngineErrors.toOpenAiShape(
            "{\"error\":{\"message\":\"Value error, x\",\"type\":\"Bad Request\",\"param\":\"top_logprobs\",\"code\":400}}", 400, true));
    }

    @Test
    void typeFollowsTheStatusAndStringCodesAreKept() {
        assertEquals(err("boom", "server_error", null, null),
            EngineErrors.toOpenAiShape("{\"error\":{\"message\":\"boom\",\"type\":\"InternalServerError\",\"code\":500}}", 500, true));
        assertEquals(err("slow down", "rate_limit_error", null, "rate_limit_exceeded"),
            EngineErrors.toOpenAiShape("{\"error\":{\"message\":\"slow down\",\"type\":\"x\",\"code\":\"rate_limit_exceeded\"}}", 429, true));
        assertEquals(err("late", "timeout", null, null), EngineErrors.toOpenAiShape("late", 504, true));
        assertEquals(err("The engine answered HTTP 503 with no body", "server_error", null, null),
            EngineErrors.toOpenAiShape("", 503, true));
        assertEquals(err("plain text", "invalid_request_error", null, null), EngineErrors.toOpenAiShape("{\"error\":\"plain text\"}", 400, true));
    }

    @Test
    void fastApiDetailIsTheTextNotAQuotedString() {
        assertEquals(err("Not Found", "invalid_request_error", null, null), EngineErrors.toOpenAiShape("{\"detail\":\"Not Found\"}", 404, true));
        assertEquals(err("Method Not Allowed", "invalid_request_error", null, null),
            EngineErrors.toOpenAiShape("{\"detail\":\"Method Not Allowed\"}", 405, true));
        // a 422: FastAPI's list of validation errors, the first body location as the param
        String v422 = "{\"detail\":[{\"type\":\"int_parsing\",\"loc\":[\"body\",\"max_tokens\"],\"msg\":\"Input should be a "
            + "valid integer\",\"input\":\"x\"},{\"type\":\"missing\",\"loc\":[\"body\",\"messages\"],\"msg\":\"Field required\"}]}";
        assertEquals(err("Input should be a valid integer; Field required", "invalid_request_error", "max_tokens", null),
            EngineErrors.toOpenAiShape(v422, 422, true));
    }

    @Test
    void everyEnginesContextOverflowIsContextLengthExceeded() {
        String[] bodies = {
            // SGLang: prompt + max_tokens over the context
            "{\"object\":\"error\",\"message\":\"Requested token count exceeds the model's maximum context length of 64 tokens. "
                + "You requested a total of 110 tokens: 10 tokens from the input messages and 100 tokens for the completion. "
                + "Please reduce the number of tokens in the input messages or the completion to fit within the limit.\","
                + "\"type\":\"BadRequestError\",\"param\":null,\"code\":400}",
            // SGLang: the prompt alone
            "{\"object\":\"error\",\"message\":\"The input (64 tokens) is longer than the model's context length (64 tokens).\","
                + "\"type\":\"BadRequestError\",\"param\":null,\"code\":400}",
            // vLLM (a556f3f): the prompt alone
            "{\"error\":{\"message\":\"Input length (70) exceeds model's maximum context length (64).\",\"type\":"
                + "\"BadRequestError\",\"param\":null,\"code\":400}}",
            // older vLLM builds that reject instead of clamping
            "{\"error\":{\"message\":\"'max_tokens' or 'max_completion_tokens' is too large: 100. This model's maximum context "
                + "length is 64 tokens and your request has 10 input tokens (100 > 64 - 10).\",\"type\":\"BadRequestError\","
                + "\"param\":\"max_tokens\",\"code\":400}}",
            "{\"error\":{\"message\":\"This model's maximum context length is 64 tokens. However, your request has 64 input "
                + "tokens. Please reduce the length of the input messages.\",\"type\":\"BadRequestError\",\"param\":"
                + "\"input_tokens\",\"code\":400}}",
            // vLLM's input processor: the prompt alone
            "{\"error\":{\"message\":\"The decoder prompt (length 70) is longer than the maximum model length of 64. Make sure"
                + " that `max_model_len` is no smaller than the number of text tokens.\",\"type\":\"BadRequestError\",\"param\":null,"
                + "\"code\":400}}",
            // SGLang's scheduler: the prompt over its max_req_input_len
            "{\"object\":\"error\",\"message\":\"Input length (70 tokens) exceeds the maximum allowed length (58 tokens). Use a"
                + " shorter input or enable --allow-auto-truncate.\",\"type\":\"BadRequestError\",\"param\":null,\"code\":400}",
            // SGLang's chat handler under --context-length (its message lacks the space after the first period)
            "{\"object\":\"error\",\"message\":\"max_completion_tokens is too large: 100.This model supports at most 64 "
                + "completion tokens.\",\"type\":\"BadRequestError\",\"param\":null,\"code\":400}",
            // llama.cpp's server (82bb48500, server-context.cpp): the prompt over the slot's context, a numeric code
            "{\"error\":{\"code\":400,\"message\":\"request (40 tokens) exceeds the available context size (32 tokens), "
                + "try increasing it\",\"type\":\"exceed_context_size_error\",\"n_prompt_tokens\":40,\"n_ctx\":32}}"};
        for (String b : bodies) {
            String chat = EngineErrors.toOpenAiShape(b, 400, true);
            assertEquals("\"type\":\"invalid_request_error\",\"param\":\"messages\",\"code\":\"context_length_exceeded\"}}",
                chat.substring(chat.indexOf("\"type\"")), b);
            String completions = EngineErrors.toOpenAiShape(b, 400, false);
            assertEquals("\"type\":\"invalid_request_error\",\"param\":\"prompt\",\"code\":\"context_length_exceeded\"}}",
                completions.substring(completions.indexOf("\"type\"")), b);
        }
    }

    @Test
    void vllmsUnknownModelIsModelNotFound() {
        assertEquals(err("The model `x` does not exist.", "invalid_request_error", "model", "model_not_found"),
            EngineErrors.toOpenAiShape("{\"error\":{\"message\":\"The model `x` does not exist.\",\"type\":\"NotFoundError\","
                + "\"param\":\"model\",\"code\":404}}", 404, true));
    }

    @Test
    void inStreamErrorEventsOfBothEnginesBecomeOneShape() {
        String want = err("simulated engine failure mid-stream", "server_error", null, null);
        assertEquals(want, EngineErrors.streamErrorToOpenAiShape("{\"error\":{\"message\":\"simulated engine failure mid-stream\","
            + "\"type\":\"InternalServerError\",\"param\":null,\"code\":500}}", true));
        assertEquals(want, EngineErrors.streamErrorToOpenAiShape("{\"error\":{\"object\":\"error\",\"message\":\"simulated engine "
            + "failure mid-stream\",\"type\":\"BadRequestError\",\"param\":null,\"code\":400}}", true));
        assertEquals(want, EngineErrors.streamErrorToOpenAiShape("{\"object\":\"error\",\"message\":\"simulated engine failure "
            + "mid-stream\",\"type\":\"BadRequestError\",\"code\":400}", true));
        assertNull(EngineErrors.streamErrorToOpenAiShape("{\"choices\":[{\"finish_reason\":\"error\"}]}", true));
        assertNull(EngineErrors.streamErrorToOpenAiShape("{\"error\":null,\"choices\":[]}", true));
        assertNull(EngineErrors.streamErrorToOpenAiShape("[DONE]", true));
    }
}
