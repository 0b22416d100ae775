package io.kvgate.dataplane.wire;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.DefaultByteBufHolder;
import java.nio.charset.StandardCharsets;

/**
 * A relayed response head on its way to the client, already in bytes: the engine's status line (as HTTP/1.1) and
 * header lines copied from its {@link ResponseHead} with the lines the client must not see left out, plus the
 * gateway's own ({@code x-request-id}, {@code x-kvgate-route}, {@code x-kvgate-warning}). The framing lines are added last, by the client codec
 * ({@link ClientHttpCodec}), once the response connection policy had its say: {@code transfer-encoding: chunked}
 * unless the body is length-delimited or the client is HTTP/1.0 ({@link #closeDelimited}), {@code connection: close}
 * when the connection ends after this response ({@link #closeConnection}). The codec then frames the body
 * ({@code HttpContent}s) itself. Event-loop only.
 */
public final class RelayHead extends DefaultByteBufHolder {
    private static final byte[] HTTP_1_1 = "HTTP/1.1".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] REQUEST_ID = "x-request-id: ".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] ROUTE = "x-kvgate-route: ".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] WARNING = "x-kvgate-warning: ".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] CHUNKED = "transfer-encoding: chunked\r\n".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] CLOSE = "connection: close\r\n".getBytes(StandardCharsets.US_ASCII);
    private static final int CRLF = ('\r' << 8) | '\n';

    private final int status;
    private final boolean bodyless;
    private boolean chunked;
    private boolean close;

    private RelayHead(ByteBuf lines, int status, boolean bodyless, boolean chunked, boolean close) {
        super(lines);
        this.status = status;
        this.bodyless = bodyless;
        this.chunked = chunked;
        this.close = close;
    }

    /**
     * The client's head for an engine's response.
     *
     * @param explanation     the {@code x-kvgate-route} value, or null
     * @param close           the connection ends after this response (the request did not allow keep-alive)
     * @param lengthMayChange the relay may change the body's bytes (SSE events are checked and may be rewritten): the
     *                        engine's {@code Content-Length} is dropped and the body is chunked instead
     */
    public static RelayHead relay(ByteBufAllocator alloc, ResponseHead engine, String requestId, String explanation,
                                  boolean close, boolean lengthMayChange) {
        return relay(alloc, engine, requestId, explanation, null, close, lengthMayChange);
    }

    /**
     * As above, with the gateway's {@code x-kvgate-warning} (undeclared {@code chat_template_kwargs}), or null for
     * none.
     */
    public static RelayHead relay(ByteBufAllocator alloc, ResponseHead engine, String requestId, String explanation,
                                  String warning, boolean close, boolean lengthMayChange) {
        ByteBuf raw = engine.content();
        int base = raw.readerIndex();
        int headerEnd = raw.readableBytes() - 2; // the blank line is written by finish()
        boolean bodyless = engine.framing() == ResponseHead.Framing.NONE;
        boolean length = engine.framing() == ResponseHead.Framing.LENGTH;
        int lengthLine = engine.contentLengthStart();
        // 204 carries no length (RFC 9110 §8.6); a body the relay may rewrite cannot keep the engine's.
        boolean dropLength = lengthLine >= 0 && (engine.status() == 204 || (length && lengthMayChange));
        HeadBytes out = HeadBytes.start().bytes(HTTP_1_1);
        out.bytes(raw, base + HTTP_1_1.length, engine.statusLineEnd() - HTTP_1_1.length);
        int pos = engine.statusLineEnd();
        int dropped = 0;
        int droppedCount = engine.droppedCount();
        int lengthAt = dropLength ? lengthLine : -1;
        while (true) {
            int nextDrop = dropped < droppedCount ? engine.droppedStart(dropped) : Integer.MAX_VALUE;
            int nextLength = lengthAt >= 0 ? lengthAt : Integer.MAX_VALUE;
            int next = Math.min(nextDrop, nextLength);
            if (next == Integer.MAX_VALUE) {
                out.bytes(raw, base + pos, headerEnd - pos);
                break;
            }
            out.bytes(raw, base + pos, next - pos);
            if (next == nextDrop) {
                pos = engine.droppedEnd(dropped++);
            } else {
                pos = engine.contentLengthEnd();
                lengthAt = -1;
            }
        }
        out.bytes(REQUEST_ID).fieldValue(requestId).crlf();
        if (explanation != null) {
            out.bytes(ROUTE).fieldValue(explanation).crlf();
        }
        if (warning != null) {
            out.bytes(WARNING).fieldValue(warning).crlf();
        }
        boolean chunked = !bodyless && (!length || dropLength);
        // Room for what finish() adds: the framing lines and the blank line.
        return new RelayHead(out.toBuffer(alloc, CHUNKED.length + CLOSE.length + 2), engine.status(), bodyless, chunked, close);
    }

    public int status() {
        return status;
    }

    /** No body follows (1xx, 204, 304). */
    public boolean bodyless() {
        return bodyless;
    }

    /** Whether the body goes out chunked. */
    public boolean chunked() {
        return chunked;
    }

    /** Whether the head will say {@code connection: close}. */
    public boolean closes() {
        return close;
    }

    /** The connection ends after this response: the head says so. */
    public void closeConnection() {
        close = true;
    }

    /** The client cannot read chunked encoding (HTTP/1.0): the body goes out as is and ends with the connection. */
    public void closeDelimited() {
        chunked = false;
    }

    /** Completes the head (framing lines, blank line) and hands over its bytes. */
    ByteBuf finish() {
        ByteBuf out = content();
        if (chunked) {
            out.writeBytes(CHUNKED);
        }
        if (close) {
            out.writeBytes(CLOSE);
        }
        out.writeShort(CRLF);
        return out;
    }

    @Override
    public String toString() {
        return "RelayHead(" + status + (chunked ? ", chunked" : "") + (close ? ", close" : "") + ")";
    }
}
