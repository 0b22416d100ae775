package io.kvgate.dataplane.relay;

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
 * (or an {@code "object":"error"}) matches. Event-loop only; one per relayed stream. Public (its constructor and
 * {@link #check}) so perf's {@code SseRewriteBench} runs the relay's stream check from its own package.
 */
public final class EngineStreamCheck {
    private final ByteMatcher errorToken = new ByteMatcher("\"error\"".getBytes(StandardCharsets.US_ASCII));
    private static final String DONE = "[DONE]";

    private final boolean chat;
    private boolean lastWasDone;
    private boolean engineError;

    public EngineStreamCheck(boolean chat) {
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
    public ByteBuf check(ByteBufAllocator alloc, ByteBuf events) {
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
        int verdict = lastDataIsDone(events);
        if (verdict != NO_DATA) {
            lastWasDone = verdict == DONE_EVENT;
        }
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

    private static final int NO_DATA = 0;
    private static final int DONE_EVENT = 1;
    private static final int OTHER_DATA = 2;

    /**
     * Whether the last event of {@code events} that carries data is {@code data: [DONE]} ({@link #DONE_EVENT}), other
     * data ({@link #OTHER_DATA}), or none has data ({@link #NO_DATA}: comments, ids): the verdict
     * {@link #rewriteErrors} reaches event by event, reached from the end. The last event is usually one ASCII line,
     * judged on its bytes without decoding; any other is decoded. (The last line alone judged before: a multi-line
     * {@code data: [DONE]\ndata: [DONE]} event was [DONE] here but not when it shared a buffer with an error event,
     * and a comment after [DONE] undid it here only; fuzz tier finding, issue #43.)
     */
    private static int lastDataIsDone(ByteBuf events) {
        int start = events.readerIndex();
        int end = events.writerIndex();
        while (end > start) {
            int contentEnd = end;
            while (contentEnd > start && isLineEnd(events.getByte(contentEnd - 1))) {
                contentEnd--;
            }
            if (contentEnd == start) {
                return NO_DATA;
            }
            int eventStart = contentEnd - 1;
            // One ASCII line is judged on its bytes; anything else as rewriteErrors judges it (String.strip()
            // also strips non-ASCII spaces).
            boolean oneLine = events.getByte(eventStart) >= 0;
            while (eventStart > start && !blankLineEndsAt(events, start, eventStart - 1)) {
                byte c = events.getByte(eventStart - 1);
                oneLine &= !isLineEnd(c) && c >= 0;
                eventStart--;
            }
            // Blank lines before the event's first line: "\n" or "\r\n", as the framer and dataOf split lines. A lone
            // "\r" is content there (a line "\rdata: [DONE]" carries no data), so it is here too (fuzz tier finding).
            while (eventStart < contentEnd && (events.getByte(eventStart) == '\n'
                || (events.getByte(eventStart) == '\r' && eventStart + 1 < contentEnd && events.getByte(eventStart + 1) == '\n'))) {
                eventStart++;
            }
            int verdict = oneLine ? lineVerdict(events, eventStart, contentEnd)
                : textVerdict(events.toString(eventStart, contentEnd - eventStart, StandardCharsets.UTF_8));
            if (verdict != NO_DATA) {
                return verdict;
            }
            end = eventStart;
        }
        return NO_DATA;
    }

    /** One line {@code [from, to)}: a data line with [DONE] (spaces around it allowed), other data, or no data. */
    private static int lineVerdict(ByteBuf b, int from, int to) {
        if (to - from < 5 || b.getByte(from) != 'd' || b.getByte(from + 1) != 'a' || b.getByte(from + 2) != 't'
            || b.getByte(from + 3) != 'a' || b.getByte(from + 4) != ':') {
            return NO_DATA;
        }
        int s = from + 5;
        int e = to;
        while (s < e && isAsciiWhitespace(b.getByte(s))) {
            s++;
        }
        while (e > s && isAsciiWhitespace(b.getByte(e - 1))) {
            e--;
        }
        if (s == e) {
            return NO_DATA; // blank data, as payload.isBlank() in rewriteErrors
        }
        if (e - s != DONE.length()) {
            return OTHER_DATA;
        }
        for (int i = 0; i < DONE.length(); i++) {
            if (b.getByte(s + i) != DONE.charAt(i)) {
                return OTHER_DATA;
            }
        }
        return DONE_EVENT;
    }

    private static int textVerdict(String event) {
        String payload = dataOf(event);
        if (payload == null || payload.isBlank()) {
            return NO_DATA;
        }
        return DONE.equals(payload.strip()) ? DONE_EVENT : OTHER_DATA;
    }

    /** Whether a blank line ({@code \n\n} or {@code \n\r\n}, as {@link SseRewriter#eventEnd}) ends at {@code i}. */
    private static boolean blankLineEndsAt(ByteBuf b, int start, int i) {
        if (i - 1 < start || b.getByte(i) != '\n') {
            return false;
        }
        byte p = b.getByte(i - 1);
        return p == '\n' || (p == '\r' && i - 2 >= start && b.getByte(i - 2) == '\n');
    }

    private static boolean isLineEnd(byte c) {
        return c == '\n' || c == '\r';
    }

    /** What {@link String#strip()} strips among ASCII bytes. */
    private static boolean isAsciiWhitespace(byte c) {
        return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
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
