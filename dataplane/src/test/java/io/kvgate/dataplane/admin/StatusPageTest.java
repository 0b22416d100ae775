package io.kvgate.dataplane.admin;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBufAllocator;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpVersion;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.Base64;
import org.junit.jupiter.api.Test;

/** The status page's headers, conditional GET and policy, and the admin token carried as Bearer or HTTP Basic. */
class StatusPageTest {
    private static String sha256(String s) throws Exception {
        return Base64.getEncoder().encodeToString(MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8)));
    }

    private static String basic(String userColonPassword) {
        return "Basic " + Base64.getEncoder().encodeToString(userColonPassword.getBytes(StandardCharsets.UTF_8));
    }

    @Test
    void policyAllowsExactlyTheInlineScriptAndStyleByHash() throws Exception {
        String script = "\nlet a = 1;\n";
        String style = "body { color: red; }";
        String policy = StatusPage.policy("<html><style>" + style + "</style><body><script>" + script + "</script></body></html>");
        assertEquals("default-src 'none'; script-src 'sha256-" + sha256(script) + "'; style-src 'sha256-" + sha256(style)
            + "'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'", policy);
    }

    @Test
    void shippedPageHasOneScriptAndOneStyleAndNoExternalAsset() {
        StatusPage page = StatusPage.load();
        String csp = page.contentSecurityPolicy();
        assertEquals(1, csp.split("script-src ")[1].split(";")[0].split(" ").length, csp);
        assertEquals(1, csp.split("style-src ")[1].split(";")[0].split(" ").length, csp);
        FullHttpResponse r = page.response(ByteBufAllocator.DEFAULT, HttpVersion.HTTP_1_1, false, null);
        try {
            String html = r.content().toString(StandardCharsets.UTF_8);
            String withoutSvgNamespace = html.replace("\"http://www.w3.org/2000/svg\"", "");
            assertFalse(withoutSvgNamespace.contains("http://") || withoutSvgNamespace.contains("https://")
                || html.contains("src=\"") || html.contains("href=") || html.contains("@import") || html.contains("url("), "no external asset");
            assertFalse(html.contains("style=\""), "no inline style attribute (the policy would block it)");
            assertTrue(html.contains("fetch(location.origin + path"), "polls this origin");
        } finally {
            r.release();
        }
    }

    @Test
    void currentEtagAnswers304WithoutBodyAndHeadHasNoBody() {
        StatusPage page = new StatusPage("<html><script>x()</script></html>".getBytes(StandardCharsets.UTF_8));
        FullHttpResponse full = page.response(ByteBufAllocator.DEFAULT, HttpVersion.HTTP_1_1, false, null);
        assertEquals(200, full.status().code());
        assertEquals(page.etag(), full.headers().get("etag"));
        assertEquals("no-cache", full.headers().get("cache-control"));
        assertEquals("nosniff", full.headers().get("x-content-type-options"));
        assertTrue(full.content().readableBytes() > 0);
        full.release();
        for (String tag : new String[] {page.etag(), "W/" + page.etag(), "\"other\", " + page.etag(), "*"}) {
            FullHttpResponse r = page.response(ByteBufAllocator.DEFAULT, HttpVersion.HTTP_1_1, false, tag);
            assertEquals(304, r.status().code(), tag);
            assertEquals(0, r.content().readableBytes());
            assertEquals(page.contentSecurityPolicy(), r.headers().get("content-security-policy"));
            r.release();
        }
        FullHttpResponse stale = page.response(ByteBufAllocator.DEFAULT, HttpVersion.HTTP_1_1, false, "\"other\"");
        assertEquals(200, stale.status().code());
        stale.release();
        FullHttpResponse head = page.response(ByteBufAllocator.DEFAULT, HttpVersion.HTTP_1_1, true, null);
        assertEquals(200, head.status().code());
        assertEquals(0, head.content().readableBytes());
        assertEquals("33", head.headers().get("content-length"));
        head.release();
    }

    @Test
    void tokenIsAcceptedAsBearerOrAsTheBasicPasswordOnly() {
        String t = "t-0123456789abcdef";
        assertTrue(AdminHandler.tokenOk(t, "Bearer " + t));
        assertTrue(AdminHandler.tokenOk(t, "bearer " + t), "auth schemes are case-insensitive");
        assertTrue(AdminHandler.tokenOk(t, basic("ops:" + t)));
        assertTrue(AdminHandler.tokenOk(t, basic(":" + t)), "any user name, even none");
        assertTrue(AdminHandler.tokenOk("a:b", basic("ops:a:b")), "the password is everything after the first colon");
        assertFalse(AdminHandler.tokenOk(t, null));
        assertFalse(AdminHandler.tokenOk(t, "Bearer wrong"));
        assertFalse(AdminHandler.tokenOk(t, basic(t + ":x")), "the token as user name is not the password");
        assertFalse(AdminHandler.tokenOk(t, basic(t)), "no colon: no password");
        assertFalse(AdminHandler.tokenOk(t, "Basic %%%"), "not base64");
        assertFalse(AdminHandler.tokenOk(t, "Token " + t));
    }
}
