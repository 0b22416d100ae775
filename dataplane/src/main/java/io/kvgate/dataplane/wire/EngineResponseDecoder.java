package io.kvgate.dataplane.wire;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.ByteToMessageDecoder;
import io.netty.handler.codec.http.DefaultHttpContent;
import io.netty.handler.codec.http.DefaultLastHttpContent;
import io.netty.handler.codec.http.EmptyHttpHeaders;
import io.netty.handler.codec.http.LastHttpContent;
import java.util.Arrays;
import java.util.List;

/**
 * The engine connection's response decoder: a minimal, strict HTTP/1.1 response parser over the raw bytes. It emits a
 * {@link ResponseHead} (the head's bytes plus the facts the gateway acts on; no header map) and then the body as
 * {@code HttpContent}s — slices of the read buffer, never copied — ending with a {@link LastHttpContent}:
 * {@code Content-Length} bytes, the de-chunked data of {@code Transfer-Encoding: chunked} (trailer fields are read and
 * dropped), or everything until the engine closes (the last content is emitted when the connection goes inactive).
 * 1xx heads are emitted without a body, and parsing goes on with the next head.
 *
 * <p><b>Strict</b> (an engine's head is copied to clients as bytes, so what passes must be unambiguous): only
 * {@code HTTP/1.1} and {@code HTTP/1.0}; a three-digit status 100–599; every line ends in CRLF (a bare LF or CR is
 * refused); header names are tokens with no whitespace before the colon; values carry no control character but
 * HTAB; folded lines (obs-fold), a second {@code Content-Length} or {@code Transfer-Encoding}, both of them together, a
 * transfer coding other than {@code chunked}, a non-decimal length and malformed chunk lines are refused. The head is
 * bounded ({@code maxStatusLineBytes} for the status line, {@code maxHeadBytes} in all), so are chunk-size lines and
 * the trailer section. A refusal throws {@link EngineHttpException} (the leg classifies it: before the head arrived an
 * early close, after it a mid-body failure) and everything after it on the connection is discarded.
 *
 * <p>Not thread-safe: one instance per engine connection, on its event loop.
 */
public final class EngineResponseDecoder extends ByteToMessageDecoder {
    /** Longest chunk-size line accepted, extensions included. */
    static final int MAX_CHUNK_LINE_BYTES = 4096;

    private enum State { HEAD, LENGTH_BODY, CLOSE_BODY, CHUNK_SIZE, CHUNK_DATA, CHUNK_END, TRAILERS, DISCARD }

    // Header names the gateway acts on (RFC 9110 §7.6.1 hop-by-hop, plus its own), lower case.
    private static final int OTHER = 0;
    private static final int DROP = 1;
    private static final int CONTENT_LENGTH = 2;
    private static final int TRANSFER_ENCODING = 3;
    private static final int CONNECTION = 4;
    private static final int CONTENT_TYPE = 5;
    private static final int CONTENT_ENCODING = 6;

    private final int maxStatusLineBytes;
    private final int maxHeadBytes;

    private State state = State.HEAD;
    private long remaining;
    private int trailerBytes;

    // ---- the head being parsed: offsets relative to the head's first byte (the reader index does not move until
    // the head is complete, and offsets stay valid when the cumulation is reallocated) ----
    private int lineStart;
    private boolean statusLineSeen;
    private int status;
    private boolean http11;
    private int statusLineEnd;
    private long contentLength;
    private int contentLengthStart;
    private int contentLengthEnd;
    private boolean chunked;
    private boolean connectionClose;
    private boolean connectionKeepAlive;
    private boolean connectionListsOthers;
    private boolean contentTypeSeen;
    private boolean eventStream;
    private boolean json;
    private boolean contentEncoded;
    private int[] dropped;
    private int droppedCount;

    /**
     * @param maxStatusLineBytes longest status line accepted (CRLF excluded)
     * @param maxHeadBytes       longest head accepted, status line and blank line included
     */
    public EngineResponseDecoder(int maxStatusLineBytes, int maxHeadBytes) {
        this.maxStatusLineBytes = maxStatusLineBytes;
        this.maxHeadBytes = maxHeadBytes;
        resetHead();
    }

    private void resetHead() {
        lineStart = 0;
        statusLineSeen = false;
        status = 0;
        http11 = false;
        statusLineEnd = 0;
        contentLength = -1;
        contentLengthStart = -1;
        contentLengthEnd = -1;
        chunked = false;
        connectionClose = false;
        connectionKeepAlive = false;
        connectionListsOthers = false;
        contentTypeSeen = false;
        eventStream = false;
        json = false;
        contentEncoded = false;
        dropped = null;
        droppedCount = 0;
    }

    @Override
    protected void decode(ChannelHandlerContext ctx, ByteBuf in, List<Object> out) {
        // Everything that is complete is decoded in this one call: a message is only ever emitted by a call that also
        // consumed bytes (ByteToMessageDecoder's contract).
        while (in.isReadable()) {
            switch (state) {
                case HEAD -> {
                    if (!decodeHead(in, out)) {
                        return;
                    }
                }
                case LENGTH_BODY -> {
                    int n = (int) Math.min(remaining, in.readableBytes());
                    ByteBuf data = in.readRetainedSlice(n);
                    remaining -= n;
                    if (remaining == 0) {
                        state = State.HEAD;
                        out.add(new DefaultLastHttpContent(data, EmptyHttpHeaders.INSTANCE));
                    } else {
                        out.add(new DefaultHttpContent(data));
                    }
                }
                case CLOSE_BODY -> out.add(new DefaultHttpContent(in.readRetainedSlice(in.readableBytes())));
                case CHUNK_SIZE -> {
                    if (!decodeChunkSize(in)) {
                        return;
                    }
                }
                case CHUNK_DATA -> {
                    int n = (int) Math.min(remaining, in.readableBytes());
                    out.add(new DefaultHttpContent(in.readRetainedSlice(n)));
                    remaining -= n;
                    if (remaining == 0) {
                        state = State.CHUNK_END;
                    }
                }
                case CHUNK_END -> {
                    if (in.readableBytes() < 2) {
                        return;
                    }
                    int r = in.readerIndex();
                    if (in.getByte(r) != HttpBytes.CR || in.getByte(r + 1) != HttpBytes.LF) {
                        throw refuse("chunk data not followed by CRLF");
                    }
                    in.skipBytes(2);
                    state = State.CHUNK_SIZE;
                }
                case TRAILERS -> {
                    if (!decodeTrailerLine(in, out)) {
                        return;
                    }
                }
                case DISCARD -> {
                    in.skipBytes(in.readableBytes());
                    return;
                }
            }
        }
    }

    @Override
    protected void decodeLast(ChannelHandlerContext ctx, ByteBuf in, List<Object> out) throws Exception {
        super.decodeLast(ctx, in, out);
        if (state == State.CLOSE_BODY) {
            // A close-delimited body ends when the engine closes: that is its complete end, not a failure.
            state = State.DISCARD;
            out.add(LastHttpContent.EMPTY_LAST_CONTENT);
        }
    }

    private EngineHttpException refuse(String why) {
        state = State.DISCARD;
        return new EngineHttpException(why);
    }

    // ---- head ------------------------------------------------------------------------------------------------

    /** Parses head lines as they arrive; returns false when more bytes are needed. */
    private boolean decodeHead(ByteBuf in, List<Object> out) {
        int base = in.readerIndex();
        if (!statusLineSeen) {
            // A stray CRLF between responses is tolerated (RFC 9112 §2.2), nothing else before the status line.
            while (in.readableBytes() >= 2 && in.getByte(base) == HttpBytes.CR && in.getByte(base + 1) == HttpBytes.LF) {
                in.skipBytes(2);
                base += 2;
            }
        }
        int readable = in.readableBytes();
        while (true) {
            int limit = Math.min(readable, maxHeadBytes);
            int lf = lineStart >= limit ? -1 : in.indexOf(base + lineStart, base + limit, HttpBytes.LF);
            if (lf < 0) {
                if (!statusLineSeen && readable > maxStatusLineBytes + 2) {
                    throw refuse("status line exceeds " + maxStatusLineBytes + " bytes");
                }
                if (readable >= maxHeadBytes) {
                    throw refuse("response head exceeds " + maxHeadBytes + " bytes");
                }
                return false;
            }
            int start = base + lineStart;
            if (lf == start || in.getByte(lf - 1) != HttpBytes.CR) {
                throw refuse("line not terminated by CRLF");
            }
            int end = lf - 1; // the CR
            if (!statusLineSeen) {
                if (end - start > maxStatusLineBytes) {
                    throw refuse("status line exceeds " + maxStatusLineBytes + " bytes");
                }
                loadLine(in, start, end);
                parseStatusLine(start, end);
                statusLineSeen = true;
                statusLineEnd = lf + 1 - base;
                lineStart = statusLineEnd;
                continue;
            }
            if (end == start) {
                completeHead(in, base, lf + 1 - base, out);
                return true;
            }
            loadLine(in, start, end);
            parseHeaderLine(base, start, end);
            lineStart = lf + 1 - base;
        }
    }

    // ---- the head line being parsed, copied out of the buffer ----------------------------------------------------
    // Each complete line is copied once into this array and parsed from it: byte-at-a-time reads of the ByteBuf
    // (a reference-count and bounds check per byte) were most of the head's parse cost. Indices stay the buffer's
    // (at(i) maps them), so positions recorded for the relay are unchanged.

    /** Holds the line being parsed (grown to the longest line seen, at most the head limit). */
    private byte[] line = new byte[128];
    /** The buffer index of {@code line[0]}. */
    private int lineOff;

    private void loadLine(ByteBuf in, int start, int end) {
        int n = end - start;
        if (n > line.length) {
            line = new byte[Math.max(n, line.length * 2)];
        }
        in.getBytes(start, line, 0, n);
        lineOff = start;
    }

    private byte at(int i) {
        return line[i - lineOff];
    }

    private int skipOws(int from, int end) {
        while (from < end && HttpBytes.isOws(at(from))) {
            from++;
        }
        return from;
    }

    private int trimOwsEnd(int from, int end) {
        while (end > from && HttpBytes.isOws(at(end - 1))) {
            end--;
        }
        return end;
    }

    /** The index of the next ',' in [from, end), or {@code end}: where one element of a field's list ends. */
    private int listElementEnd(int from, int end) {
        while (from < end && at(from) != ',') {
            from++;
        }
        return from;
    }

    /** Whether the line at buffer index {@code index} starts with {@code name} (lower-case ASCII), ignoring case. */
    private boolean lineEquals(int index, String name) {
        int o = index - lineOff;
        for (int i = 0; i < name.length(); i++) {
            if (HttpBytes.lower(line[o + i]) != name.charAt(i)) {
                return false;
            }
        }
        return true;
    }

    private void parseStatusLine(int start, int end) {
        // HTTP-version SP 3DIGIT SP [reason-phrase]; the SP before an empty reason is optional in practice.
        if (end - start < 12 || at(start) != 'H' || at(start + 1) != 'T' || at(start + 2) != 'T'
            || at(start + 3) != 'P' || at(start + 4) != '/' || at(start + 5) != '1'
            || at(start + 6) != '.') {
            throw refuse("malformed status line (not HTTP/1.x)");
        }
        byte minor = at(start + 7);
        if (minor != '0' && minor != '1') {
            throw refuse("unsupported HTTP version in the status line");
        }
        if (at(start + 8) != ' ') {
            throw refuse("malformed status line");
        }
        int code = 0;
        for (int i = start + 9; i < start + 12; i++) {
            byte b = at(i);
            if (b < '0' || b > '9') {
                throw refuse("malformed status code");
            }
            code = code * 10 + (b - '0');
        }
        if (code < 100 || code > 599) {
            throw refuse("status code out of range: " + code);
        }
        if (end > start + 12) {
            if (at(start + 12) != ' ') {
                throw refuse("malformed status line");
            }
            for (int i = start + 13; i < end; i++) {
                if (!HttpBytes.isFieldValue(at(i))) {
                    throw refuse("control character in the reason phrase");
                }
            }
        }
        http11 = minor == '1';
        status = code;
    }

    private void parseHeaderLine(int base, int start, int end) {
        byte first = at(start);
        if (HttpBytes.isOws(first)) {
            throw refuse("folded header line (obs-fold)");
        }
        int colon = start;
        while (colon < end && HttpBytes.isTchar(at(colon))) {
            colon++;
        }
        if (colon == start || colon == end || at(colon) != ':') {
            throw refuse("malformed header name");
        }
        for (int i = colon + 1; i < end; i++) {
            if (!HttpBytes.isFieldValue(at(i))) {
                throw refuse("control character in a header value");
            }
        }
        int v = skipOws(colon + 1, end);
        int ve = trimOwsEnd(v, end);
        int lineEnd = end + 2 - base;
        switch (classify(start, colon - start)) {
            case CONTENT_LENGTH -> {
                if (contentLength >= 0) {
                    throw refuse("more than one Content-Length");
                }
                contentLength = parseLength(v, ve);
                contentLengthStart = start - base;
                contentLengthEnd = lineEnd;
            }
            case TRANSFER_ENCODING -> {
                if (chunked) {
                    throw refuse("more than one Transfer-Encoding");
                }
                if (ve - v != 7 || !lineEquals(v, "chunked")) {
                    throw refuse("unsupported transfer coding (only chunked is accepted)");
                }
                chunked = true;
                drop(start - base, lineEnd);
            }
            case CONNECTION -> {
                parseConnection(v, ve);
                drop(start - base, lineEnd);
            }
            case CONTENT_TYPE -> {
                if (!contentTypeSeen) {
                    contentTypeSeen = true;
                    eventStream = ve - v >= 17 && lineEquals(v, "text/event-stream");
                    json = ve - v >= 16 && lineEquals(v, "application/json");
                }
            }
            case CONTENT_ENCODING -> contentEncoded = true;
            case DROP -> drop(start - base, lineEnd);
            default -> { }
        }
    }

    private long parseLength(int v, int ve) {
        if (v == ve || ve - v > 18) {
            throw refuse("malformed Content-Length");
        }
        long n = 0;
        for (int i = v; i < ve; i++) {
            byte b = at(i);
            if (b < '0' || b > '9') {
                throw refuse("malformed Content-Length");
            }
            n = n * 10 + (b - '0');
        }
        return n;
    }

    private void parseConnection(int v, int ve) {
        for (int t = v; t <= ve; ) {
            int comma = listElementEnd(t, ve);
            int s = skipOws(t, comma);
            int e = trimOwsEnd(s, comma);
            if (e > s) {
                for (int i = s; i < e; i++) {
                    if (!HttpBytes.isTchar(at(i))) {
                        throw refuse("malformed Connection option");
                    }
                }
                if (e - s == 5 && lineEquals(s, "close")) {
                    connectionClose = true;
                } else if (e - s == 10 && lineEquals(s, "keep-alive")) {
                    connectionKeepAlive = true;
                } else {
                    connectionListsOthers = true;
                }
            }
            t = comma + 1;
        }
    }

    private int classify(int name, int len) {
        switch (len) {
            case 2 -> {
                if (lineEquals(name, "te")) {
                    return DROP;
                }
            }
            case 7 -> {
                if (lineEquals(name, "trailer") || lineEquals(name, "upgrade")) {
                    return DROP;
                }
            }
            case 10 -> {
                if (lineEquals(name, "connection")) {
                    return CONNECTION;
                }
                if (lineEquals(name, "keep-alive")) {
                    return DROP;
                }
            }
            case 12 -> {
                if (lineEquals(name, "content-type")) {
                    return CONTENT_TYPE;
                }
                if (lineEquals(name, "x-request-id")) {
                    return DROP; // the client sees its own id
                }
            }
            case 14 -> {
                if (lineEquals(name, "content-length")) {
                    return CONTENT_LENGTH;
                }
            }
            case 16 -> {
                if (lineEquals(name, "proxy-connection")) {
                    return DROP;
                }
                if (lineEquals(name, "content-encoding")) {
                    return CONTENT_ENCODING;
                }
            }
            case 17 -> {
                if (lineEquals(name, "transfer-encoding")) {
                    return TRANSFER_ENCODING;
                }
            }
            case 18 -> {
                if (lineEquals(name, "proxy-authenticate")) {
                    return DROP;
                }
            }
            case 19 -> {
                if (lineEquals(name, "proxy-authorization")) {
                    return DROP;
                }
            }
            default -> { }
        }
        // The gateway's own namespace: an engine cannot speak for it (X-Kvgate-Route is the gateway's to set).
        return len >= 9 && lineEquals(name, "x-kvgate-") ? DROP : OTHER;
    }

    private void drop(int start, int end) {
        if (dropped == null) {
            dropped = new int[8];
        } else if (2 * droppedCount == dropped.length) {
            dropped = Arrays.copyOf(dropped, dropped.length * 2);
        }
        dropped[2 * droppedCount] = start;
        dropped[2 * droppedCount + 1] = end;
        droppedCount++;
    }

    private void completeHead(ByteBuf in, int base, int headLength, List<Object> out) {
        if (chunked && contentLength >= 0) {
            throw refuse("both Content-Length and Transfer-Encoding");
        }
        if (connectionListsOthers) {
            dropConnectionListed(in, base);
        }
        ResponseHead.Framing framing;
        if (status < 200 || status == 204 || status == 304) {
            framing = ResponseHead.Framing.NONE;
        } else if (chunked) {
            framing = ResponseHead.Framing.CHUNKED;
        } else if (contentLength >= 0) {
            framing = ResponseHead.Framing.LENGTH;
        } else {
            framing = ResponseHead.Framing.CLOSE;
        }
        boolean keepAlive = framing != ResponseHead.Framing.CLOSE && (http11 ? !connectionClose : connectionKeepAlive);
        ResponseHead head = new ResponseHead(in.readRetainedSlice(headLength), status, http11, framing,
            framing == ResponseHead.Framing.LENGTH ? contentLength : -1, keepAlive, eventStream, json, contentEncoded, statusLineEnd,
            contentLengthStart, contentLengthEnd, dropped, droppedCount);
        int code = status;
        long length = contentLength;
        resetHead();
        out.add(head);
        switch (framing) {
            case NONE -> {
                if (code == 101) {
                    state = State.DISCARD; // another protocol follows: nothing more is HTTP
                } else if (code >= 200) {
                    out.add(LastHttpContent.EMPTY_LAST_CONTENT);
                } // a 1xx head: the final head follows
            }
            case LENGTH -> {
                if (length == 0) {
                    out.add(LastHttpContent.EMPTY_LAST_CONTENT);
                } else {
                    remaining = length;
                    state = State.LENGTH_BODY;
                }
            }
            case CHUNKED -> {
                trailerBytes = 0;
                state = State.CHUNK_SIZE;
            }
            case CLOSE -> state = State.CLOSE_BODY;
        }
    }

    /**
     * Rare: {@code Connection:} names further headers, which are hop-by-hop too. The drop list is rebuilt in line
     * order with them.
     */
    private void dropConnectionListed(ByteBuf in, int base) {
        int[] tokens = new int[8];
        int tokenCount = 0;
        int headEnd = base + lineStart;
        int line = base + statusLineEnd;
        while (line < headEnd) {
            int lf = in.indexOf(line, headEnd, HttpBytes.LF);
            int colon = in.indexOf(line, lf, (byte) ':');
            loadLine(in, line, lf);
            if (classify(line, colon - line) == CONNECTION) {
                int ve = lf - 1;
                for (int t = colon + 1; t <= ve; ) {
                    int comma = listElementEnd(t, ve);
                    int s = skipOws(t, comma);
                    int e = trimOwsEnd(s, comma);
                    if (e > s) {
                        if (2 * tokenCount == tokens.length) {
                            tokens = Arrays.copyOf(tokens, tokens.length * 2);
                        }
                        tokens[2 * tokenCount] = s;
                        tokens[2 * tokenCount + 1] = e - s;
                        tokenCount++;
                    }
                    t = comma + 1;
                }
            }
            line = lf + 1;
        }
        dropped = null;
        droppedCount = 0;
        line = base + statusLineEnd;
        while (line < headEnd) {
            int lf = in.indexOf(line, headEnd, HttpBytes.LF);
            int colon = in.indexOf(line, lf, (byte) ':');
            int len = colon - line;
            loadLine(in, line, colon);
            int kind = classify(line, len);
            boolean listed = false;
            for (int i = 0; i < tokenCount && !listed; i++) {
                listed = tokens[2 * i + 1] == len && HttpBytes.equalsIgnoreCase(in, tokens[2 * i], line, len);
            }
            if (listed && kind == CONTENT_LENGTH) {
                // Framing is the gateway's: the length line is handled apart (RelayHead), never listed away.
                listed = false;
            }
            if (kind == DROP || kind == TRANSFER_ENCODING || kind == CONNECTION || listed) {
                drop(line - base, lf + 1 - base);
            }
            line = lf + 1;
        }
    }

    // ---- chunked body ----------------------------------------------------------------------------------------

    private boolean decodeChunkSize(ByteBuf in) {
        int r = in.readerIndex();
        int limit = Math.min(in.readableBytes(), MAX_CHUNK_LINE_BYTES);
        int lf = in.indexOf(r, r + limit, HttpBytes.LF);
        if (lf < 0) {
            if (in.readableBytes() >= MAX_CHUNK_LINE_BYTES) {
                throw refuse("chunk-size line exceeds " + MAX_CHUNK_LINE_BYTES + " bytes");
            }
            return false;
        }
        if (lf == r || in.getByte(lf - 1) != HttpBytes.CR) {
            throw refuse("chunk-size line not terminated by CRLF");
        }
        int end = lf - 1;
        long size = 0;
        int i = r;
        while (i < end) {
            int d = HttpBytes.hexValue(in.getByte(i));
            if (d < 0) {
                break;
            }
            if (i - r == 15) {
                throw refuse("chunk size too large");
            }
            size = size * 16 + d;
            i++;
        }
        if (i == r) {
            throw refuse("malformed chunk size");
        }
        // chunk-ext: BWS ";" ... — read and ignored, but it must be one.
        i = HttpBytes.skipOws(in, i, end);
        if (i < end) {
            if (in.getByte(i) != ';') {
                throw refuse("malformed chunk size");
            }
            for (int j = i; j < end; j++) {
                if (!HttpBytes.isFieldValue(in.getByte(j))) {
                    throw refuse("control character in a chunk extension");
                }
            }
        }
        in.readerIndex(lf + 1);
        if (size == 0) {
            state = State.TRAILERS;
        } else {
            remaining = size;
            state = State.CHUNK_DATA;
        }
        return true;
    }

    /** One trailer line (dropped); the blank line ends the body. Returns false when more bytes are needed. */
    private boolean decodeTrailerLine(ByteBuf in, List<Object> out) {
        int r = in.readerIndex();
        int limit = Math.min(in.readableBytes(), maxHeadBytes - trailerBytes);
        int lf = limit <= 0 ? -1 : in.indexOf(r, r + limit, HttpBytes.LF);
        if (lf < 0) {
            if (in.readableBytes() >= maxHeadBytes - trailerBytes) {
                throw refuse("trailer section exceeds " + maxHeadBytes + " bytes");
            }
            return false;
        }
        if (lf == r || in.getByte(lf - 1) != HttpBytes.CR) {
            throw refuse("trailer line not terminated by CRLF");
        }
        trailerBytes += lf + 1 - r;
        in.readerIndex(lf + 1);
        if (lf - 1 == r) {
            state = State.HEAD;
            out.add(LastHttpContent.EMPTY_LAST_CONTENT);
        } else if (HttpBytes.isOws(in.getByte(r))) {
            throw refuse("folded trailer line (obs-fold)");
        }
        return true;
    }
}
