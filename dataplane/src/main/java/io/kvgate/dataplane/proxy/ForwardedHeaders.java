package io.kvgate.dataplane.proxy;

import io.netty.handler.codec.http.DefaultHttpHeadersFactory;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaders;
import io.netty.util.AsciiString;
import java.util.Iterator;
import java.util.Map;

/**
 * Which headers cross the gateway, in each direction. Dropped on the way to an engine: hop-by-hop headers
 * (RFC 9110 §7.6.1), every header the client listed in {@code Connection:}, {@code Host}/{@code Content-Length}
 * (the gateway frames the body itself), {@code Expect}, the client's {@code Authorization} (the gateway's API key
 * is not the engine's business) and every {@code X-Kvgate-*} control header. The engine sees the gateway's own
 * request id. Dropped on the way back: hop-by-hop headers; the client sees its own request id.
 */
public final class ForwardedHeaders {
    private ForwardedHeaders() {}

    private static final DefaultHttpHeadersFactory UNVALIDATED = DefaultHttpHeadersFactory.headersFactory().withValidation(false);

    private static final AsciiString[] HOP_BY_HOP = {
        HttpHeaderNames.CONNECTION, AsciiString.cached("keep-alive"), AsciiString.cached("proxy-connection"),
        HttpHeaderNames.TRANSFER_ENCODING, HttpHeaderNames.TE, HttpHeaderNames.TRAILER, HttpHeaderNames.UPGRADE,
        HttpHeaderNames.PROXY_AUTHENTICATE, HttpHeaderNames.PROXY_AUTHORIZATION};

    static boolean isHopByHop(CharSequence name) {
        for (AsciiString h : HOP_BY_HOP) {
            if (h.contentEqualsIgnoreCase(name)) {
                return true;
            }
        }
        return false;
    }

    private static boolean gatewayOnly(CharSequence name) {
        return HttpHeaderNames.HOST.contentEqualsIgnoreCase(name) || HttpHeaderNames.CONTENT_LENGTH.contentEqualsIgnoreCase(name)
            || HttpHeaderNames.EXPECT.contentEqualsIgnoreCase(name) || HttpHeaderNames.AUTHORIZATION.contentEqualsIgnoreCase(name)
            || AsciiString.regionMatches(name, true, 0, "x-kvgate-", 0, 9)
            || AsciiString.contentEqualsIgnoreCase(name, "x-request-id");
    }

    /**
     * The header names listed in {@code Connection:} besides {@code keep-alive}/{@code close} (which name no header
     * that would be forwarded anyway), or null when there are none: the common case costs one lookup, no allocation.
     */
    private static String[] connectionListed(HttpHeaders in) {
        String[] listed = null;
        int n = 0;
        for (String v : in.getAll(HttpHeaderNames.CONNECTION)) {
            int start = 0;
            for (int i = 0; i <= v.length(); i++) {
                if (i == v.length() || v.charAt(i) == ',') {
                    String token = v.substring(start, i).strip();
                    start = i + 1;
                    if (token.isEmpty() || token.equalsIgnoreCase("keep-alive") || token.equalsIgnoreCase("close")) {
                        continue;
                    }
                    if (listed == null) {
                        listed = new String[4];
                    } else if (n == listed.length) {
                        listed = java.util.Arrays.copyOf(listed, n * 2);
                    }
                    listed[n++] = token;
                }
            }
        }
        return listed == null ? null : java.util.Arrays.copyOf(listed, n);
    }

    private static boolean listed(String[] listed, CharSequence name) {
        if (listed != null) {
            for (String l : listed) {
                if (AsciiString.contentEqualsIgnoreCase(l, name)) {
                    return true;
                }
            }
        }
        return false;
    }

    /** The client's headers as an engine should see them, with {@code upstreamRequestId} as its request id. */
    public static HttpHeaders toEngine(HttpHeaders in, String upstreamRequestId) {
        HttpHeaders h = UNVALIDATED.newHeaders(); // every name and value was validated by the decoder
        String[] connectionListed = in.contains(HttpHeaderNames.CONNECTION) ? connectionListed(in) : null;
        Iterator<Map.Entry<CharSequence, CharSequence>> it = in.iteratorCharSequence();
        while (it.hasNext()) {
            Map.Entry<CharSequence, CharSequence> e = it.next();
            CharSequence k = e.getKey();
            if (isHopByHop(k) || gatewayOnly(k) || listed(connectionListed, k)) {
                continue;
            }
            h.add(k, e.getValue());
        }
        h.set("x-request-id", upstreamRequestId);
        return h;
    }

    /** An engine's response headers as the client should see them (the caller sets the client's request id). */
    public static void toClient(HttpHeaders engine, HttpHeaders out) {
        String[] connectionListed = engine.contains(HttpHeaderNames.CONNECTION) ? connectionListed(engine) : null;
        Iterator<Map.Entry<CharSequence, CharSequence>> it = engine.iteratorCharSequence();
        while (it.hasNext()) {
            Map.Entry<CharSequence, CharSequence> e = it.next();
            CharSequence k = e.getKey();
            if (isHopByHop(k) || listed(connectionListed, k)) {
                continue;
            }
            out.add(k, e.getValue());
        }
    }
}
