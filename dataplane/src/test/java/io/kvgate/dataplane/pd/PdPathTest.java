package io.kvgate.dataplane.pd;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.EndpointConfig;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.RuleHasher;
import io.kvgate.index.block.BlockIndex;
import org.junit.jupiter.api.Test;

/** Conditional P/D's decision: what the decode endpoint holds (KV index) against pd.min_uncached_tokens. */
class PdPathTest {
    @Test
    void localWhenTheDecodeEndpointHoldsThePromptOrTheUncachedPartIsShort() {
        // 16-token blocks, min_uncached_tokens 256
        assertTrue(PdPath.local(100, 0, 16, 256), "a short prompt is computed where it is decoded");
        assertFalse(PdPath.local(256, 0, 16, 256), "256 uncached tokens are not below 256");
        assertTrue(PdPath.local(1000, 800, 16, 256), "200 uncached tokens");
        assertTrue(PdPath.local(1000, 992, 16, 0), "every full block held: local even with min 0");
        assertFalse(PdPath.local(1000, 976, 16, 0), "one full block missing, min 0: split");
        assertFalse(PdPath.local(10, 0, 16, 0), "no full block: nothing to hold, min 0: split");
        assertFalse(PdPath.local(5000, 0, 16, 256));
    }

    @Test
    void cachedTokensComeFromTheIndexForDecodeEndpointsThatPublishEvents() throws Exception {
        RuleConfig rule = GatewayConfig.parse("""
            rules:
              - name: r
                models: [m]
                engine: vllm
                policy: pd
                block_size: 4
                endpoints:
                  - {url: "http://127.0.0.1:9001", role: prefill}
                  - {url: "http://127.0.0.1:9002", role: decode, kv_events: "tcp://127.0.0.1:5557"}
                  - {url: "http://127.0.0.1:9003", role: decode}
            """).rules().get(0);
        EndpointConfig withEvents = rule.endpoints().get(1);
        EndpointConfig without = rule.endpoints().get(2);
        int[] tokens = new int[14];
        for (int i = 0; i < tokens.length; i++) {
            tokens[i] = 100 + i;
        }
        long[] keys = new long[3];
        assertEquals(3, new RuleHasher(rule, 0).hash(tokens, null, keys));
        try (BlockIndex index = new BlockIndex(1024, 8)) {
            index.stored(2, 0, keys[0]);
            index.stored(2, 0, keys[1]);
            index.stored(3, 0, keys[0]);
            PdPath path = new PdPath(() -> index);
            assertEquals(8, path.cachedTokens(rule, new EndpointState("a", 2, withEvents), tokens, null));
            assertEquals(0, path.cachedTokens(rule, new EndpointState("b", 3, without), tokens, null),
                "an endpoint without kv_events is not looked up");
            index.stored(2, 0, keys[2]);
            assertEquals(12, path.cachedTokens(rule, new EndpointState("a", 2, withEvents), tokens, null));
            assertEquals(0, new PdPath(() -> null).cachedTokens(rule, new EndpointState("a", 2, withEvents), tokens, null));
        }
    }
}
