package io.kvgate.dataplane.relay;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** Mid-stream failover's stitching of several engines' SSE streams into the client's one (issue #41). */
class StreamStitchTest {
    private static final ByteBufAllocator ALLOC = ByteBufAllocator.DEFAULT;

    private static String pass(StreamStitch s, String events) {
        ByteBuf out = s.onEvents(ALLOC, Unpooled.copiedBuffer(events, StandardCharsets.UTF_8));
        String text = out.toString(StandardCharsets.UTF_8);
        out.release();
        return text;
    }

    private static String chunk(String id, long created, String model, String content, String finish) {
        return "data: {\"id\":\"" + id + "\",\"object\":\"chat.completion.chunk\",\"created\":" + created + ",\"model\":\""
            + model + "\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + content + "\"},\"finish_reason\":"
            + (finish == null ? "null" : "\"" + finish + "\"") + "}]}\n\n";
    }

    @Test
    void firstEngineIsPassedByteForByteAndTheContinuationTakesItsIdentity() {
        StreamStitch s = new StreamStitch(true);
        String role = "data: {\"id\":\"chatcmpl-a\",\"object\":\"chat.completion.chunk\",\"created\":100,\"model\":\"m\","
            + "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n";
        String first = role + chunk("chatcmpl-a", 100, "m", "the", null) + chunk("chatcmpl-a", 100, "m", " cache", null);
        assertEquals(first, pass(s, first));
        assertEquals("the cache", s.generatedText());
        assertEquals(2, s.generatedTokens());
        assertFalse(s.wantsContinuation());

        s.nextLeg();
        String roleB = "data: {\"id\":\"chatcmpl-b\",\"object\":\"chat.completion.chunk\",\"created\":200,\"model\":\"m2\","
            + "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n";
        String out = pass(s, roleB + chunk("chatcmpl-b", 200, "m2", " gateway", null)
            + chunk("chatcmpl-b", 200, "m2", "", "stop")
            + "data: {\"id\":\"chatcmpl-b\",\"object\":\"chat.completion.chunk\",\"created\":200,\"model\":\"m2\",\"choices\":[],"
            + "\"usage\":{\"prompt_tokens\":14,\"completion_tokens\":1,\"total_tokens\":15}}\n\ndata: [DONE]\n\n");
        assertFalse(out.contains("\"role\""), "the second role chunk is dropped: " + out);
        assertFalse(out.contains("chatcmpl-b") || out.contains(":200") || out.contains("m2"), out);
        assertTrue(out.contains("\"id\":\"chatcmpl-a\"") && out.contains("\"created\":100"), out);
        assertTrue(out.contains("\"content\":\" gateway\""), out);
        // the carried 2 tokens: completion 1 + 2, the continuation's prompt (14) minus the carried text (2)
        assertTrue(out.contains("\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3,\"total_tokens\":15}"), out);
        assertTrue(out.endsWith("data: [DONE]\n\n"), out);
        assertEquals(1, out.split("\\[DONE]", -1).length - 1);
        assertEquals("the cache gateway", s.generatedText());
        assertTrue(s.finished());
    }

    /** The resume gap ends at the continuing engine's first output, not at its role chunk. */
    @Test
    void aLegHasOutputFromItsFirstContentOnAndEachNewLegStartsWithout() {
        StreamStitch s = new StreamStitch(true);
        String role = "data: {\"id\":\"chatcmpl-a\",\"object\":\"chat.completion.chunk\",\"created\":100,\"model\":\"m\","
            + "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n";
        pass(s, role);
        assertFalse(s.legHasOutput(), "a role chunk is not output");
        pass(s, chunk("chatcmpl-a", 100, "m", "the", null));
        assertTrue(s.legHasOutput());
        s.nextLeg();
        assertFalse(s.legHasOutput());
        pass(s, role.replace("chatcmpl-a", "chatcmpl-b"));
        assertFalse(s.legHasOutput(), "the continuing engine's role chunk is not output either");
        pass(s, chunk("chatcmpl-b", 200, "m", " cache", null));
        assertTrue(s.legHasOutput());
    }

    @Test
    void anEngineErrorEventIsHeldBackWithEverythingAfterIt() {
        StreamStitch s = new StreamStitch(false);
        String ok = "data: {\"id\":\"cmpl-1\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\" a\","
            + "\"finish_reason\":null}]}\n\n";
        String out = pass(s, ok + "data: {\"error\":{\"message\":\"boom\",\"code\":500}}\n\ndata: [DONE]\n\n");
        assertEquals(ok, out);
        assertTrue(s.wantsContinuation() && s.engineError());
        assertTrue(s.engineErrorText().contains("boom"));
        assertEquals("", pass(s, ok), "nothing of the failed engine after its error");
        s.nextLeg();
        assertFalse(s.wantsContinuation());
        assertEquals(" a", s.generatedText());
    }

    @Test
    void aStreamCutShortIsACandidateButAFinishedOneIsNot() {
        StreamStitch cut = new StreamStitch(false);
        pass(cut, "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"text\":\" a\",\"finish_reason\":null}]}\n\n");
        cut.onLegEnd();
        assertTrue(cut.wantsContinuation());
        assertFalse(cut.engineError());

        StreamStitch done = new StreamStitch(false);
        pass(done, "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"text\":\" a\",\"finish_reason\":\"length\"}]}\n\n");
        done.onLegEnd();
        assertFalse(done.wantsContinuation(), "finished without [DONE] is the relay's truncation case, not a continuation");
    }

    @Test
    void tokenIdsAndPromptIdsAreKeptAndDroppedFromContinuations() {
        StreamStitch s = new StreamStitch(false);
        pass(s, "data: {\"id\":\"c\",\"created\":5,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\" a\","
            + "\"prompt_token_ids\":[1,2],\"token_ids\":[7],\"finish_reason\":null}]}\n\n"
            + "data: {\"id\":\"c\",\"created\":5,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\" b\",\"token_ids\":[8],"
            + "\"finish_reason\":null}]}\n\n");
        assertArrayEquals(new int[] {1, 2}, s.promptIds());
        assertArrayEquals(new int[] {7, 8}, s.generatedIds());
        s.nextLeg();
        String out = pass(s, "data: {\"id\":\"d\",\"created\":6,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\" c\","
            + "\"prompt_token_ids\":[1,2,7,8],\"token_ids\":[9],\"finish_reason\":\"length\"}],"
            + "\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":1,\"total_tokens\":5}}\n\n");
        assertFalse(out.contains("prompt_token_ids"), out);
        assertTrue(out.contains("\"token_ids\":[9]"), out);
        // the prompt's reported ids give the original prompt's size exactly
        assertTrue(out.contains("\"prompt_tokens\":2,\"completion_tokens\":3,\"total_tokens\":5"), out);
        assertArrayEquals(new int[] {7, 8, 9}, s.generatedIds());
    }

    @Test
    void outputWithoutIdsMeansNoIdsAndAToolCallIsNoted() {
        StreamStitch s = new StreamStitch(true);
        pass(s, chunk("x", 1, "m", "hi", null) + "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":"
            + "[{\"index\":0,\"function\":{\"name\":\"f\"}}]},\"finish_reason\":null}]}\n\n: comment\n\n");
        assertNull(s.generatedIds());
        assertTrue(s.toolCallOpen());
    }
}
