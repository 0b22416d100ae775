package io.kvgate.tools.system;

import static io.kvgate.tools.system.LoraKvEngines.cachedTokens;
import static io.kvgate.tools.system.LoraKvEngines.route;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.dataplane.route.RuleStats;
import io.kvgate.testkit.Await;
import io.kvgate.tools.sim.SimulatorConfig;
import java.net.http.HttpResponse;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * LoRA under kv_exact on SGLang (issue #13 item 4). SGLang's radix tree keys an adapter's pages by (tokens, adapter),
 * but its KV events carry the adapter-blind page hash, so the gateway cannot tell an adapter's copy from the base
 * model's or another adapter's. What kv_exact does (docs/openai-contract.md row 20): an adapter request is routed by
 * the adapter-blind page hashes among the endpoints serving the adapter. That finds the adapter's own pages when the
 * prompt was last cached for it; a match may also be another copy of the same tokens, which the engine cannot use.
 * This test pins both halves on simulated SGLang engines.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("system")
class SglangLoraKvSystemTest {
    private LoraKvEngines e;

    @BeforeAll
    void start() throws Exception {
        e = new LoraKvEngines(SimulatorConfig.Dialect.SGLANG);
    }

    @AfterAll
    void stop() {
        if (e != null) {
            e.close();
        }
    }

    @Test
    void adapterRequestsFollowTheAdapterBlindPageHashes() throws Exception {
        HttpResponse<String> first = e.chat("sql-lora", "Parcels late in March?");
        int owner = e.engineOf(first);
        assertEquals("sql-lora", e.lastLora(owner), "SGLang ran the adapter: the gateway sent lora_path");
        Await.until(LoraKvEngines.WAIT, "the adapter's pages indexed", () -> e.blocks(owner) > 0 && e.blocks(owner) == e.sims.get(owner).cachedBlocks(0));
        RuleStats stats = e.gw.router().stats("lora");

        long before = stats.matchedBlocks();
        HttpResponse<String> again = e.chat("sql-lora", "Parcels late in April?");
        assertTrue(route(again).contains("tier=kv_exact"), route(again));
        assertEquals(owner, e.engineOf(again), "the adapter request goes where its pages are published");
        long matched = stats.matchedBlocks() - before;
        assertTrue(matched >= 8, "the shared system prompt's pages matched: " + matched);
        assertTrue(cachedTokens(again) >= matched * 16, "the engine served the adapter's own copy: " + again.body());

        // The limit: a base-model request with the same prompt matches the same adapter-blind hashes, but SGLang's
        // radix tree keeps the adapter's copy apart, so the engine recomputes the prompt.
        HttpResponse<String> base = e.chat("qwen3", "Parcels late in April?");
        assertTrue(route(base).contains("tier=kv_exact"), "adapter-blind events: " + route(base));
        assertEquals(owner, e.engineOf(base));
        assertNull(e.lastLora(owner), "the base model ran");
        assertEquals(0, cachedTokens(base), "no base-model copy in the engine: " + base.body());
    }
}
