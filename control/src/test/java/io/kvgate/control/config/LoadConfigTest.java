package io.kvgate.control.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The {@code load} section (engine-reported load) and {@code kv.prefill_token_weight}: defaults and refusals. */
class LoadConfigTest {
    private static final String RULES = """
        rules:
          - name: chat
            models: [m]
            policy: kv_exact
            endpoints:
              - url: http://127.0.0.1:9001
        """;

    private static String problems(String yaml) {
        ConfigException e = assertThrows(ConfigException.class, () -> GatewayConfig.parse(yaml));
        return String.join("\n", e.problems());
    }

    @Test
    void defaults() throws Exception {
        GatewayConfig c = GatewayConfig.parse(RULES);
        assertEquals(GatewayConfig.Load.DEFAULTS, c.load());
        assertTrue(c.load().enabled(), "on by default: an engine without metrics just stays unknown");
        assertEquals(250, c.load().scrapeIntervalMs());
        assertEquals(2_000, c.load().staleMs());
        assertNull(c.load().path(), "unset: each engine's own page");
        assertEquals("/prometheus/metrics", c.load().pathFor("/prometheus/metrics"));
        assertEquals("lifetime", c.load().peerDecay(), "other gateways' part of a reading ages over the request lifetime");
        assertTrue(c.load().decaysPeers());
        assertEquals(false, c.load().ttftAware(), "TTFT-aware load is opt-in: it changes how load-aware rules route");
        assertEquals(500, c.load().ttftRecoverMs());
        assertEquals(0.0, c.rules().get(0).kvExact().prefillTokenWeight());
    }

    @Test
    void settingsAndRefusalsNameTheKey() throws Exception {
        GatewayConfig c = GatewayConfig.parse("load: {enabled: false, scrape_interval_ms: 100, stale_ms: 500, timeout_ms: 50,"
            + " max_body_bytes: 65536, path: /stats}\n" + RULES.replace("policy: kv_exact", "policy: kv_exact\n    kv: {prefill_token_weight: 0.002}"));
        assertEquals(new GatewayConfig.Load(false, 100, 500, 50, 65536, "/stats"), c.load());
        assertEquals(0.002, c.rules().get(0).kvExact().prefillTokenWeight());

        String p = problems("load: {scrape_interval_ms: 5, stale_ms: 1000, path: metrics, max_body_bytes: 10, colour: red}\n" + RULES);
        assertTrue(p.contains("load.scrape_interval_ms: value 5 must be in [10, 600000]"), p);
        assertTrue(p.contains("load.path: value 'metrics' must start with '/'"), p);
        assertTrue(p.contains("load.max_body_bytes: value 10 must be in [1024, 1073741824]"), p);
        assertTrue(p.contains("load.colour: unknown key"), p);
        assertEquals("none", GatewayConfig.parse("load: {peer_decay: none}\n" + RULES).load().peerDecay());
        assertEquals(false, GatewayConfig.parse("load: {peer_decay: none}\n" + RULES).load().decaysPeers());
        p = problems("load: {peer_decay: age}\n" + RULES);
        assertTrue(p.contains("load.peer_decay") && p.contains("age") && p.contains("lifetime"), p);
        p = problems("load: {scrape_interval_ms: 5000, stale_ms: 1000}\n" + RULES);
        assertTrue(p.contains("load.stale_ms: value 1000 must be >= load.scrape_interval_ms (5000)"), p);
        GatewayConfig.Load ttft = GatewayConfig.parse("load: {ttft_aware: true, ttft_recover_ms: 2000}\n" + RULES).load();
        assertTrue(ttft.ttftAware());
        assertEquals(2000, ttft.ttftRecoverMs());
        p = problems("load: {ttft_aware: maybe, ttft_recover_ms: 1}\n" + RULES);
        assertTrue(p.contains("load.ttft_aware"), p);
        assertTrue(p.contains("load.ttft_recover_ms: value 1 must be in [10, 600000]"), p);
        p = problems(RULES.replace("policy: kv_exact", "policy: kv_exact\n    kv: {prefill_token_weight: 2}"));
        assertTrue(p.contains("kv.prefill_token_weight: value 2 must be in [0.0, 1.0]"), p);
    }

    @Test
    void dpRankHintsWhereTheEngineTakesThem() throws Exception {
        assertTrue(GatewayConfig.parse(RULES).rules().get(0).kvExact().dpRankHint(), "vLLM reads X-data-parallel-rank");
        assertTrue(GatewayConfig.parse(RULES.replace("policy: kv_exact", "policy: kv_exact\n    engine: sglang"))
            .rules().get(0).kvExact().dpRankHint(), "SGLang too");
        String trt = RULES.replace("policy: kv_exact", "policy: round_robin\n    engine: trtllm");
        assertEquals(false, GatewayConfig.parse(trt).rules().get(0).kvExact().dpRankHint(), "TensorRT-LLM takes no hint");
        String p = problems(trt.replace("policy: round_robin", "policy: round_robin\n    kv: {dp_rank_hint: true}"));
        assertTrue(p.contains("kv.dp_rank_hint: value true engine 'trtllm' takes no DP rank hint"), p);
        assertEquals(false, GatewayConfig.parse(RULES.replace("policy: kv_exact", "policy: kv_exact\n    kv: {dp_rank_hint: false}"))
            .rules().get(0).kvExact().dpRankHint());
    }

    @Test
    void theLoadSectionIsReloadableAndTheWeightATunable() throws Exception {
        GatewayConfig a = GatewayConfig.parse(RULES);
        GatewayConfig b = GatewayConfig.parse("load: {scrape_interval_ms: 1000, peer_decay: none}\n" + RULES);
        assertEquals(java.util.List.of(), a.restartOnlyChanges(b));
        assertTrue(ConfigTree.RULE_TUNABLES.contains("kv.prefill_token_weight"));
        assertTrue(ConfigTree.RULE_TUNABLES.contains("kv.dp_rank_hint"));
    }
}
