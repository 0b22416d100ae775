package io.kvgate.tools.system;

import static io.kvgate.tools.system.LoraKvEngines.cachedTokens;
import static io.kvgate.tools.system.LoraKvEngines.route;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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
 * LoRA under kv_exact (issue #13 item 4): two simulated vLLM engines serve adapter {@code sql-lora} and publish its
 * blocks under LoRA-salted keys (the adapter name in every block's extra keys, as vLLM does). A request for the
 * adapter must land on the engine caching its blocks and be served from that cache; a base-model request with the
 * same prompt must match none of them.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("system")
class LoraContractSystemTest {
    private LoraKvEngines e;

    @BeforeAll
    void start() throws Exception {
        e = new LoraKvEngines(SimulatorConfig.Dialect.VLLM);
    }

    @AfterAll
    void stop() {
        if (e != null) {
            e.close();
        }
    }

    @Test
    void adapterRequestsHitTheAdaptersCachedBlocksAndBaseRequestsNeverDo() throws Exception {
        HttpResponse<String> first = e.chat("sql-lora", "Parcels late in March?");
        int owner = e.engineOf(first);
        Await.until(LoraKvEngines.WAIT, "the adapter's blocks indexed", () -> e.blocks(owner) > 0 && e.blocks(owner) == e.sims.get(owner).cachedBlocks(0));
        RuleStats stats = e.gw.router().stats("lora");

        long matchedBefore = stats.matchedBlocks();
        HttpResponse<String> again = e.chat("sql-lora", "Parcels late in April?");
        assertTrue(route(again).contains("tier=kv_exact"), route(again));
        assertEquals(owner, e.engineOf(again), "the adapter request goes where its LoRA blocks are cached");
        long adapterMatched = stats.matchedBlocks() - matchedBefore;
        assertTrue(adapterMatched >= 8, "the shared system prompt's LoRA-keyed blocks matched: " + adapterMatched);
        assertTrue(cachedTokens(again) >= adapterMatched * 16, "the engine served them from its cache: " + again.body());

        long beforeBase = stats.matchedBlocks();
        HttpResponse<String> base = e.chat("qwen3", "Parcels late in April?");
        assertEquals(beforeBase, stats.matchedBlocks(), "a base-model prompt matches no adapter block: " + route(base));
        assertFalse(route(base).contains("tier=kv_exact"), route(base));
        assertEquals(0, cachedTokens(base), "the engine has no base-model blocks for it either: " + base.body());
    }
}
