package io.kvgate.dataplane.relay;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * The first-token detector: which SSE events carry generated output, counted once per event whatever the read
 * boundaries (every byte apart, every two-way split), as the relay feeds it.
 */
class ContentEventScannerTest {
    /** A vLLM chat stream: role chunk (empty content), 3 content chunks, a tool-call chunk, finish, usage, [DONE]. */
    private static final String CHAT_STREAM = ""
        + "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null}]}\n\n"
        + "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n"
        + "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\": \"lo \\\"world\\\"\"}}]}\r\n\r\n"
        + ": keep-alive comment\n\n"
        + "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"hm\"}}]}\n\n"
        + "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"t\"}]}}]}\n\n"
        + "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":null,\"tool_calls\":[]},\"finish_reason\":\"stop\"}]}\n\n"
        + "data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":4}}\n\n"
        + "data: [DONE]\n\n";
    private static final int CHAT_OUTPUT_EVENTS = 4;

    /** A completions stream: {@code text} members; the last event's text is empty. */
    private static final String COMPLETION_STREAM = ""
        + "data: {\"choices\":[{\"index\":0,\"text\":\"a\",\"logprobs\":{\"content\":[{\"token\":\"a\"}]}}]}\n\n"
        + "data: {\"choices\":[{\"index\":0,\"text\":\"b\"}]}\n\n"
        + "data: {\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":\"length\"}]}\n\n"
        + "data: [DONE]\n\n";

    private static int whole(String s) {
        return new ContentEventScanner().scan(buf(s));
    }

    private static ByteBuf buf(String s) {
        return Unpooled.wrappedBuffer(s.getBytes(StandardCharsets.UTF_8));
    }

    @Test
    void countsOnlyEventsWithOutput() {
        assertEquals(CHAT_OUTPUT_EVENTS, whole(CHAT_STREAM));
        assertEquals(2, whole(COMPLETION_STREAM));
    }

    @Test
    void anEventIsCountedWhenItsBlankLineArrives() {
        ContentEventScanner s = new ContentEventScanner();
        assertEquals(0, s.scan(buf("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n")));
        assertEquals(1, s.scan(buf("\n")));
    }

    /** Names inside string values, escaped quotes and member-like text are never taken for a member. */
    @Test
    void textInsideValuesIsNotAMember() {
        assertEquals(0, whole("data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}],"
            + "\"note\":\"\\\"content\\\":\\\"x\\\", \\\"text\\\": \\\"y\\\"\"}\n\n"));
        assertEquals(0, whole("data: {\"type\":\"content\",\"x\":\"text\",\"error\":{\"message\":\"content\"}}\n\n"));
        assertEquals(0, whole("data: {\"error\":{\"message\":\"engine failed\",\"code\":\"x\"}}\n\ndata: [DONE]\n\n"));
    }

    /** A malformed event (an unterminated string) does not hide the next one: every line starts outside a string. */
    @Test
    void aBrokenEventDoesNotDesynchronizeTheNext() {
        assertEquals(1, whole("data: {\"a\":\"unterminated\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"ok\"}}]}\n\n"));
    }

    @Test
    void everyByteApartCountsTheSame() {
        for (String stream : new String[] {CHAT_STREAM, COMPLETION_STREAM}) {
            byte[] b = stream.getBytes(StandardCharsets.UTF_8);
            ContentEventScanner s = new ContentEventScanner();
            int n = 0;
            for (byte x : b) {
                n += s.scan(Unpooled.wrappedBuffer(new byte[] {x}));
            }
            assertEquals(whole(stream), n, stream);
        }
    }

    @Test
    void everyTwoWaySplitCountsTheSame() {
        byte[] b = CHAT_STREAM.getBytes(StandardCharsets.UTF_8);
        for (int cut = 0; cut <= b.length; cut++) {
            ContentEventScanner s = new ContentEventScanner();
            int n = s.scan(Unpooled.wrappedBuffer(b, 0, cut)) + s.scan(Unpooled.wrappedBuffer(b, cut, b.length - cut));
            assertEquals(CHAT_OUTPUT_EVENTS, n, "split at " + cut);
        }
    }
}
