package io.kvgate.dataplane.proxy;

import io.kvgate.dataplane.openai.OpenAiErrors;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import java.nio.charset.StandardCharsets;

/**
 * What the relay checks in an engine's SSE stream (issue #13 item 5), on the complete events {@link SseFramer}
 * releases: an engine's in-stream error event ({@code data: {"error":…}}, each engine in its own shape) is rewritten
 * into the gateway's error vocabulary ({@link EngineErrors#streamErrorToOpenAiShape}) and marks the stream failed;
 * whether the stream's last event was {@code data: [DONE]} decides, at its end, whether the gateway adds an error
 * event and {@code [DONE]} itself. Ordinary events are forwarded untouched, found with one byte search: a JSON key or
 * value {@code "error"} cannot appear inside a JSON string without its quotes escaped, so only a real error member
 * (or an {@code "object":"error"}) matches. Event-loop only; one per relayed stream.
 */
final class EngineStreamCheck {
    private final ByteMatcher errorToken = new ByteMatcher("\"error\"".getBytes(StandardCharsets.US_ASCII));
    private static final String DONE = "[DONE]";

    private final boolean chat;
    private boolean lastWasDone;
    private boolean engineError;

    EngineStreamCheck(boolean chat) {
        this.chat = chat;
    }

    /** Whether the engine sent an error event (rewritten) in this stream. */
    boolean engineError() {
        return engineError;
    }

    /** Whether the last event seen was {@code data: [DONE]}. */
    boolean endedWithDone() {
        return lastWasDone;
    }

    /**
     * Checks complete events on their way to the client; returns {@code events} itself, or (when it held an error
     * event) a rewritten buffer, {@code events} released. The caller owns what is returned.
     */
    ByteBuf check(ByteBufAllocator alloc, ByteBuf events) {
        if (!events.isReadable()) {
            return events;
        }
        if (errorToken.find(events) >= 0) {
            ByteBuf rewritten = rewriteErrors(alloc, events);
            if (rewritten != events) {
                events.release();
                return rewritten;
            }
        }
        lastWasDone = tailIsDone(events);
        return events;
    }

    /**
     * The events with every engine error event replaced by one in the vocabulary (or {@code events} if none was).
     * Events are cut on the bytes where the framer cuts them ({@link SseRewriter#eventEnd}) and only an error event
     * is decoded and replaced: every other event goes out as the engine sent it. (Decoding the whole buffer turned
     * invalid UTF-8 in an ordinary event into U+FFFD, and only when that event shared a buffer with an error event,
     * so the client's bytes depended on how the engine's stream was split: fuzz finding, issue #43.)
     */
    private ByteBuf rewriteErrors(ByteBufAllocator alloc, ByteBuf events) {
        ByteBuf out = null;
        int end = events.writerIndex();
        int copiedTo = events.readerIndex();
        for (int from = copiedTo; from < end; ) {
            int eventEnd = SseRewriter.eventEnd(events, from, end);
            String payload = dataOf(events.toString(from, eventEnd - from, StandardCharsets.UTF_8));
            String normalized = payload != null && payload.contains("\"error\"")
                ? EngineErrors.streamErrorToOpenAiShape(payload, chat) : null;
            if (normalized != null) {
                if (out == null) {
                    out = alloc.buffer(events.readableBytes() + 64);
                }
                // Line ends before the event's first line are blank lines of their own, not the event's: they stay
                // (else "\n\n\n" + error event lost a "\n" or not depending on where the framer had cut).
                int firstLine = from;
                while (firstLine < eventEnd && (events.getByte(firstLine) == '\n' || events.getByte(firstLine) == '\r')) {
                    firstLine++;
                }
                out.writeBytes(events, copiedTo, firstLine - copiedTo);
                out.writeCharSequence("data: " + normalized + "\n\n", StandardCharsets.UTF_8);
                copiedTo = eventEnd;
                engineError = true;
            }
            if (payload != null && !payload.isBlank()) {
                lastWasDone = DONE.equals(payload.strip());
            }
            from = eventEnd;
        }
        if (out == null) {
            return events;
        }
        out.writeBytes(events, copiedTo, end - copiedTo);
        return out;
    }

    /** The event's data (its {@code data:} lines joined by newlines, as SSE defines), or null if it has none. */
    private static String dataOf(String event) {
        StringBuilder data = null;
        for (String line : event.split("\r?\n")) {
            if (line.startsWith("data:")) {
                String v = line.startsWith("data: ") ? line.substring(6) : line.substring(5);
                if (data == null) {
                    data = new StringBuilder(v);
                } else {
                    data.append('\n').append(v);
                }
            }
        }
        return data == null ? null : data.toString();
    }

    /** Whether the last event in {@code events} is {@code data: [DONE]} (trailing blank lines ignored). */
    private static boolean tailIsDone(ByteBuf events) {
        int end = events.writerIndex();
        while (end > events.readerIndex() && (events.getByte(end - 1) == '\n' || events.getByte(end - 1) == '\r'
            || events.getByte(end - 1) == ' ')) {
            end--;
        }
        int start = Math.max(events.readerIndex(), end - 16);
        String tail = events.toString(start, end - start, StandardCharsets.US_ASCII);
        int line = Math.max(tail.lastIndexOf('\n'), tail.lastIndexOf('\r'));
        String last = tail.substring(line + 1);
        return last.equals("data: " + DONE) || last.equals("data:" + DONE);
    }

    /**
     * What ends a stream that finished without {@code [DONE]}: an error event (unless the engine already sent one)
     * and {@code [DONE]}; {@code terminate} first ends an event the engine left unterminated.
     */
    static String missingDoneFrames(boolean engineErrorSent, boolean terminate) {
        String prefix = terminate ? "\n\n" : "";
        if (engineErrorSent) {
            return prefix + "data: [DONE]\n\n";
        }
        return prefix + OpenAiErrors.sseErrorFrames("The engine ended the stream without [DONE]: the answer may be "
            + "incomplete.", OpenAiErrors.STREAM_ERROR_TYPE, "stream_truncated");
    }
}
