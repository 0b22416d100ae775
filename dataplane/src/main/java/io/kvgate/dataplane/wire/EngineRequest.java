package io.kvgate.dataplane.wire;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
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
 * @param traceparent   the gateway's span context for the engine (a traced request), replacing the client's
 *                      {@code traceparent} and {@code tracestate}; null: the client's pass through untouched
 * @param tracestate    the trace state going with it, or null
 */
public record EngineRequest(HttpMethod method, String uri, HttpHeaders clientHeaders, String requestId,
                            String gatewayHeader, String gatewayValue, String traceparent, String tracestate) {
    public EngineRequest(HttpMethod method, String uri, HttpHeaders clientHeaders, String requestId) {
        this(method, uri, clientHeaders, requestId, null, null);
    }

    public EngineRequest(HttpMethod method, String uri, HttpHeaders clientHeaders, String requestId,
                         String gatewayHeader, String gatewayValue) {
        this(method, uri, clientHeaders, requestId, gatewayHeader, gatewayValue, null, null);
    }

    /**
     * The same request under the gateway's span: {@code traceHeaders} is {@code [traceparent, tracestate]}, or null
     * for an untraced request (this request, unchanged).
     */
    public EngineRequest withTrace(String[] traceHeaders) {
        if (traceHeaders == null) {
            return this;
        }
        return new EngineRequest(method, uri, clientHeaders, requestId, gatewayHeader, gatewayValue, traceHeaders[0],
            traceHeaders[1]);
    }

    private static final byte[] SPACE = {' '};
    private static final byte[] HTTP_1_1_CRLF = " HTTP/1.1\r\n".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] HOST = "host: ".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] CONTENT_LENGTH = "content-length: ".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] REQUEST_ID = "x-request-id: ".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] TRACEPARENT = "traceparent: ".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] TRACESTATE = "tracestate: ".getBytes(StandardCharsets.US_ASCII);
    /** The request head ({@code host} and {@code content-length} the gateway's), blank line included. */
    public ByteBuf encodeHead(ByteBufAllocator alloc, String hostHeader, int contentLength) {
        HeadBytes out = HeadBytes.start().latin1(method.asciiName()).bytes(SPACE);
        writeTarget(out, uri);
        out.bytes(HTTP_1_1_CRLF).bytes(HOST).fieldValue(hostHeader).crlf()
            .bytes(CONTENT_LENGTH).decimal(contentLength).crlf();
        ForwardedHeaders.writeToEngine(out, clientHeaders, gatewayHeader, traceparent != null);
        if (gatewayHeader != null) {
            out.latin1(gatewayHeader).colonSpace().fieldValue(gatewayValue).crlf();
        }
        if (traceparent != null) {
            out.bytes(TRACEPARENT).fieldValue(traceparent).crlf();
            if (tracestate != null && !tracestate.isEmpty()) {
                out.bytes(TRACESTATE).fieldValue(tracestate).crlf();
            }
        }
        if (requestId != null) {
            out.bytes(REQUEST_ID).fieldValue(requestId).crlf();
        }
        return out.crlf().toBuffer(alloc, 0);
    }

    /** The request target as Netty's encoder wrote it (UTF-8); a control character or space never reaches the line. */
    private static void writeTarget(HeadBytes out, String uri) {
        for (int i = 0; i < uri.length(); i++) {
            char c = uri.charAt(i);
            if (c <= 0x20 || c >= 0x7f) {
                StringBuilder safe = new StringBuilder(uri.length());
                for (int j = 0; j < uri.length(); j++) {
                    char d = uri.charAt(j);
                    safe.append(d <= 0x20 || d == 0x7f ? '?' : d);
                }
                out.bytes(safe.toString().getBytes(StandardCharsets.UTF_8));
                return;
            }
        }
        out.latin1(uri);
    }
}
