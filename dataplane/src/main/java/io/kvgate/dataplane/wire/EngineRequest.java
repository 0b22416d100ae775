package io.kvgate.dataplane.wire;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.ByteBufUtil;
import io.netty.handler.codec.http.HttpHeaders;
import io.netty.handler.codec.http.HttpMethod;
import java.nio.charset.StandardCharsets;

/**
 * The request an engine gets, as the leg encodes it on every send: the client's method and target, the client's
 * headers that cross the gateway ({@link ForwardedHeaders}) and the gateway's request id. The head is written
 * straight into one buffer from the client's decoded headers (no request object, no second header map).
 *
 * @param clientHeaders the client's request headers, read (never changed) when the head is encoded
 * @param requestId     the {@code X-Request-Id} the engine sees, or null for none
 * @param gatewayHeader a header the gateway sets (lower case), replacing the client's of that name, or null
 * @param gatewayValue  its value
 */
public record EngineRequest(HttpMethod method, String uri, HttpHeaders clientHeaders, String requestId,
                            String gatewayHeader, String gatewayValue) {
    public EngineRequest(HttpMethod method, String uri, HttpHeaders clientHeaders, String requestId) {
        this(method, uri, clientHeaders, requestId, null, null);
    }

    private static final byte[] HTTP_1_1_CRLF = " HTTP/1.1\r\n".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] HOST = "host: ".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] CONTENT_LENGTH = "content-length: ".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] REQUEST_ID = "x-request-id: ".getBytes(StandardCharsets.US_ASCII);
    private static final int CRLF = ('\r' << 8) | '\n';
    /** Room for a typical head (request line, a handful of forwarded headers); the buffer grows past it if needed. */
    private static final int INITIAL_HEAD_BYTES = 512;

    /** The request head ({@code host} and {@code content-length} the gateway's), blank line included. */
    public ByteBuf encodeHead(ByteBufAllocator alloc, String hostHeader, int contentLength) {
        ByteBuf out = alloc.buffer(INITIAL_HEAD_BYTES + uri.length());
        ByteBufUtil.writeAscii(out, method.asciiName());
        out.writeByte(' ');
        writeTarget(out, uri);
        out.writeBytes(HTTP_1_1_CRLF);
        out.writeBytes(HOST);
        HttpBytes.writeFieldValue(out, hostHeader);
        out.writeShort(CRLF);
        out.writeBytes(CONTENT_LENGTH);
        ByteBufUtil.writeAscii(out, Integer.toString(contentLength));
        out.writeShort(CRLF);
        ForwardedHeaders.writeToEngine(out, clientHeaders, gatewayHeader);
        if (gatewayHeader != null) {
            ByteBufUtil.writeAscii(out, gatewayHeader);
            out.writeByte(':').writeByte(' ');
            HttpBytes.writeFieldValue(out, gatewayValue);
            out.writeShort(CRLF);
        }
        if (requestId != null) {
            out.writeBytes(REQUEST_ID);
            HttpBytes.writeFieldValue(out, requestId);
            out.writeShort(CRLF);
        }
        out.writeShort(CRLF);
        return out;
    }

    /** The request target as Netty's encoder wrote it (UTF-8); a control character or space never reaches the line. */
    private static void writeTarget(ByteBuf out, String uri) {
        for (int i = 0; i < uri.length(); i++) {
            char c = uri.charAt(i);
            if (c <= 0x20 || c >= 0x7f) {
                StringBuilder safe = new StringBuilder(uri.length());
                for (int j = 0; j < uri.length(); j++) {
                    char d = uri.charAt(j);
                    safe.append(d <= 0x20 || d == 0x7f ? '?' : d);
                }
                ByteBufUtil.writeUtf8(out, safe);
                return;
            }
        }
        ByteBufUtil.writeAscii(out, uri);
    }
}
