package io.kvgate.tools.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(10)
class SseDecoderTest {
    private static final class Collector implements SseDecoder.Listener {
        final List<String> events = new ArrayList<>();
        int oversized;

        @Override
        public void onData(byte[] data, int length) {
            events.add(new String(data, 0, length, StandardCharsets.UTF_8));
        }

        @Override
        public void onOversized() {
            oversized++;
            events.add("<oversized>");
        }
    }

    private static List<String> decodeWhole(String stream) {
        Collector c = new Collector();
        new SseDecoder(1 << 16).feed(Unpooled.wrappedBuffer(stream.getBytes(StandardCharsets.UTF_8)), c);
        return c.events;
    }

    /** Decodes the stream split into two buffers at every position, and one byte at a time; all must agree. */
    private static List<String> decodeEverySplit(String stream, int maxEventBytes) {
        byte[] bytes = stream.getBytes(StandardCharsets.UTF_8);
        List<String> reference = null;
        for (int split = 0; split <= bytes.length; split++) {
            Collector c = new Collector();
            SseDecoder d = new SseDecoder(maxEventBytes);
            // Direct buffers take the copy path, heap buffers the array path: exercise both.
            ByteBuf first = split % 2 == 0 ? Unpooled.directBuffer(split).writeBytes(bytes, 0, split)
                : Unpooled.wrappedBuffer(bytes, 0, split);
            d.feed(first, c);
            d.feed(Unpooled.wrappedBuffer(bytes, split, bytes.length - split), c);
            first.release();
            if (reference == null) {
                reference = c.events;
            } else {
                assertEquals(reference, c.events, "split at byte " + split);
            }
        }
        Collector c = new Collector();
        SseDecoder d = new SseDecoder(maxEventBytes);
        for (byte b : bytes) {
            d.feed(new byte[] {b}, 0, 1, c);
        }
        assertEquals(reference, c.events, "one byte at a time");
        return reference;
    }

    @Test
    void openAiStreamAtEverySplit() {
        String stream = "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n"
            + "data: {\"choices\":[{\"delta\":{\"content\":\" there\"}}]}\n\n"
            + "data: [DONE]\n\n";
        assertEquals(List.of("{\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}",
            "{\"choices\":[{\"delta\":{\"content\":\" there\"}}]}", "[DONE]"), decodeEverySplit(stream, 1 << 16));
    }

    @Test
    void crlfAndLoneCrLineEndingsAtEverySplit() {
        assertEquals(List.of("a", "b", "c", "[DONE]"),
            decodeEverySplit("data: a\r\n\r\ndata: b\r\rdata:c\n\r\ndata: [DONE]\r\n\r\n", 1 << 16));
    }

    @Test
    void commentsOtherFieldsAndMultiLineDataAtEverySplit() {
        String stream = ": keep-alive\n\n"
            + "event: message\nid: 7\nretry: 100\ndata: line1\ndata: line2\n\n"
            + ":another comment\ndata:{\"x\":1}\n\n"
            + "event: ping\n\n"       // no data: not dispatched
            + "data\n\n"               // field without colon: empty data
            + "data:  two spaces\n\n"; // only one leading space is removed
        assertEquals(List.of("line1\nline2", "{\"x\":1}", "", " two spaces"), decodeEverySplit(stream, 1 << 16));
    }

    @Test
    void errorFrameThenDoneAtEverySplit() {
        String stream = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
            + "data: {\"error\":{\"message\":\"engine died\",\"type\":\"internal_error\",\"code\":500}}\n\n"
            + "data: [DONE]\n\n";
        List<String> events = decodeEverySplit(stream, 1 << 16);
        assertEquals(3, events.size());
        assertEquals("{\"error\":{\"message\":\"engine died\",\"type\":\"internal_error\",\"code\":500}}", events.get(1));
    }

    @Test
    void manyFramesInOneChunk() {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < 500; i++) {
            sb.append("data: {\"i\":").append(i).append("}\n\n");
        }
        List<String> events = decodeWhole(sb.toString());
        assertEquals(500, events.size());
        assertEquals("{\"i\":499}", events.get(499));
    }

    @Test
    void unterminatedLastEventIsNotDispatched() {
        assertEquals(List.of("a"), decodeEverySplit("data: a\n\ndata: [DONE]\n", 1 << 16));
    }

    @Test
    void oversizedEventIsDroppedAndReportedAndDecodingResumes() {
        String big = "x".repeat(100);
        assertEquals(List.of("<oversized>", "ok", "<oversized>", "ok2"), decodeEverySplit(
            "data: " + big + "\n\ndata: ok\n\ndata: " + "y".repeat(20) + "\ndata: " + "z".repeat(20) + "\n\ndata: ok2\n\n", 32));
    }

    @Test
    void resetDropsPartialState() {
        Collector c = new Collector();
        SseDecoder d = new SseDecoder(1024);
        d.feed(Unpooled.wrappedBuffer("data: partial".getBytes(StandardCharsets.UTF_8)), c);
        d.reset();
        d.feed(Unpooled.wrappedBuffer("data: next\n\n".getBytes(StandardCharsets.UTF_8)), c);
        assertEquals(List.of("next"), c.events);
    }

    @Test
    void readerIndexIsUntouched() {
        ByteBuf buf = Unpooled.copiedBuffer("data: a\n\n", StandardCharsets.UTF_8);
        new SseDecoder(64).feed(buf, new Collector());
        assertEquals(0, buf.readerIndex());
        buf.release();
    }
}
