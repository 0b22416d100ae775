package io.kvgate.dataplane.quality;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.dataplane.metrics.FamilyRegistry;
import io.kvgate.dataplane.metrics.MetricsExposition;
import org.junit.jupiter.api.Test;

/** Per-rule counters, their families and the ctl quality report, from the same records. */
class PromptLedgerTest {
    @Test
    void recordsRenderAsFamiliesAndAsTheReport() {
        FamilyRegistry registry = new FamilyRegistry();
        PromptLedger ledger = new PromptLedger();
        ledger.register(registry);
        ledger.record("chat", 400, 64, 320, 64, 64, LossCause.LOAD_BOUND);
        ledger.record("chat", 400, 320, 320, 320, 320, null);
        ledger.record("chat", 100, 0, PromptAccount.UNKNOWN, PromptAccount.UNKNOWN, PromptAccount.UNKNOWN, null);
        ledger.unreported("chat");
        ledger.record(null, 400, 0, 0, 0, 0, null); // a request that never resolved to a rule: not accounted

        String page = MetricsExposition.text(registry);
        assertTrue(page.contains("kvgate_prompt_tokens_total{kind=\"prompt\",rule=\"chat\"} 900"), page);
        assertTrue(page.contains("kvgate_prompt_tokens_total{kind=\"reachable\",rule=\"chat\"} 640"), page);
        assertTrue(page.contains("kvgate_prompt_tokens_total{kind=\"predicted\",rule=\"chat\"} 384"), page);
        assertTrue(page.contains("kvgate_prompt_tokens_total{kind=\"observed\",rule=\"chat\"} 384"), page);
        assertTrue(page.contains("kvgate_routing_loss_tokens_total{cause=\"load_bound\",rule=\"chat\"} 256"), page);
        assertTrue(page.contains("kvgate_routing_loss_tokens_total{cause=\"cold\",rule=\"chat\"} 160"), page);
        assertTrue(page.contains("kvgate_routing_loss_tokens_total{cause=\"unknown\",rule=\"chat\"} 100"), page);
        assertTrue(page.contains("kvgate_prompt_accounting_requests_total{outcome=\"unreported\",rule=\"chat\"} 1"), page);

        JsonNode chat = ledger.report().path("rules").path("chat");
        assertEquals(3, chat.path("requests").asLong());
        assertEquals(1, chat.path("unreported_requests").asLong());
        assertEquals(0.4267, chat.path("hit_ratio").path("observed").asDouble(), 1e-9);
        assertEquals(0.6, chat.path("hit_ratio").path("observed_of_reachable").asDouble(), 1e-9);
        long lost = 0;
        for (JsonNode v : chat.path("loss")) {
            lost += v.asLong();
        }
        assertEquals(900 - 384, lost, "every computed token has a cause");
    }
}
