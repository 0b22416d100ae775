package io.kvgate.dataplane.http;

import static io.kvgate.dataplane.http.StageFixture.chatHead;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import io.kvgate.dataplane.exchange.RequestContext;
import io.kvgate.dataplane.request.Refusal;
import io.netty.buffer.Unpooled;
import io.netty.handler.codec.http.DefaultLastHttpContent;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The validate stage alone: what a render route's request must pass ({@link ValidateStage#rule}) against what only a
 * request that generates must ({@link ValidateStage#generation}), over the rule set captured at the head.
 */
class ValidateStageTest {
    private StageFixture f;
    private RequestContext rc;

    @BeforeEach
    void setUp() throws Exception {
        f = new StageFixture();
    }

    @AfterEach
    void tearDown() {
        rc.end();
        f.close();
    }

    /** Head and body through their stages; the context is then ready for the validate stage. */
    private RequestContext read(String body, String... headers) {
        rc = f.begin(chatHead(body, headers));
        assertNull(f.pipeline.head(rc));
        DefaultLastHttpContent piece = new DefaultLastHttpContent(Unpooled.copiedBuffer(body, StandardCharsets.UTF_8));
        assertNull(f.pipeline.body(rc, piece, f.alloc));
        piece.release();
        return rc;
    }

    private ValidateStage stage() {
        return new ValidateStage(f.metrics, f.clock, (table, model) -> null);
    }

    @Test
    void theRuleComesFromTheTableCapturedAtTheHead() {
        read("{\"model\":\"s\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
        assertNull(stage().rule(rc));
        assertEquals("sticky", rc.rule().name());
    }

    @Test
    void aRenderableRequestNeedsOnlyTheRuleChecks() {
        // A priority header naming no class refuses a generation request, but a render route renders it.
        read("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", "X-Kvgate-Priority: urgent");
        assertNull(f.pipeline.renderable(rc));
        Refusal r = stage().generation(rc);
        assertEquals("invalid_priority", r.reason());
    }

    @Test
    void theRulesBoundsAreCheckedForRenderToo() {
        read("{\"model\":\"m\",\"n\":3,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
        Refusal r = f.pipeline.renderable(rc);
        assertEquals(400, r.status().code());
        assertEquals("n", r.param());
    }

    @Test
    void aModelNoRuleNamesIsNotFound() {
        read("{\"model\":\"adapter-x\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
        assertEquals("model_not_found", stage().rule(rc).reason());
    }

    @Test
    void aDiscoveredAdapterTakesItsParentsRuleAndOnlyTheEndpointsListingIt() {
        read("{\"model\":\"adapter-x\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
        var chat = f.table.ruleForModel("m");
        int[] listing = {chat.endpoints().get(0).id()};
        ValidateStage stage = new ValidateStage(f.metrics, f.clock, (table, model) -> {
            assertEquals(f.table, table, "looked up on the table captured at the head");
            return "adapter-x".equals(model) ? new io.kvgate.dataplane.route.AdapterDirectory.Served(chat, model, listing, "m") : null;
        });
        assertNull(stage.rule(rc));
        assertEquals("chat", rc.rule().name());
        assertNull(stage.generation(rc));
        org.junit.jupiter.api.Assertions.assertArrayEquals(listing, rc.servingEndpoints());
    }
}
