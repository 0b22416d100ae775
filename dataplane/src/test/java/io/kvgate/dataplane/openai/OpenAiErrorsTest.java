package io.kvgate.dataplane.openai;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class OpenAiErrorsTest {
    @Test
    void typeFollowsTheStatusInOpenAisVocabulary() {
        for (int s : new int[] {400, 404, 405, 408, 413, 415, 422, 431}) {
            assertEquals("invalid_request_error", OpenAiErrors.typeFor(s), "status " + s);
        }
        assertEquals("authentication_error", OpenAiErrors.typeFor(401));
        assertEquals("permission_error", OpenAiErrors.typeFor(403));
        assertEquals("rate_limit_error", OpenAiErrors.typeFor(429));
        assertEquals("timeout", OpenAiErrors.typeFor(504));
        for (int s : new int[] {500, 502, 503, 507}) {
            assertEquals("server_error", OpenAiErrors.typeFor(s), "status " + s);
        }
    }

    @Test
    void codesAreStringsNeverStatusNumbers() {
        assertEquals("{\"error\":{\"message\":\"m\",\"type\":\"t\",\"param\":null,\"code\":null}}",
            OpenAiErrors.json("m", "t", null, 404));
        assertEquals("{\"error\":{\"message\":\"m \\\"q\\\"\",\"type\":\"t\",\"param\":\"p\",\"code\":\"c\"}}",
            OpenAiErrors.json("m \"q\"", "t", "p", "c"));
    }

    @Test
    void unknownModelIsOpenAis404() {
        assertEquals("{\"error\":{\"message\":\"The model `gpt-x` does not exist.\",\"type\":\"invalid_request_error\","
            + "\"param\":\"model\",\"code\":\"model_not_found\"}}", OpenAiErrors.modelNotFoundJson("gpt-x"));
    }
}
