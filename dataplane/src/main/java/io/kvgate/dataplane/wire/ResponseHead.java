package io.kvgate.dataplane.wire;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.DefaultByteBufHolder;
import java.nio.charset.StandardCharsets;

/**
 * An engine's response head as {@link EngineResponseDecoder} read it: the raw bytes (status line, header lines and
 * the blank line, exactly as received) plus the few facts the gateway acts on — status, body framing, keep-alive,
 * the media type (SSE or JSON) — and where the lines sit that the client must not see (hop-by-hop headers, the
 * engine's {@code X-Request-Id}, {@code X-Kvgate-*}, the names {@code Connection:} lists). No header map is built:
 * {@link RelayHead#relay} copies the raw bytes to the client with those lines left out.
 *
 * <p>Reference counted: {@link #content()} is a slice of the connection's read buffer, valid until the leg releases
 * it right after its listener's {@code onHead} returned (a live stream must not pin the read buffer). The parsed
 * facts stay readable after the release. Event-loop only.
 */
public final class ResponseHead extends DefaultByteBufHolder {
    /** How the body is delimited on the engine connection. */
    public enum Framing {
        /** No body: 1xx, 204, 304. */
        NONE,
        /** {@code Content-Length} bytes. */
        LENGTH,
        /** {@code Transfer-Encoding: chunked}. */
        CHUNKED,
        /** Until the engine closes the connection (HTTP/1.0 style). */
        CLOSE
    }

    private final int status;
    private final boolean http11;
    private final Framing framing;
    private final long contentLength;
    private final boolean keepAlive;
    private final boolean eventStream;
    private final boolean json;
    private final boolean contentEncoded;
    /** End of the status line (after its CRLF), relative to the head's first byte. */
    private final int statusLineEnd;
    /** The {@code Content-Length} line [start, end) relative to the first byte, or -1. */
    private final int contentLengthStart;
    private final int contentLengthEnd;
    /** Lines the client never sees, as sorted [start, end) pairs relative to the first byte; null when none. */
    private final int[] dropped;
    private final int droppedCount;

    ResponseHead(ByteBuf raw, int status, boolean http11, Framing framing, long contentLength, boolean keepAlive,
                 boolean eventStream, boolean json, boolean contentEncoded, int statusLineEnd, int contentLengthStart, int contentLengthEnd,
                 int[] dropped, int droppedCount) {
        super(raw);
        this.status = status;
        this.http11 = http11;
        this.framing = framing;
        this.contentLength = contentLength;
        this.keepAlive = keepAlive;
        this.eventStream = eventStream;
        this.json = json;
        this.contentEncoded = contentEncoded;
        this.statusLineEnd = statusLineEnd;
        this.contentLengthStart = contentLengthStart;
        this.contentLengthEnd = contentLengthEnd;
        this.dropped = dropped;
        this.droppedCount = droppedCount;
    }

    public int status() {
        return status;
    }

    /** 1xx: not the answer (the final head is still to come). */
    public boolean informational() {
        return status < 200;
    }

    /** Whether the engine spoke HTTP/1.1 (else HTTP/1.0). */
    public boolean http11() {
        return http11;
    }

    public Framing framing() {
        return framing;
    }

    /** The declared body length, or -1 when the body is not {@link Framing#LENGTH}-delimited. */
    public long contentLength() {
        return contentLength;
    }

    /** Whether the engine connection may carry another request after this response's body. */
    public boolean keepAlive() {
        return keepAlive;
    }

    /** {@code Content-Type: text/event-stream}: a server-sent-event stream. */
    public boolean eventStream() {
        return eventStream;
    }

    /** {@code Content-Type: application/json}. */
    public boolean json() {
        return json;
    }

    /** Whether the engine declared a {@code Content-Encoding} (any: the body is then not plain text the gateway can read). */
    public boolean contentEncoded() {
        return contentEncoded;
    }

    int statusLineEnd() {
        return statusLineEnd;
    }

    int contentLengthStart() {
        return contentLengthStart;
    }

    int contentLengthEnd() {
        return contentLengthEnd;
    }

    int droppedCount() {
        return droppedCount;
    }

    int droppedStart(int i) {
        return dropped[2 * i];
    }

    int droppedEnd(int i) {
        return dropped[2 * i + 1];
    }

    /**
     * The first value of header {@code name} (OWS trimmed), or null; scans the raw bytes, so only while they are held
     * (tests and rare paths: the gateway's own decisions use the parsed facts).
     */
    public String header(String name) {
        ByteBuf raw = content();
        int base = raw.readerIndex();
        int end = base + raw.readableBytes() - 2;
        int line = base + statusLineEnd;
        while (line < end) {
            int lf = raw.indexOf(line, end + 2, (byte) '\n');
            int colon = raw.indexOf(line, lf, (byte) ':');
            if (colon - line == name.length() && HttpBytes.equalsIgnoreCase(raw, line, name)) {
                int v = HttpBytes.skipOws(raw, colon + 1, lf - 1);
                int ve = HttpBytes.trimOwsEnd(raw, v, lf - 1);
                return raw.toString(v, ve - v, StandardCharsets.ISO_8859_1);
            }
            line = lf + 1;
        }
        return null;
    }

    /**
     * The same head over {@code raw} (same facts, offsets relative to its first readable byte): with {@link #copy()},
     * how a head is kept past {@code LegListener.onHead} (a hedged request holds its legs' heads until one of them
     * produces a token, docs/hedging.md). The caller owns, and releases, the copy.
     */
    @Override
    public ResponseHead replace(ByteBuf raw) {
        return new ResponseHead(raw, status, http11, framing, contentLength, keepAlive, eventStream, json, contentEncoded,
            statusLineEnd, contentLengthStart, contentLengthEnd, dropped, droppedCount);
    }

    @Override
    public ResponseHead copy() {
        return replace(content().copy());
    }

    @Override
    public ResponseHead retain() {
        super.retain();
        return this;
    }

    @Override
    public ResponseHead touch(Object hint) {
        super.touch(hint);
        return this;
    }

    @Override
    public String toString() {
        return "ResponseHead(" + status + ", " + framing + (framing == Framing.LENGTH ? " " + contentLength : "")
            + (keepAlive ? ", keep-alive" : ", close") + ")";
    }
}
