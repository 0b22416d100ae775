package io.kvgate.tools.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** A kvgate target's accounting families read from its metrics page, summed over rules, as deltas over a run. */
class GatewayAccountingTest {
    private static String page(long prompt, long reachable, long predicted, long observed, long cold, long loadBound) {
        return """
            # HELP kvgate_prompt_tokens_total Prompt tokens of accounted requests
            # TYPE kvgate_prompt_tokens_total counter
            kvgate_prompt_tokens_total{kind="prompt",rule="chat"} %d.0
            kvgate_prompt_tokens_total{kind="reachable",rule="chat"} %d.0
            kvgate_prompt_tokens_total{kind="predicted",rule="chat"} %d.0
            kvgate_prompt_tokens_total{kind="observed",rule="chat"} %d.0
            kvgate_prompt_tokens_total{kind="prompt",rule="other"} 100.0
            kvgate_routing_loss_tokens_total{cause="cold",rule="chat"} %d.0
            kvgate_routing_loss_tokens_total{cause="load_bound",rule="chat"} %d.0
            kvgate_routing_loss_tokens_total{cause="unknown",rule="other"} 100.0
            kvgate_tokens_total{kind="prompt",model="m",rule="chat"} 99999.0
            """.formatted(prompt, reachable, predicted, observed, cold, loadBound);
    }

    @Test
    void theRunsDeltaSummedOverRules() {
        GatewayAccounting before = GatewayAccounting.parse(page(1000, 800, 600, 500, 200, 200));
        GatewayAccounting after = GatewayAccounting.parse(page(3000, 2400, 1800, 1500, 600, 500));
        GatewayAccounting run = GatewayAccounting.between(before, after);
        assertEquals(2000, run.tokens("prompt"), "the other rule's 100 is in both snapshots");
        assertEquals(1600, run.tokens("reachable"));
        assertEquals(1000, run.tokens("observed"));
        assertEquals(400, run.lost("cold"));
        assertEquals(300, run.lost("load_bound"));
        assertEquals(0, run.lost("unknown"));
        String s = run.summary();
        assertTrue(s.contains("gateway accounting: 2000 prompt tokens: reachable 80.0%, predicted 60.0%, observed 50.0%"), s);
        assertTrue(s.contains("computed 700 prompt tokens: cold 57.1%, load_bound 42.9%"), s);
    }

    @Test
    void aTargetWithoutTheFamiliesIsNotAKvgate() {
        assertNull(GatewayAccounting.parse("vllm:prompt_tokens_total 5\n"));
        assertNull(GatewayAccounting.between(null, GatewayAccounting.parse(page(1, 1, 1, 1, 0, 0))));
    }
}
