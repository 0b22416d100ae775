package io.kvgate.dataplane.admin;

import io.netty.buffer.ByteBufAllocator;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpVersion;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HexFormat;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The live status page ({@code GET /ui} on the admin listener): one self-contained HTML document, a classpath
 * resource, whose inline script polls the admin JSON routes and draws its charts as SVG. Nothing is fetched from
 * anywhere else, and the Content-Security-Policy says so: only the page's own inline script and style run (allowed
 * by their SHA-256, computed here from the resource, so editing the page never desynchronizes the policy), and its
 * requests may go to this origin only.
 *
 * <p>Immutable and thread-safe: the bytes, ETag and policy are computed once.
 */
public final class StatusPage {
    static final String RESOURCE = "status-page.html";
    private static final Pattern INLINE = Pattern.compile("<(script|style)>(.*?)</\\1>", Pattern.DOTALL);

    private final byte[] html;
    private final String etag;
    private final String contentSecurityPolicy;

    StatusPage(byte[] html) {
        this.html = html;
        this.etag = "\"" + HexFormat.of().formatHex(sha256(html), 0, 16) + "\"";
        this.contentSecurityPolicy = policy(new String(html, StandardCharsets.UTF_8));
    }

    /** The page shipped in the jar. */
    public static StatusPage load() {
        try (InputStream in = StatusPage.class.getResourceAsStream(RESOURCE)) {
            if (in == null) {
                throw new IllegalStateException("resource " + RESOURCE + " missing from the classpath");
            }
            return new StatusPage(in.readAllBytes());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** {@code 'sha256-...'} sources for every inline script and style block of the page, and nothing else. */
    static String policy(String page) {
        List<String> scripts = new ArrayList<>();
        List<String> styles = new ArrayList<>();
        Matcher m = INLINE.matcher(page);
        while (m.find()) {
            String source = "'sha256-" + Base64.getEncoder().encodeToString(sha256(m.group(2).getBytes(StandardCharsets.UTF_8))) + "'";
            (m.group(1).equals("script") ? scripts : styles).add(source);
        }
        return "default-src 'none'; script-src " + String.join(" ", scripts) + "; style-src " + String.join(" ", styles)
            + "; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
    }

    public String etag() {
        return etag;
    }

    public String contentSecurityPolicy() {
        return contentSecurityPolicy;
    }

    /**
     * The answer to a GET or HEAD of the page: 304 without a body when {@code ifNoneMatch} names the current ETag.
     * {@code no-cache}: a browser may keep the page but asks again each load, so a gateway upgrade shows at once.
     */
    FullHttpResponse response(ByteBufAllocator alloc, HttpVersion version, boolean head, String ifNoneMatch) {
        boolean notModified = ifNoneMatch != null && matches(ifNoneMatch);
        FullHttpResponse r;
        if (notModified) {
            r = new DefaultFullHttpResponse(version, HttpResponseStatus.NOT_MODIFIED, alloc.buffer(0));
        } else {
            r = new DefaultFullHttpResponse(version, HttpResponseStatus.OK, head ? alloc.buffer(0) : alloc.buffer(html.length).writeBytes(html));
            r.headers().set(HttpHeaderNames.CONTENT_TYPE, "text/html; charset=utf-8");
            r.headers().setInt(HttpHeaderNames.CONTENT_LENGTH, html.length);
        }
        if (notModified) {
            r.headers().setInt(HttpHeaderNames.CONTENT_LENGTH, 0);
        }
        r.headers().set(HttpHeaderNames.ETAG, etag);
        r.headers().set(HttpHeaderNames.CACHE_CONTROL, "no-cache");
        r.headers().set(HttpHeaderNames.CONTENT_SECURITY_POLICY, contentSecurityPolicy);
        r.headers().set("x-content-type-options", "nosniff");
        r.headers().set("referrer-policy", "no-referrer");
        r.headers().set(HttpHeaderNames.X_FRAME_OPTIONS, "DENY");
        return r;
    }

    private boolean matches(String ifNoneMatch) {
        for (String tag : ifNoneMatch.split(",")) {
            String t = tag.trim();
            if (t.equals("*") || t.equals(etag) || t.equals("W/" + etag)) {
                return true;
            }
        }
        return false;
    }

    private static byte[] sha256(byte[] b) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(b);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
