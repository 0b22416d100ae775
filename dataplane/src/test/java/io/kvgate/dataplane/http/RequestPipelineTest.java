package io.kvgate.dataplane.http;

import static io.kvgate.dataplane.http.StageFixture.chatHead;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.dataplane.exchange.RequestContext;
import io.kvgate.dataplane.request.ParsedRequest;
import io.kvgate.dataplane.request.Refusal;
import io.kvgate.dataplane.request.RoutingInputs;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The second front door: a request built from a head and body bytes runs head → body → validate → prompt → forward
 * body with no channel at all, and stops where routing would start — with the rule, the routing inputs and the body
 * the engine gets, or with the refusal the client would get.
 */
class RequestPipelineTest {
    private StageFixture f;
    private RequestContext rc;

    @BeforeEach
    void setUp() throws Exception {
        f = new StageFixture();
    }

    @AfterEach
    void tearDown() {
        if (rc != null) {
            rc.end();
        }
        f.close();
    }

    private Refusal run(String body, String... headers) {
        rc = f.begin(chatHead(body, headers));
        return f.routable(rc, body);
    }

    @Test
    void aSessionRequestStopsAtTheDecisionWithItsRuleAndSessionKey() {
        assertNull(run("{\"model\":\"s\",\"user\":\"alice\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"));
        assertEquals("sticky", rc.rule().name());
        assertEquals("alice", rc.inputs().sessionKey());
        assertEquals("sticky", rc.access().rule);
        assertNull(rc.servingEndpoints(), "any endpoint of the rule");
    }

    @Test
    void aChwblRuleWithoutATokenizerKeysOnTheFirstCharactersOfTheText() {
        assertNull(run("{\"model\":\"t\",\"messages\":[{\"role\":\"user\",\"content\":\"the same sixteen chars, then A\"}]}"));
        long a = rc.inputs().textPrefixKey();
        rc.end();
        assertNull(run("{\"model\":\"t\",\"messages\":[{\"role\":\"user\",\"content\":\"the same sixteen chars, then B\"}]}"));
        long b = rc.inputs().textPrefixKey();
        rc.end();
        assertNull(run("{\"model\":\"t\",\"messages\":[{\"role\":\"user\",\"content\":\"another conversation\"}]}"));
        long c = rc.inputs().textPrefixKey();
        assertNotEquals(RoutingInputs.NO_TEXT_KEY, a);
        assertEquals(a, b, "only chwbl.prefix_chars (16) characters are keyed on");
        assertNotEquals(a, c);
    }

    @Test
    void theForwardedBodyHasNoEngineFieldsAndSglangsLoraForm() {
        assertNull(run("{\"model\":\"sg\",\"kv_transfer_params\":{\"do_remote_prefill\":true},\"lora_path\":\"x\","
            + "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"));
        String forwarded = StageFixture.body(rc);
        assertFalse(forwarded.contains("kv_transfer_params"), forwarded);
        assertTrue(forwarded.endsWith(",\"lora_path\":null}"), "a base-model request runs no client adapter: " + forwarded);
    }

    @Test
    void theHandOffMovesTheBodyAndCopiesTheFields() {
        String body = "{\"model\":\"m\",\"stream\":true,\"n\":2,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
        assertNull(run(body, "X-Request-Id: req-1"));
        ParsedRequest p = rc.handOff();
        try {
            assertNull(rc.body(), "the exchange owns the body now");
            assertNull(rc.head());
            assertEquals(body.substring(0, body.length() - 1) + ",\"stream_options\":{\"include_usage\":true}}",
                p.body().toString(java.nio.charset.StandardCharsets.UTF_8), "the forward-body stage's edit: usage forced on a stream");
            assertTrue(p.answerRewrite() != null, "and the answer is rewritten to match what the client asked");
            assertEquals("m", p.model());
            assertTrue(p.stream());
            assertEquals(2, p.n());
            assertEquals("req-1", p.requestId());
            assertTrue(p.chat());
            assertEquals("/v1/chat/completions", p.path());
            assertSame(rc.rule(), p.rule());
        } finally {
            p.body().release();
        }
    }

    @Test
    void explainNeedsTheAdminToken() {
        String body = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
        assertNull(run(body, "X-Kvgate-Explain: 1"));
        assertFalse(rc.explain(), "without the admin token the routing stays private");
        rc.end();
        assertNull(run(body, "X-Kvgate-Explain: 1", ApiKeyAuth.ADMIN_TOKEN_HEADER + ": admin-token-0123456789"));
        assertTrue(rc.explain());
    }

    @Test
    void anUnknownModelIsOpenAisModelNotFound() {
        Refusal r = run("{\"model\":\"nope\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
        assertEquals(404, r.status().code());
        assertEquals("model_not_found", r.reason());
        assertEquals("model_not_found", r.code());
        assertEquals("model", r.param());
        assertEquals("The model `nope` does not exist.", r.message());
    }

    @Test
    void aBodyProblemIsA400NamingItsParam() {
        Refusal n = run("{\"model\":\"m\",\"n\":3,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
        assertEquals(400, n.status().code());
        assertEquals("n", n.param());
        assertFalse(n.closes(), "the body was read whole: the connection goes on");
        rc.end();
        Refusal json = run("{\"model\":");
        assertEquals(400, json.status().code());
        assertNull(json.param(), "the body as a whole");
    }

    @Test
    void aPriorityHeaderNamingNoClassIsA400() {
        Refusal r = run("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", "X-Kvgate-Priority: urgent");
        assertEquals(400, r.status().code());
        assertEquals("invalid_priority", r.reason());
    }

    @Test
    void aRefusedHeadStopsThePipelineBeforeTheBody() {
        rc = f.begin(StageFixture.head("POST", "/v1/chat/completions", "Content-Type: application/json"));
        assertSame(Refusal.UNAUTHORIZED, f.routable(rc, "{\"model\":\"m\"}"));
        assertNull(rc.body(), "not a byte of it was buffered");
    }
}
