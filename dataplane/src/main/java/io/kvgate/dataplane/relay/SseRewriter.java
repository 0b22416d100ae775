package io.kvgate.dataplane.relay;

import io.kvgate.dataplane.request.AnswerRewrite;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import java.nio.charset.StandardCharsets;

/**
 * Rewrites an engine's SSE stream event by event for an {@link AnswerRewrite} (issue #13 items 2, 4, 5), on the
 * complete events {@link SseFramer} releases (after {@link EngineStreamCheck}):
 * <ul>
 *   <li>alias: each chunk's {@code model} is written back to the client's name;</li>
 *   <li>greedy replication: each chunk is sent n times, copy {@code i} with each choice index {@code j} as
 *       {@code j·n + i} (so a chunk's choice reaches every index, in order); the usage chunk's completion counts
 *       ×n, the prompt counted once;</li>
 *   <li>forced usage: the final usage-only chunk ({@code "choices": []} with a usage object) is counted, then
 *       dropped when the client did not ask for it. Neither engine adds anything else because of the forced
 *       {@code include_usage}: vLLM writes no {@code usage} member on other chunks (it serializes them with
 *       {@code exclude_unset}), SGLang writes {@code "usage": null} on every chunk whether or not it was asked.
 *       llama.cpp writes its {@code timings} on its last chunk, which the forced usage makes the usage chunk: under
 *       {@link AnswerRewrite#usageChunkExtras} the stream's finish chunk is held back until the next event, and the
 *       removed usage chunk's members of its own ({@code timings}, anything but id, object, created, model,
 *       system_fingerprint, choices and usage) are spliced into it, where the engine puts them unasked.</li>
 * </ul>
 * Each event's JSON is read by {@link AnswerJson} (Jackson's streaming parser, no tree) and written back as the
 * engine's bytes with only those values spliced. When only the usage chunk is to be dropped, events are checked with
 * a byte search first and only a chunk holding a usage object is parsed; a batch with nothing to change is returned
 * as the same buffer. Error events (already in the gateway's vocabulary), {@code [DONE]}, comments and anything that
 * is not a single JSON object pass unchanged. One per stream; event-loop only. Public (its constructor and
 * {@link #rewrite}) so perf's {@code SseRewriteBench} measures the rewrites from its own package.
 */
public final class SseRewriter {
    private static final byte[] DATA = "data: ".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] END = "\n\n".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] USAGE = "\"usage\"".getBytes(StandardCharsets.US_ASCII);
    /** A choice that finished: its reason is a string (a chunk still generating has {@code null}). */
    private static final byte[] FINISHED = "\"finish_reason\":\"".getBytes(StandardCharsets.US_ASCII);
    /** The members of a usage-only chunk that are the chunk's own; any other came from the engine unasked. */
    private static final java.util.Set<String> USAGE_CHUNK_MEMBERS = java.util.Set.of("id", "object", "created", "model",
        "system_fingerprint", "choices", "usage", "service_tier");
    private static final com.fasterxml.jackson.databind.ObjectMapper JSON = new com.fasterxml.jackson.databind.ObjectMapper();

    private final AnswerRewrite rw;
    /** Alias or replication: every chunk changes, so each is parsed. */
    private final boolean everyEvent;
    private final AnswerJson json = new AnswerJson();
    private final ByteMatcher usageToken = new ByteMatcher(USAGE);
    private byte[] scratch = new byte[512];
    private int payloadLength;
    private final ByteMatcher finishedToken = new ByteMatcher(FINISHED);
    /** {@link AnswerRewrite#usageChunkExtras}: the latest finish chunk as it goes to the client, held; or null. */
    private byte[] held;
    /** Set by {@link #rewriteEvent} for a removed usage chunk: its members of the engine's own ({@code ,"k":v...}), or null. */
    private byte[] removedExtras;
    private boolean removedUsageChunk;

    public SseRewriter(AnswerRewrite rw) {
        this.rw = rw;
        this.everyEvent = rw.clientModel() != null || rw.replicas() > 1;
    }

    /**
     * Takes over {@code events} (complete events, plus at a stream's end possibly an unterminated tail, passed as it
     * is) and returns what goes to the client: {@code events} itself when nothing changed. Usage chunks are fed to
     * {@code usage} (as the client would see them, before any is dropped).
     */
    public ByteBuf rewrite(ByteBufAllocator alloc, ByteBuf events, UsageScanner usage) {
        if (rw.usageChunkExtras() && events.isReadable()
            && (held != null || usageToken.find(events) >= 0 || finishedToken.find(events) >= 0)) {
            return rewriteHolding(alloc, events, usage);
        }
        if (!events.isReadable() || (!everyEvent && usageToken.find(events) < 0)) {
            return events;
        }
        ByteBuf out = null;
        int kept = events.readerIndex(); // events before this one that are unchanged and not yet copied
        int from = events.readerIndex();
        int to = events.writerIndex();
        while (from < to) {
            int end = eventEnd(events, from, to);
            ByteBuf rewritten = rewriteEvent(alloc, events, from, end, usage);
            if (rewritten != null) {
                if (out == null) {
                    out = alloc.buffer(Math.max(256, (to - events.readerIndex()) * Math.min(rw.replicas(), 64) + 64));
                }
                out.writeBytes(events, kept, from - kept);
                out.writeBytes(rewritten);
                rewritten.release();
                kept = end;
            }
            from = end;
        }
        if (out == null) {
            return events;
        }
        out.writeBytes(events, kept, to - kept);
        events.release();
        return out;
    }

    /**
     * {@link AnswerRewrite#usageChunkExtras}: each event as {@link #rewrite} would send it, except that a finish chunk
     * waits in {@link #held} for the next event; a removed usage chunk's own members are spliced into the held chunk,
     * which then goes out; any other event sends the held chunk first.
     */
    private ByteBuf rewriteHolding(ByteBufAllocator alloc, ByteBuf events, UsageScanner usage) {
        ByteBuf out = alloc.buffer(events.readableBytes() + (held == null ? 0 : held.length) + 64);
        int from = events.readerIndex();
        int to = events.writerIndex();
        while (from < to) {
            int end = eventEnd(events, from, to);
            removedUsageChunk = false;
            removedExtras = null;
            ByteBuf rewritten = rewriteEvent(alloc, events, from, end, usage);
            ByteBuf ev = rewritten != null ? rewritten : events.retainedSlice(from, end - from);
            if (removedUsageChunk) {
                if (held != null) {
                    out.writeBytes(removedExtras == null ? held : withMembers(held, removedExtras));
                    held = null;
                }
                out.writeBytes(ev);
            } else if (finishedToken.find(events, from, end) >= 0 && terminated(events, end)) {
                if (held != null) {
                    out.writeBytes(held);
                }
                held = new byte[ev.readableBytes()];
                ev.getBytes(ev.readerIndex(), held);
            } else {
                if (held != null) {
                    out.writeBytes(held);
                    held = null;
                }
                out.writeBytes(ev);
            }
            ev.release();
            from = end;
        }
        events.release();
        return out;
    }

    /** Whether the event ending at {@code end} is terminated (an unterminated tail passes as it is, never held). */
    private static boolean terminated(ByteBuf b, int end) {
        return end >= 2 && b.getByte(end - 1) == '\n';
    }

    /**
     * The stream's end: the finish chunk still held (no event followed it) appended to {@code out}, before what the
     * gateway adds after the engine's last event.
     */
    ByteBuf releaseHeld(ByteBufAllocator alloc, ByteBuf out) {
        if (held == null) {
            return out;
        }
        ByteBuf joined = alloc.buffer(out.readableBytes() + held.length);
        joined.writeBytes(out);
        joined.writeBytes(held);
        out.release();
        held = null;
        return joined;
    }

    /** {@code events} (one or more SSE events) with {@code members} inserted before the last event's closing brace. */
    private static byte[] withMembers(byte[] events, byte[] members) {
        int close = events.length - 1;
        while (close >= 0 && events[close] != '}') {
            close--;
        }
        if (close < 0) {
            return events;
        }
        byte[] out = new byte[events.length + members.length];
        System.arraycopy(events, 0, out, 0, close);
        System.arraycopy(members, 0, out, close, members.length);
        System.arraycopy(events, close, out, close + members.length, events.length - close);
        return out;
    }

    /**
     * The members of the scanned usage chunk ({@link #scratch}) other than the chunk's own, as {@code ,"name":value}
     * in the engine's order, or null when it has none. Parsed as a tree: once per stream, on its last chunk.
     */
    private byte[] engineMembers() {
        try {
            com.fasterxml.jackson.databind.JsonNode chunk = JSON.readTree(scratch, 0, payloadLength);
            java.io.ByteArrayOutputStream members = null;
            for (var it = chunk.properties().iterator(); it.hasNext(); ) {
                var member = it.next();
                if (USAGE_CHUNK_MEMBERS.contains(member.getKey())) {
                    continue;
                }
                if (members == null) {
                    members = new java.io.ByteArrayOutputStream();
                }
                members.write(',');
                members.write(JSON.writeValueAsBytes(member.getKey()));
                members.write(':');
                members.write(JSON.writeValueAsBytes(member.getValue()));
            }
            return members == null ? null : members.toByteArray();
        } catch (java.io.IOException e) {
            return null; // scanned as one object already; an unreadable one keeps nothing rather than fail the stream
        }
    }

    /** The event's replacement (possibly empty: dropped), or null to keep its bytes as they are. */
    private ByteBuf rewriteEvent(ByteBufAllocator alloc, ByteBuf events, int from, int end, UsageScanner usage) {
        if (!everyEvent && !hasUsageObject(events, from, end)) {
            return null;
        }
        if (!payload(events, from, end) || payloadLength == 0 || scratch[0] != '{') {
            return null; // [DONE], a comment, fields other than data, an unterminated tail
        }
        if (!json.scan(scratch, 0, payloadLength) || json.error) {
            return null;
        }
        byte[] model = rw.clientModelJson();
        int n = rw.replicas();
        if (json.usageOnly()) {
            ByteBuf ev = alloc.buffer(payloadLength + 32);
            ev.writeBytes(DATA);
            json.write(ev, model, n, -1, false, n);
            ev.writeBytes(END);
            usage.scanUsage(ev);
            if (rw.stripUsage()) {
                ev.clear(); // counted; the client did not ask for it
                removedUsageChunk = true;
                removedExtras = rw.usageChunkExtras() ? engineMembers() : null;
            }
            return ev;
        }
        if (!everyEvent) {
            return null; // a chunk with continuous usage: kept as the engine sent it
        }
        ByteBuf ev = alloc.buffer((payloadLength + 32) * Math.min(n, 64));
        if (n > 1 && json.choiceCount > 0) {
            for (int i = 0; i < n; i++) {
                ev.writeBytes(DATA);
                json.write(ev, model, n, i, false, 1);
                ev.writeBytes(END);
            }
        } else {
            ev.writeBytes(DATA);
            json.write(ev, model, n, -1, false, 1);
            ev.writeBytes(END);
        }
        return ev;
    }

    /**
     * Copies the event's data into {@link #scratch} (its {@code data:} lines joined by newlines, as SSE defines);
     * false when the event has a line that is not {@code data:} (an {@code event:}, {@code id:}, a comment...),
     * which this rewriter leaves alone, or no data at all.
     */
    private boolean payload(ByteBuf b, int from, int end) {
        payloadLength = 0;
        boolean any = false;
        int i = from;
        while (i < end) {
            int nl = b.indexOf(i, end, (byte) '\n');
            int lineEnd = nl < 0 ? end : nl;
            int stop = lineEnd > i && b.getByte(lineEnd - 1) == '\r' ? lineEnd - 1 : lineEnd;
            if (stop > i) {
                if (stop - i < 5 || b.getByte(i) != 'd' || b.getByte(i + 1) != 'a' || b.getByte(i + 2) != 't'
                    || b.getByte(i + 3) != 'a' || b.getByte(i + 4) != ':') {
                    return false;
                }
                int v = i + 5;
                if (v < stop && b.getByte(v) == ' ') {
                    v++;
                }
                if (any) {
                    append((byte) '\n');
                }
                appendBytes(b, v, stop - v);
                any = true;
            }
            if (nl < 0) {
                return false; // unterminated
            }
            i = nl + 1;
        }
        return any;
    }

    private void append(byte c) {
        ensure(1);
        scratch[payloadLength++] = c;
    }

    private void appendBytes(ByteBuf b, int at, int len) {
        ensure(len);
        b.getBytes(at, scratch, payloadLength, len);
        payloadLength += len;
    }

    private void ensure(int more) {
        if (payloadLength + more > scratch.length) {
            scratch = java.util.Arrays.copyOf(scratch, Math.max(scratch.length * 2, payloadLength + more));
        }
    }

    /** Whether {@code [from, end)} holds {@code "usage"}, a colon and an object (not SGLang's {@code "usage":null}). */
    boolean hasUsageObject(ByteBuf b, int from, int end) {
        int at = from;
        while ((at = usageToken.find(b, at, end)) >= 0) {
            int i = at + USAGE.length;
            i = skipWhitespace(b, i, end);
            if (i < end && b.getByte(i) == ':') {
                i = skipWhitespace(b, i + 1, end);
                if (i < end && b.getByte(i) == '{') {
                    return true;
                }
            }
            at++;
        }
        return false;
    }

    private static int skipWhitespace(ByteBuf b, int i, int end) {
        while (i < end) {
            byte c = b.getByte(i);
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
                break;
            }
            i++;
        }
        return i;
    }

    /** Index just past the blank line ending the event that starts at {@code from} ({@code to} if none). */
    static int eventEnd(ByteBuf b, int from, int to) {
        int i = from;
        while (i < to) {
            int nl = b.indexOf(i, to, (byte) '\n');
            if (nl < 0 || nl + 1 >= to) {
                return to;
            }
            byte next = b.getByte(nl + 1);
            if (next == '\n') {
                return nl + 2;
            }
            if (next == '\r' && nl + 2 < to && b.getByte(nl + 2) == '\n') {
                return nl + 3;
            }
            i = nl + 1;
        }
        return to;
    }
}
