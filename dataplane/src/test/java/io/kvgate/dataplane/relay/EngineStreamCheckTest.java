package io.kvgate.dataplane.relay;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** The relay's check of an engine's SSE events, behind an {@link SseFramer}, with the stream split at every byte. */
class EngineStreamCheckTest {
    private static final ByteBufAllocator ALLOC = ByteBufAllocator.DEFAULT;
    private static final String CHUNK = "data: {\"id\":\"c1\",\"choices\":[{\"delta\":{\"content\":\"say \\\"error\\\"\"}}]}\n\n";
    private static final String VLLM_ERROR = "data: {\"error\":{\"message\":\"engine died\",\"type\":\"InternalServerError\","
        + "\"param\":null,\"code\":500}}\n\n";
    private static final String NORMALIZED = "data: {\"error\":{\"message\":\"engine died\",\"type\":\"server_error\","
        + "\"param\":null,\"code\":null}}\n\n";
    private static final String DONE = "data: [DONE]\n\n";

    private static ByteBuf buf(String s) {
        return Unpooled.copiedBuffer(s, StandardCharsets.UTF_8);
    }

    /** What the client receives for {@code stream} split at {@code split}, and whether the check saw an error. */
    private record Relayed(String text, boolean engineError, boolean done) {}

    private static Relayed relay(String stream, int split) {
        byte[] b = stream.getBytes(StandardCharsets.UTF_8);
        SseFramer framer = new SseFramer();
        EngineStreamCheck check = new EngineStreamCheck(true);
        StringBuilder out = new StringBuilder();
        ByteBuf first = check.check(ALLOC, framer.next(ALLOC, Unpooled.wrappedBuffer(b, 0, split)));
        out.append(first.toString(StandardCharsets.UTF_8));
        first.release();
        ByteBuf last = check.check(ALLOC, framer.finish(ALLOC, Unpooled.wrappedBuffer(b, split, b.length - split)));
        out.append(last.toString(StandardCharsets.UTF_8));
        last.release();
        return new Relayed(out.toString(), check.engineError(), check.endedWithDone());
    }

    @Test
    void ordinaryEventsPassUntouchedWhereverTheStreamIsSplit() {
        String stream = CHUNK + CHUNK + DONE;
        for (int i = 0; i <= stream.getBytes(StandardCharsets.UTF_8).length; i++) {
            Relayed r = relay(stream, i);
            assertEquals(stream, r.text(), "split at " + i);
            assertFalse(r.engineError());
            assertTrue(r.done(), "split at " + i);
        }
    }

    @Test
    void anEnginesErrorEventIsRewrittenWhereverTheStreamIsSplit() {
        String stream = CHUNK + VLLM_ERROR + DONE;
        for (int i = 0; i <= stream.getBytes(StandardCharsets.UTF_8).length; i++) {
            Relayed r = relay(stream, i);
            assertEquals(CHUNK + NORMALIZED + DONE, r.text(), "split at " + i);
            assertTrue(r.engineError(), "split at " + i);
            assertTrue(r.done(), "split at " + i);
        }
    }

    @Test
    void aStreamWithoutDoneIsSeenAsSuch() {
        for (int i = 0; i <= CHUNK.length(); i++) {
            assertFalse(relay(CHUNK + CHUNK, i).done(), "split at " + i);
        }
        assertFalse(relay(DONE + CHUNK, 0).done(), "[DONE] must be the last event");
        assertTrue(relay(CHUNK + "data:[DONE]\r\n\r\n", 3).done());
    }

    @Test
    void eventsWithoutAnErrorKeepTheirBuffer() {
        EngineStreamCheck check = new EngineStreamCheck(true);
        ByteBuf in = buf("data: {\"choices\":[{\"finish_reason\":\"error\"}]}\n\n");
        assertSame(in, check.check(ALLOC, in), "a value \"error\" that is not an error event is not rewritten");
        assertFalse(check.engineError());
        in.release();
    }

    @Test
    void missingDoneFramesEndTheStreamInTheVocabulary() {
        assertEquals("data: {\"error\":{\"message\":\"The engine ended the stream without [DONE]: the answer may be "
            + "incomplete.\",\"type\":\"server_error\",\"param\":null,\"code\":\"stream_truncated\"}}\n\ndata: [DONE]\n\n",
            EngineStreamCheck.missingDoneFrames(false, false));
        assertEquals("\n\ndata: [DONE]\n\n", EngineStreamCheck.missingDoneFrames(true, true));
    }
}
