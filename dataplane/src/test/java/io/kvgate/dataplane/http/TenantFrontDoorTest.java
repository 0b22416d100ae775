package io.kvgate.dataplane.http;

import static io.kvgate.dataplane.http.FrontDoorHarness.ascii;
import static io.kvgate.dataplane.http.FrontDoorHarness.chatPost;
import static io.kvgate.dataplane.http.FrontDoorHarness.output;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.config.TenancyConfig;
import io.kvgate.dataplane.route.PriorityClass;
import io.netty.buffer.Unpooled;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpVersion;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Tenants at the front door, on the real pipeline over an {@code EmbeddedChannel} (the exchange is the harness's
 * recorder, answered by the test): keys to tenants, revocation by reload, the model allow-list, the trusted priority,
 * and limits with reservation, 429s and the rate-limit headers, on the harness's manual clock.
 */
class TenantFrontDoorTest {
    private static final String ACME_KEY = "acme-secret-key";
    private static final String BETA_KEY = "beta-secret-key";
    private static final String BODY = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":100}";

    private FrontDoorHarness h;

    private static String yaml(String acmeExtra) {
        return FrontDoorHarness.BASE_YAML.replace("api_keys: [k1]\n", """
            api_keys: [k1]
            tenants:
              - name: acme
                api_key_sha256: [%s]
                models: [m]
            %s
              - name: beta
                api_key_sha256: [%s]
                priority: batch
            """.formatted(TenancyConfig.sha256Hex(ACME_KEY), acmeExtra, TenancyConfig.sha256Hex(BETA_KEY)));
    }

    private void start(String acmeExtra) throws Exception {
        h = new FrontDoorHarness(yaml(acmeExtra));
    }

    @AfterEach
    void tearDown() {
        if (h != null) {
            h.close();
        }
    }

    private static String post(String key, String body, String... headers) {
        String[] all = new String[headers.length + 1];
        all[0] = "Authorization: Bearer " + key;
        System.arraycopy(headers, 0, all, 1, headers.length);
        return chatPost(body, all);
    }

    private static String statusLine(String out) {
        return out.isEmpty() ? "" : out.substring(0, out.indexOf("\r\n"));
    }

    private static String header(String out, String name) {
        for (String line : out.substring(0, out.indexOf("\r\n\r\n")).split("\r\n")) {
            int colon = line.indexOf(':');
            if (colon > 0 && line.substring(0, colon).equalsIgnoreCase(name)) {
                return line.substring(colon + 1).strip();
            }
        }
        return null;
    }

    /** Answers exchange {@code i} with a 200 whose usage the relay reported, or an error status without usage. */
    private void answer(int i, int status, long promptTokens, long completionTokens) {
        var r = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.valueOf(status),
            Unpooled.copiedBuffer("{}", StandardCharsets.US_ASCII));
        r.headers().setInt(HttpHeaderNames.CONTENT_LENGTH, 2);
        var access = h.owners.get(i).accessRecord();
        access.promptTokens = promptTokens;
        access.completionTokens = completionTokens;
        h.contexts.get(i).writeAndFlush(r);
        h.owners.get(i).onExchangeDone(true);
    }

    @Test
    void aTenantKeyNamesItsTenantAndTheFlatKeysStayTheAnonymousOne() throws Exception {
        start("");
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(post(ACME_KEY, BODY)));
        assertEquals(1, h.started.size());
        assertEquals("acme", h.owners.get(0).accessRecord().tenant);
        assertEquals("sha256:" + TenancyConfig.sha256Hex(ACME_KEY).substring(0, 12), h.owners.get(0).accessRecord().keyId);
        answer(0, 200, 5, 5);
        output(ch);
        ch.writeInbound(ascii(post("k1", BODY)));
        assertEquals(2, h.started.size(), "the flat api_keys keep working");
        assertEquals("anonymous", h.owners.get(1).accessRecord().tenant);
        answer(1, 200, 5, 5);
        output(ch);
        ch.writeInbound(ascii(post("nobody", BODY)));
        assertEquals("HTTP/1.1 401 Unauthorized", statusLine(output(ch)));
        ch.finishAndReleaseAll();
    }

    @Test
    void withTenantsButNoFlatKeysAKeylessRequestIs401() throws Exception {
        h = new FrontDoorHarness(yaml("").replace("api_keys: [k1]\n", ""));
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(chatPost(BODY)));
        assertEquals("HTTP/1.1 401 Unauthorized", statusLine(output(ch)));
        ch.finishAndReleaseAll();
    }

    @Test
    void aKeyRevokedByAReloadGets401OnTheNextRequest() throws Exception {
        start("");
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(post(ACME_KEY, BODY)));
        assertEquals(1, h.started.size());
        answer(0, 200, 1, 1);
        output(ch);
        // The reload drops acme's key: the same keep-alive connection's next request is refused.
        h.applied.set(GatewayConfig.parse(yaml("").replace(TenancyConfig.sha256Hex(ACME_KEY), TenancyConfig.sha256Hex("new-acme-key"))));
        ch.writeInbound(ascii(post(ACME_KEY, BODY)));
        assertEquals("HTTP/1.1 401 Unauthorized", statusLine(output(ch)));
        ch.finishAndReleaseAll(); // a refused head with a body closes its connection
        EmbeddedChannel next = h.channel();
        next.writeInbound(ascii(post("new-acme-key", BODY)));
        assertEquals(2, h.started.size(), "the new key works at once");
        next.finishAndReleaseAll();
    }

    @Test
    void aModelOutsideTheAllowListIs404ModelNotFound() throws Exception {
        start("");
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(post(ACME_KEY, BODY.replace("\"m\"", "\"small\""))));
        String out = output(ch);
        assertEquals("HTTP/1.1 404 Not Found", statusLine(out));
        assertTrue(out.contains("\"code\":\"model_not_found\""), out);
        assertTrue(out.contains("The model `small` does not exist."), out);
        assertEquals(0, h.started.size());
        ch.writeInbound(ascii(post(BETA_KEY, BODY.replace("\"m\"", "\"small\""))));
        assertEquals(1, h.started.size(), "beta has no allow-list");
        ch.finishAndReleaseAll();
    }

    @Test
    void theTenantsPriorityIsTrustedOverTheClientsHeaderUnlessTheTenantAllowsIt() throws Exception {
        start("    priority_header: true\n    priority: standard");
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(post(BETA_KEY, BODY, "X-Kvgate-Priority: interactive")));
        assertEquals("batch", h.started.get(0).head().headers().get(PriorityClass.HEADER), "beta may not raise itself");
        answer(0, 200, 1, 1);
        ch.writeInbound(ascii(post(ACME_KEY, BODY, "X-Kvgate-Priority: interactive")));
        assertEquals("interactive", h.started.get(1).head().headers().get(PriorityClass.HEADER), "acme may choose");
        answer(1, 200, 1, 1);
        ch.writeInbound(ascii(post(ACME_KEY, BODY)));
        assertEquals("standard", h.started.get(2).head().headers().get(PriorityClass.HEADER), "acme's own class by default");
        answer(2, 200, 1, 1);
        ch.writeInbound(ascii(post("k1", BODY, "X-Kvgate-Priority: interactive")));
        assertEquals("interactive", h.started.get(3).head().headers().get(PriorityClass.HEADER),
            "the anonymous tenant keeps the header, as before tenants");
        ch.finishAndReleaseAll();
    }

    @Test
    void requestsPerMinuteRefusesWith429RetryAfterAndHeadersUntilTheWindowMoves() throws Exception {
        start("    limits: {requests_per_minute: 2}");
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(post(ACME_KEY, BODY)));
        answer(0, 200, 3, 4);
        String first = output(ch);
        assertEquals("2", header(first, "x-ratelimit-limit-requests"));
        assertEquals("1", header(first, "x-ratelimit-remaining-requests"));
        assertEquals("1m0s", header(first, "x-ratelimit-reset-requests"), "the request's bucket leaves in a minute");
        assertNull(header(first, "x-ratelimit-limit-tokens"), "no token limit, no token headers");
        h.clock.advance(10, TimeUnit.SECONDS);
        ch.writeInbound(ascii(post(ACME_KEY, BODY)));
        answer(1, 200, 3, 4);
        assertEquals("0", header(output(ch), "x-ratelimit-remaining-requests"));
        h.clock.advance(20, TimeUnit.SECONDS);
        ch.writeInbound(ascii(post(ACME_KEY, BODY)));
        String limited = output(ch);
        assertEquals("HTTP/1.1 429 Too Many Requests", statusLine(limited));
        assertEquals(2, h.started.size(), "the limited request never reached an exchange");
        assertTrue(limited.contains("\"type\":\"rate_limit_error\""), limited);
        assertTrue(limited.contains("\"code\":\"rate_limit_exceeded\""), limited);
        assertTrue(limited.contains("Rate limit reached for tenant 'acme' on requests_per_minute: limit 2, used 2, requested 1."),
            limited);
        assertEquals("30", header(limited, "Retry-After"), "the first request's bucket leaves 60 s after it, 30 s from now");
        assertEquals("0", header(limited, "x-ratelimit-remaining-requests"));
        var acme = h.gw.tenants().usage(h.applied.get()).stream().filter(r -> r.get("tenant").equals("acme")).findFirst().orElseThrow();
        assertEquals(java.util.Map.of("requests_per_minute", 1L), acme.get("limited"), "counted under the limit it met");
        assertEquals(java.util.Map.of("200", 2L, "429", 1L), acme.get("requests"), "every answer counted by status");
        h.clock.advance(30, TimeUnit.SECONDS);
        ch.writeInbound(ascii(post(ACME_KEY, BODY)));
        assertEquals(3, h.started.size(), "admitted once the first request left the window");
        ch.finishAndReleaseAll();
    }

    @Test
    void tokensAreReservedBeforeDispatchAndSettledFromTheUsage() throws Exception {
        start("    limits: {tokens_per_minute: 500}");
        EmbeddedChannel ch = h.channel();
        // The chat rule has no tokenizer: the prompt is estimated from the body (one token per 4 bytes) + max_tokens.
        long reserved = (BODY.length() + 3) / 4 + 100;
        ch.writeInbound(ascii(post(ACME_KEY, BODY)));
        assertEquals(1, h.started.size());
        answer(0, 200, 10, 20);
        String out = output(ch);
        assertEquals("500", header(out, "x-ratelimit-limit-tokens"));
        assertEquals(Long.toString(500 - reserved), header(out, "x-ratelimit-remaining-tokens"),
            "the head goes out while the reservation still holds");
        // Settled to the usage (30): three more requests of the same size fit now, which the reservations alone would not.
        for (int i = 1; i <= 3; i++) {
            ch.writeInbound(ascii(post(ACME_KEY, BODY)));
            assertEquals(i + 1, h.started.size(), "request " + i + " fits after the settlement");
            answer(i, 200, 10, 20);
            output(ch);
        }
        assertEquals("500", header(postAndAnswer(ch, 4), "x-ratelimit-limit-tokens"));
        ch.finishAndReleaseAll();
    }

    private String postAndAnswer(EmbeddedChannel ch, int i) {
        ch.writeInbound(ascii(post(ACME_KEY, BODY)));
        answer(i, 200, 10, 20);
        return output(ch);
    }

    @Test
    void anErrorReleasesTheReservationAndAClientGoneReleasesIt() throws Exception {
        start("    limits: {tokens_per_minute: 300, max_concurrent: 1}");
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(post(ACME_KEY, BODY)));
        answer(0, 503, -1, -1);
        output(ch);
        ch.writeInbound(ascii(post(ACME_KEY, BODY)));
        answer(1, 503, -1, -1);
        output(ch);
        ch.writeInbound(ascii(post(ACME_KEY, BODY)));
        assertEquals(3, h.started.size(), "two failed requests hold nothing (each reserves more than half the limit)");
        // A second connection of the same tenant while the first request is in flight: max_concurrent 1.
        EmbeddedChannel other = h.channel();
        other.writeInbound(ascii(post(ACME_KEY, BODY)));
        String limited = output(other);
        assertEquals("HTTP/1.1 429 Too Many Requests", statusLine(limited));
        assertTrue(limited.contains("on max_concurrent: limit 1, used 1"), limited);
        ch.close(); // the client leaves mid-request: its hold is released
        other.writeInbound(ascii(post(ACME_KEY, BODY)));
        assertEquals(4, h.started.size(), "the departed client's request holds nothing");
        other.finishAndReleaseAll();
        ch.finishAndReleaseAll();
    }

    @Test
    void aRequestLargerThanTheLimitIsRefusedAsNeverFitting() throws Exception {
        start("    limits: {tokens_per_minute: 50}");
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(post(ACME_KEY, BODY)));
        String out = output(ch);
        assertEquals("HTTP/1.1 429 Too Many Requests", statusLine(out));
        assertTrue(out.contains("This request alone asks for more than the limit allows"), out);
        ch.finishAndReleaseAll();
    }

    @Test
    void aTenantWithoutLimitsGetsNoRateLimitHeaders() throws Exception {
        start("    limits: {requests_per_minute: 5}");
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(post(BETA_KEY, BODY)));
        answer(0, 200, 1, 1);
        String out = output(ch);
        assertFalse(out.toLowerCase().contains("x-ratelimit"), out);
        ch.finishAndReleaseAll();
    }

    @org.junit.jupiter.api.io.TempDir
    java.nio.file.Path dir;

    @Test
    void theTenantsSaltReplacesTheClientsOrRefusesItAndTheAnonymousTenantHasItsOwn() throws Exception {
        java.nio.file.Path secret = dir.resolve("salt.secret");
        java.nio.file.Files.writeString(secret, "a-salt-secret-of-some-length");
        h = new FrontDoorHarness(yaml("    client_cache_salt: refuse").replace("tenants:", "cache_salt: {secret_file: " + secret
            + "}\ntenants:"));
        io.kvgate.dataplane.tenant.TenantDirectory d = io.kvgate.dataplane.tenant.TenantDirectory.of(h.applied.get());
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(post(BETA_KEY, BODY.replace("{\"model\"", "{\"cache_salt\":\"mine\",\"model\""))));
        assertEquals(1, h.started.size());
        String beta = h.bodies.get(0);
        assertTrue(beta.contains("\"cache_salt\":\"" + d.tenant("beta").cacheSalt() + "\""), beta);
        assertFalse(beta.contains("mine"), "the client's own salt is dropped: " + beta);
        answer(0, 200, 1, 1);
        output(ch);
        ch.writeInbound(ascii(post(ACME_KEY, BODY.replace("{\"model\"", "{\"cache_salt\":\"mine\",\"model\""))));
        String out = output(ch);
        assertEquals("HTTP/1.1 400 Bad Request", statusLine(out));
        assertTrue(out.contains("\"param\":\"cache_salt\"") && out.contains("cache_salt is set by the gateway for tenant 'acme'"), out);
        ch.writeInbound(ascii(post(ACME_KEY, BODY)));
        assertTrue(h.bodies.get(1).endsWith(",\"cache_salt\":\"" + d.tenant("acme").cacheSalt() + "\"}"), h.bodies.get(1));
        answer(1, 200, 1, 1);
        output(ch);
        ch.writeInbound(ascii(post("k1", BODY)));
        assertTrue(h.bodies.get(2).contains("\"cache_salt\":\"" + d.anonymous().cacheSalt() + "\""), h.bodies.get(2));
        assertEquals(3, java.util.Set.of(d.anonymous().cacheSalt(), d.tenant("acme").cacheSalt(), d.tenant("beta").cacheSalt()).size());
        ch.finishAndReleaseAll();
    }

    /** The exchange relays an engine's head as bytes ({@code RelayHead}): the headers go in there too, and it counts. */
    @Test
    void aRelayedEngineHeadCarriesTheHeadersAndCountsUnderTheTenant() throws Exception {
        start("    limits: {requests_per_minute: 7}");
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(post(ACME_KEY, BODY)));
        var ctx = h.contexts.get(0);
        EmbeddedChannel engine = new EmbeddedChannel(new io.kvgate.dataplane.wire.EngineResponseDecoder(4096, 8192));
        engine.writeInbound(ascii("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            + "9\r\ndata: a\n\n\r\n0\r\n\r\n"));
        io.kvgate.dataplane.wire.ResponseHead head = engine.readInbound();
        ctx.write(io.kvgate.dataplane.wire.RelayHead.relay(ctx.alloc(), head, "rid", null, false, false));
        head.release();
        ctx.write(engine.readInbound());
        ctx.writeAndFlush(engine.readInbound());
        engine.finishAndReleaseAll();
        h.owners.get(0).onExchangeDone(true);
        String out = output(ch);
        assertEquals("HTTP/1.1 200 OK", statusLine(out));
        assertEquals("7", header(out, "x-ratelimit-limit-requests"), out);
        assertEquals("6", header(out, "x-ratelimit-remaining-requests"), out);
        assertTrue(out.contains("\r\n\r\n9\r\ndata: a"), "the head still ends before the body: " + out);
        var acme = h.gw.tenants().usage(h.applied.get()).stream().filter(r -> r.get("tenant").equals("acme")).findFirst().orElseThrow();
        assertEquals(java.util.Map.of("200", 1L), acme.get("requests"));
        ch.finishAndReleaseAll();
    }

    private static String get(String key, String path) {
        return "GET " + path + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key + "\r\n\r\n";
    }

    private static String completionsPost(String key, String body) {
        return chatPost(body, "Authorization: Bearer " + key).replace("POST /v1/chat/completions", "POST /v1/completions");
    }

    private static java.util.List<String> listedIds(String out) throws Exception {
        var json = new com.fasterxml.jackson.databind.ObjectMapper().readTree(out.substring(out.indexOf("\r\n\r\n") + 4));
        java.util.List<String> ids = new java.util.ArrayList<>();
        json.path("data").forEach(m -> ids.add(m.path("id").asText()));
        return ids;
    }

    @Test
    void modelsListAndRetrieveShowOnlyTheTenantsAllowList() throws Exception {
        start("");
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(get(ACME_KEY, "/v1/models")));
        String acme = output(ch);
        assertEquals("HTTP/1.1 200 OK", statusLine(acme));
        assertEquals(java.util.List.of("m"), listedIds(acme), "acme may use m only: " + acme);
        ch.writeInbound(ascii(get(BETA_KEY, "/v1/models")));
        assertEquals(java.util.List.of("m", "small"), listedIds(output(ch)), "beta has no allow-list");
        ch.writeInbound(ascii(get("k1", "/v1/models")));
        assertEquals(java.util.List.of("m", "small"), listedIds(output(ch)), "the anonymous tenant sees every model");

        ch.writeInbound(ascii(get(ACME_KEY, "/v1/models/small")));
        String hidden = output(ch);
        assertEquals("HTTP/1.1 404 Not Found", statusLine(hidden));
        ch.writeInbound(ascii(get(ACME_KEY, "/v1/models/no-such-model")));
        String missing = output(ch);
        assertEquals(missing.substring(missing.indexOf("\r\n\r\n")).replace("no-such-model", "small"),
            hidden.substring(hidden.indexOf("\r\n\r\n")), "a model outside the allow-list reads as one that does not exist");
        assertTrue(hidden.contains("\"message\":\"The model `small` does not exist.\""), hidden);
        assertTrue(hidden.contains("\"type\":\"invalid_request_error\""), hidden);
        assertTrue(hidden.contains("\"param\":\"model\""), hidden);
        assertTrue(hidden.contains("\"code\":\"model_not_found\""), hidden);
        ch.writeInbound(ascii(get(ACME_KEY, "/v1/models/m")));
        String allowed = output(ch);
        assertEquals("HTTP/1.1 200 OK", statusLine(allowed));
        assertTrue(allowed.contains("\"id\":\"m\""), allowed);
        ch.writeInbound(ascii(get(BETA_KEY, "/v1/models/small")));
        assertEquals("HTTP/1.1 200 OK", statusLine(output(ch)), "beta may retrieve small");
        assertEquals(0, h.started.size(), "local routes: no engine");
        ch.finishAndReleaseAll();
    }

    /**
     * OpenAI sends the rate-limit headers on every answer: a limited tenant's refusals before the limits check (a 400
     * of the body, a 404 model, a context-length 400) and its local routes carry them too, with the windows as they
     * are (a refusal reserves nothing); an unknown key and a tenant without limits get none.
     */
    @Test
    void everyAnswerOfALimitedTenantCarriesTheHeadersRefusalsAndLocalRoutesIncluded() throws Exception {
        h = new FrontDoorHarness(yaml("    limits: {requests_per_minute: 5, tokens_per_minute: 100000}")
            .replace("  - name: chat\n    models: [m]\n", "  - name: chat\n    models: [m]\n    max_model_len: 64\n"));
        EmbeddedChannel ch = h.channel();
        String small = BODY.replace(",\"max_tokens\":100", ",\"max_tokens\":10");
        ch.writeInbound(ascii(post(ACME_KEY, small)));
        assertEquals(1, h.started.size());
        answer(0, 200, 5, 5);
        String ok = output(ch);
        assertEquals("4", header(ok, "x-ratelimit-remaining-requests"), ok);
        assertEquals(Long.toString(100_000 - ((small.length() + 3) / 4 + 10)), header(ok, "x-ratelimit-remaining-tokens"),
            "the head goes out while the reservation holds: " + ok);
        h.clock.advance(15, TimeUnit.SECONDS);

        java.util.Map<String, String> refusals = new java.util.LinkedHashMap<>();
        refusals.put("HTTP/1.1 400 Bad Request", post(ACME_KEY, "{\"model\":\"m\"}"));
        refusals.put("HTTP/1.1 404 Not Found", post(ACME_KEY, BODY.replace("\"m\"", "\"small\"")));
        StringBuilder ids = new StringBuilder("[");
        for (int i = 0; i < 60; i++) {
            ids.append(i == 0 ? "" : ",").append(7);
        }
        String overflow = "{\"model\":\"m\",\"prompt\":" + ids + "],\"max_tokens\":100}";
        refusals.put("HTTP/1.1 400 Bad Request ", completionsPost(ACME_KEY, overflow));
        for (var e : refusals.entrySet()) {
            ch.writeInbound(ascii(e.getValue()));
            String out = output(ch);
            assertEquals(e.getKey().strip(), statusLine(out), out);
            assertEquals("5", header(out, "x-ratelimit-limit-requests"), out);
            assertEquals("4", header(out, "x-ratelimit-remaining-requests"), "a refusal reserves nothing: " + out);
            assertEquals("45s", header(out, "x-ratelimit-reset-requests"), out);
            assertEquals("100000", header(out, "x-ratelimit-limit-tokens"), out);
            assertEquals("99990", header(out, "x-ratelimit-remaining-tokens"), "settled to the usage (10) since: " + out);
            assertEquals("45s", header(out, "x-ratelimit-reset-tokens"), out);
            assertNull(header(out, "retry-after"), "only a 429 says when to retry: " + out);
        }
        assertTrue(output(ch).isEmpty());
        ch.writeInbound(ascii(completionsPost(ACME_KEY, overflow)));
        assertTrue(output(ch).contains("\"code\":\"context_length_exceeded\""), "the third refusal is the context bound");
        ch.writeInbound(ascii(get(ACME_KEY, "/v1/models")));
        String models = output(ch);
        assertEquals("HTTP/1.1 200 OK", statusLine(models));
        assertEquals("4", header(models, "x-ratelimit-remaining-requests"), models);
        assertEquals(1, h.started.size(), "no refusal reached an exchange");

        ch.writeInbound(ascii(post(BETA_KEY, "{\"model\":\"m\"}")));
        String beta = output(ch);
        assertEquals("HTTP/1.1 400 Bad Request", statusLine(beta));
        assertFalse(beta.toLowerCase().contains("x-ratelimit"), "beta has no limits: " + beta);
        ch.finishAndReleaseAll();
        EmbeddedChannel stranger = h.channel();
        stranger.writeInbound(ascii(get("nobody", "/v1/models")));
        String unauthorized = output(stranger);
        assertEquals("HTTP/1.1 401 Unauthorized", statusLine(unauthorized));
        assertFalse(unauthorized.toLowerCase().contains("x-ratelimit"), "no caller, no tenant's headers: " + unauthorized);
        stranger.finishAndReleaseAll();
    }

    /** A read timeout of a head that never completed is nobody's: not the last request's tenant's. */
    @Test
    void aTimedOutHeadCarriesNeitherTheLastTenantsHeadersNorItsCount() throws Exception {
        start("    limits: {requests_per_minute: 5}");
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(post(ACME_KEY, BODY)));
        answer(0, 200, 1, 1);
        assertEquals("4", header(output(ch), "x-ratelimit-remaining-requests"));
        ch.writeInbound(ascii("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"));
        ch.advanceTimeBy(1500, TimeUnit.MILLISECONDS);
        ch.runScheduledPendingTasks();
        String timedOut = output(ch);
        assertEquals("HTTP/1.1 408 Request Timeout", statusLine(timedOut));
        assertFalse(timedOut.toLowerCase().contains("x-ratelimit"), timedOut);
        var acme = h.gw.tenants().usage(h.applied.get()).stream().filter(r -> r.get("tenant").equals("acme")).findFirst().orElseThrow();
        assertEquals(java.util.Map.of("200", 1L), acme.get("requests"), "the 408 is not acme's");
        ch.finishAndReleaseAll();
    }

    /** Logs and metrics name a tenant and a key id, never a key nor its whole digest (issue #40 item 1). */
    @Test
    void theMetricsAndTheAccessRecordNameTheTenantAndKeyIdNeverTheSecret() throws Exception {
        start("    limits: {requests_per_minute: 1}");
        h.gw.tenants().register(h.metrics.registry()); // as the gateway does when it starts
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(post(ACME_KEY, BODY)));
        var access = h.owners.get(0).accessRecord();
        answer(0, 200, 3, 4);
        output(ch);
        ch.writeInbound(ascii(post(ACME_KEY, BODY)));
        assertEquals("HTTP/1.1 429 Too Many Requests", statusLine(output(ch)));
        String digest = TenancyConfig.sha256Hex(ACME_KEY);
        String scrape = new String(io.kvgate.dataplane.metrics.MetricsExposition.scrape(h.metrics.registry(), null).body(),
            StandardCharsets.UTF_8);
        assertTrue(scrape.contains("kvgate_tenant_limited_total{limit=\"requests_per_minute\",tenant=\"acme\"} 1"), scrape);
        assertTrue(scrape.contains("kvgate_tenant_requests_total{status=\"429\",tenant=\"acme\"} 1"), scrape);
        assertFalse(scrape.contains(ACME_KEY) || scrape.contains(digest), "no key nor digest in the metrics");
        assertEquals("sha256:" + digest.substring(0, 12), access.keyId);
        assertEquals("acme", access.tenant);
        ch.finishAndReleaseAll();
    }
}
