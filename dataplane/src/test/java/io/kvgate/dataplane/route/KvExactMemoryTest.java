package io.kvgate.dataplane.route;

import static io.kvgate.dataplane.route.RouteFixtures.config;
import static io.kvgate.dataplane.route.RouteFixtures.table;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.config.KvIndexSizing;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.BlockIndexConfig;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Review B-7: a kv_exact rule's routing state is sized by its configuration. Every rule used to take ~23 MiB
 * (a 2^16-entry hash memo, a 2^17-entry overlay, a reader for 1024 endpoints x 8192 blocks) whether it had a
 * 1024-block capacity and 2 endpoints or a million blocks and 70. Asserts on the arrays the policy allocated, on the
 * gateway's real index shape ({@link KvIndexSizing#indexConfig}).
 */
class KvExactMemoryTest {
    private final ManualClock clock = new ManualClock();
    private BlockIndex index;

    @AfterEach
    void closeIndex() {
        if (index != null) {
            index.close();
        }
    }

    private Rule rule(long capacityBlocks, int endpoints, int maxPromptTokens) {
        index = new BlockIndex(KvIndexSizing.indexConfig(capacityBlocks));
        String[] eps = new String[endpoints];
        for (int i = 0; i < endpoints; i++) {
            eps[i] = "url: http://127.0.0.1:" + (20000 + i) + "\n        kv_events: tcp://127.0.0.1:" + (30000 + i);
        }
        Rule r = table(config("", RouteFixtures.rule("kv", "    policy: kv_exact\n    block_size: 16\n"
            + "    hash_seed: \"0\"\n    hash_algo: sha256_cbor\n    kv_capacity_blocks: " + capacityBlocks + "\n"
            + "    max_prompt_tokens: " + maxPromptTokens + "\n    kv: {speculative_ttl_ms: 2000}\n", eps)), index, clock)
            .ruleByName("kv");
        return r;
    }

    @Test
    void aSmallRuleTakesWhatItsConfigurationNeeds() {
        Rule r = rule(1024, 2, 4096);
        KvExactPolicy p = (KvExactPolicy) r.policy();
        // 4096 tokens / 16 = 256 blocks looked up, 2 candidates (one long per position), 1024-block memo and overlay.
        long keys = 256 * 8;
        long reader = 4 * 256 * 8 + 256 * 9 + 1024 * 4 + 5 * 8 + 8;
        long memo = 1024 * (2 * 8 + 2 * 32 + 16 * 4);
        long overlay = 2048 * 2 * (8 + 4 + 8);
        long rankPins = 4096 * (8 + 8 + 4); // kv.dp_rank_hint is on for vLLM
        assertEquals(keys + reader + memo + overlay + rankPins, p.heapBytes());
        assertEquals(p.heapBytes(), RulePolicies.kvRoutingHeapBytes(r.config(), index.config()));
        assertTrue(p.heapBytes() < 512 * 1024, "a 1024-block, 2-endpoint rule took " + p.heapBytes() + " bytes");
    }

    @Test
    void aLargeRuleTakesMoreAndTheStatedFormulaMatchesWhatWasAllocated() {
        Rule r = rule(1_000_000, 70, 1 << 20);
        KvExactPolicy p = (KvExactPolicy) r.policy();
        // 8192 blocks (the index's lookup limit), 70 candidates = two longs per position, memo and overlay capped.
        long keys = 8192 * 8;
        long reader = 4 * 8192 * 2 * 8 + 8192 * 9 + 1024 * 4 + 5 * 8 + 8;
        long memo = 65536 * (2 * 8 + 2 * 32 + 16 * 4);
        long overlay = (1 << 18) * 2 * (8 + 4 + 8);
        long rankPins = 4096 * (8 + 8 + 4);
        assertEquals(keys + reader + memo + overlay + rankPins, p.heapBytes());
        assertEquals(p.heapBytes(), RulePolicies.kvRoutingHeapBytes(r.config(), index.config()));
    }

    @Test
    void theSameRuleWithoutAnIndexAllocatesNoIndexState() {
        BlockIndexConfig cfg = KvIndexSizing.indexConfig(1024);
        RuleConfig plain = config("", RouteFixtures.rule("rr", "    policy: round_robin\n", RouteFixtures.endpoints(2)))
            .rules().get(0);
        assertEquals(0, RulePolicies.kvRoutingHeapBytes(plain, cfg));
    }
}
