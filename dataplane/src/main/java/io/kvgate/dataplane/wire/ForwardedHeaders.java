package io.kvgate.dataplane.wire;

import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaders;
import io.netty.util.AsciiString;
import java.util.Iterator;
import java.util.Map;

/**
 * Which headers cross the gateway, in each direction. Dropped on the way to an engine: hop-by-hop headers
 * (RFC 9110 §7.6.1), every header the client listed in {@code Connection:}, {@code Host}/{@code Content-Length}
 * (the gateway frames the body itself), {@code Expect}, the client's {@code Authorization} (the gateway's API key
 * is not the engine's business) and every {@code X-Kvgate-*} control header; the engine sees the gateway's own
 * request id. The client's decoded headers are written straight into the engine request's bytes
 * ({@link #writeToEngine}): no second header map is built. Dropped on the way back (decided on the raw bytes by
 * {@link EngineResponseDecoder}): hop-by-hop headers, the headers the engine listed in {@code Connection:}, the
 * engine's {@code X-Request-Id} (the client sees its own) and {@code X-Kvgate-*} (the gateway's namespace).
 */
public final class ForwardedHeaders {
    private ForwardedHeaders() {}

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
                    int s = start;
                    int e = i;
                    start = i + 1;
                    while (s < e && v.charAt(s) <= ' ') {
                        s++;
                    }
                    while (e > s && v.charAt(e - 1) <= ' ') {
                        e--;
                    }
                    if (e == s || (e - s == 10 && v.regionMatches(true, s, "keep-alive", 0, 10))
                        || (e - s == 5 && v.regionMatches(true, s, "close", 0, 5))) {
                        continue; // the common tokens cost no substring
                    }
                    String token = v.substring(s, e);
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

    /**
     * Whether a client header named {@code name} reaches the engine (given the names its Connection: lists and the
     * header the gateway sets itself, if any; {@code traced}: the gateway writes its own trace context).
     */
    private static boolean toEngine(CharSequence name, String[] connectionListed, String gatewaySets, boolean traced) {
        return !isHopByHop(name) && !gatewayOnly(name) && !listed(connectionListed, name)
            && (gatewaySets == null || !AsciiString.contentEqualsIgnoreCase(gatewaySets, name))
            && (!traced || !traceContext(name));
    }

    /** The W3C trace-context headers, which a traced request's engine gets from the gateway's span instead. */
    private static boolean traceContext(CharSequence name) {
        return AsciiString.contentEqualsIgnoreCase(name, "traceparent") || AsciiString.contentEqualsIgnoreCase(name, "tracestate");
    }

    /**
     * Writes the client's headers an engine should see as header lines ({@code name: value CRLF}). Names and values
     * were validated by the client codec's decoder; they are written byte for byte (ISO-8859-1), as Netty's encoder
     * does. {@code gatewaySets}: a header the gateway writes itself (the client's of that name is left out), or null;
     * {@code traced}: the client's {@code traceparent}/{@code tracestate} are left out (the gateway writes its span's).
     */
    static void writeToEngine(HeadBytes out, HttpHeaders in, String gatewaySets, boolean traced) {
        String[] connectionListed = in.contains(HttpHeaderNames.CONNECTION) ? connectionListed(in) : null;
        if (in instanceof RequestHeaders r) { // the client codec's: read in place, no entry objects
            for (int i = 0, n = r.size(); i < n; i++) {
                CharSequence k = r.nameAt(i);
                if (toEngine(k, connectionListed, gatewaySets, traced)) {
                    writeLine(out, k, r.valueAt(i));
                }
            }
            return;
        }
        Iterator<Map.Entry<CharSequence, CharSequence>> it = in.iteratorCharSequence();
        while (it.hasNext()) {
            Map.Entry<CharSequence, CharSequence> e = it.next();
            CharSequence k = e.getKey();
            if (toEngine(k, connectionListed, gatewaySets, traced)) {
                writeLine(out, k, e.getValue());
            }
        }
    }

    private static void writeLine(HeadBytes out, CharSequence name, CharSequence value) {
        out.latin1(name).colonSpace().latin1(value).crlf();
    }
}
