package io.kvgate.dataplane.route;

import static io.kvgate.dataplane.route.RouteFixtures.config;
import static io.kvgate.dataplane.route.RouteFixtures.decide;
import static io.kvgate.dataplane.route.RouteFixtures.event;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.BlockIndexConfig;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * LoRA adapters discovered from vLLM's {@code GET /v1/models} (cards whose {@code parent} is the base model):
 * which rule they belong to, which endpoints serve them, and that routing never sends one elsewhere.
 */
class AdapterDirectoryTest {
    private final ManualClock clock = new ManualClock();

    private RouteTable table(String policy) {
        String rules = "  - name: base\n    models: [qwen3, {name: other, adapters: [configured-lora]}]\n    engine: vllm\n"
            + "    policy: " + policy + "\n    block_size: 16\n    hash_seed: \"0\"\n    endpoints:\n"
            + (policy.equals("kv_exact")
                ? "      - {url: \"http://127.0.0.1:20000\", kv_events: \"tcp://127.0.0.1:30000\"}\n"
                  + "      - {url: \"http://127.0.0.1:20001\", kv_events: \"tcp://127.0.0.1:30001\"}\n"
                  + "      - {url: \"http://127.0.0.1:20002\", kv_events: \"tcp://127.0.0.1:30002\"}\n"
                : "      - url: http://127.0.0.1:20000\n      - url: http://127.0.0.1:20001\n      - url: http://127.0.0.1:20002\n")
            + "  - name: sg\n    models: [sgl]\n    engine: sglang\n    endpoints:\n      - url: http://127.0.0.1:20010\n";
        BlockIndex index = policy.equals("kv_exact") ? new BlockIndex(new BlockIndexConfig(4096, 8, 2, 64, 1024)) : null;
        return RouteFixtures.table(config("", rules), index, clock);
    }

    private static String key(int port) {
        return "127.0.0.1:" + port;
    }

    @Test
    void adaptersBelongToTheRuleOfTheirParentAndToTheEndpointsListingThem() {
        RouteTable t = table("round_robin");
        assertEquals(key(20000), t.ruleByName("base").endpoints().get(0).key(), "endpoint keys are host:port");
        AdapterDirectory d = new AdapterDirectory();
        d.observe(t, key(20001), Map.of("sql-lora", "qwen3", "foreign-lora", "llama", "configured-lora", "other"));
        d.observe(t, key(20002), Map.of("sql-lora", "qwen3"));
        d.observe(t, key(20010), Map.of("sgl-lora", "sgl"));
        AdapterDirectory.Served s = d.lookup(t, "sql-lora");
        assertSame(t.ruleByName("base"), s.rule());
        Rule base = t.ruleByName("base");
        assertArrayEquals(new int[] {base.endpoints().get(1).id(), base.endpoints().get(2).id()}, s.endpointIds());
        assertNull(d.lookup(t, "foreign-lora"), "its parent is no base model of the rule");
        assertNull(d.lookup(t, "configured-lora"), "a configured name is never shadowed");
        assertNull(d.lookup(t, "sgl-lora"), "only vLLM lists adapters with a parent");

        d.observe(t, key(20002), Map.of()); // endpoint 2 answered without it
        assertArrayEquals(new int[] {base.endpoints().get(1).id()}, d.lookup(t, "sql-lora").endpointIds());
        d.observe(t, key(20001), Map.of());
        assertNull(d.lookup(t, "sql-lora"), "no endpoint lists it any more: an unknown model (404)");
    }

    @Test
    void aRuleReplacedByAReloadIsNotServedUntilTheNextRound() {
        RouteTable t = table("round_robin");
        AdapterDirectory d = new AdapterDirectory();
        d.observe(t, key(20000), Map.of("sql-lora", "qwen3"));
        RouteTable next = table("least_outstanding");
        assertNull(d.lookup(next, "sql-lora"), "the rule it named is not in the new table");
        d.rebuild(next);
        assertSame(next.ruleByName("base"), d.lookup(next, "sql-lora").rule(), "the listings survive the rebuild");
    }

    @Test
    void everyPolicyRoutesADiscoveredAdapterOnlyToEndpointsServingIt() {
        for (String policy : new String[] {"round_robin", "least_outstanding", "weighted", "kv_exact"}) {
            Rule r = table(policy).ruleByName("base");
            int only = r.endpoints().get(2).id();
            for (int i = 0; i < 6; i++) {
                RouteEvent e = event(r).servedBy(only);
                assertSame(r.endpoints().get(2), decide(r, e, clock.nanoTime()), policy + " pick " + i);
            }
            r.endpoints().get(2).reportProbe(false);
            r.endpoints().get(2).breaker().applyProbeReport();
            assertNull(decide(r, event(r).servedBy(only), clock.nanoTime()), policy + ": the one serving endpoint is down: 503");
        }
    }
}
