package io.kvgate.tools.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(10)
class CompletionJsonTest {
    private static CompletionJson.Result inspect(String json, boolean wantText) {
        CompletionJson.Result r = new CompletionJson.Result();
        if (wantText) {
            r.text = new StringBuilder();
        }
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        assertTrue(CompletionJson.inspect(b, 0, b.length, r), json);
        return r;
    }

    private static boolean valid(String json) {
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        return CompletionJson.inspect(b, 0, b.length, new CompletionJson.Result());
    }

    @Test
    void chatChunkContent() {
        CompletionJson.Result r = inspect("{\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,"
            + "\"delta\":{\"role\":\"assistant\",\"content\":\"Héllo\"},\"finish_reason\":null}]}", true);
        assertTrue(r.hasChoices);
        assertFalse(r.error);
        assertEquals(5, r.contentChars);
        assertEquals("Héllo", r.text.toString());
        assertFalse(r.hasUsage());
    }

    @Test
    void roleOnlyAndEmptyContentChunksCarryNoContent() {
        assertEquals(0, inspect("{\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}", false).contentChars);
        assertEquals(0, inspect("{\"choices\":[{\"delta\":{\"content\":\"\"}}]}", false).contentChars);
        assertEquals(0, inspect("{\"choices\":[{\"delta\":{\"content\":null}}]}", false).contentChars);
    }

    @Test
    void reasoningCountsAsContentButIsNotHistory() {
        CompletionJson.Result r = inspect("{\"choices\":[{\"delta\":{\"reasoning_content\":\"hmm\"}}]}", true);
        assertEquals(3, r.contentChars);
        assertEquals("", r.text.toString());
    }

    @Test
    void completionsTextAndNonStreamMessage() {
        assertEquals("abc", inspect("{\"choices\":[{\"text\":\"abc\",\"index\":0}]}", true).text.toString());
        CompletionJson.Result r = inspect("{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":\"hi\"}}],"
            + "\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":2,\"total_tokens\":102,"
            + "\"prompt_tokens_details\":{\"cached_tokens\":64}}}", true);
        assertEquals("hi", r.text.toString());
        assertEquals(100, r.promptTokens);
        assertEquals(2, r.completionTokens);
        assertEquals(64, r.cachedTokens);
    }

    @Test
    void usageChunkWithEmptyChoicesAndNullDetails() {
        CompletionJson.Result r = inspect("{\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":5,"
            + "\"prompt_tokens_details\":null}}", false);
        assertTrue(r.hasChoices);
        assertEquals(0, r.choiceCount);
        assertEquals(10, r.promptTokens);
        assertEquals(-1, r.cachedTokens);
    }

    @Test
    void errorShapes() {
        assertTrue(inspect("{\"error\":{\"message\":\"boom\",\"type\":\"x\",\"code\":500}}", false).error);
        assertTrue(inspect("{\"object\":\"error\",\"message\":\"boom\",\"type\":\"x\",\"code\":400}", false).error);
        assertFalse(inspect("{\"error\":null,\"choices\":[]}", false).error);
    }

    @Test
    void invalidInputs() {
        assertFalse(valid(""));
        assertFalse(valid("[DONE]"));
        assertFalse(valid("[]"));
        assertFalse(valid("{\"choices\":[{\"delta\":{\"content\":\"a\"}}]"));
        assertFalse(valid("{\"a\":1} {\"b\":2}"));
        assertFalse(valid("{\"a\":tru}"));
        assertFalse(valid("not json"));
        assertTrue(valid("{}"));
    }

    @Test
    void resultIsClearedBetweenCalls() {
        CompletionJson.Result r = new CompletionJson.Result();
        byte[] a = "{\"error\":{},\"usage\":{\"prompt_tokens\":3}}".getBytes(StandardCharsets.UTF_8);
        byte[] b = "{\"choices\":[]}".getBytes(StandardCharsets.UTF_8);
        CompletionJson.inspect(a, 0, a.length, r);
        CompletionJson.inspect(b, 0, b.length, r);
        assertFalse(r.error);
        assertFalse(r.hasUsage());
    }
}
