package io.kvgate.control.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** {@code engine: trtllm|llamacpp}: which policies each accepts, and the llama.cpp/text-prefix keys. */
class EngineConfigTest {
    private static String rule(String engine, String policy, String extra) {
        String endpoints = "pd".equals(policy)
            ? "      - url: http://127.0.0.1:9001\n        role: prefill\n      - url: http://127.0.0.1:9002\n        role: decode\n"
            : "      - url: http://127.0.0.1:9001\n      - url: http://127.0.0.1:9002\n";
        return "rules:\n  - name: r\n    models: [m]\n    engine: " + engine + "\n    policy: " + policy + "\n" + extra
            + "    endpoints:\n" + endpoints;
    }

    private static String problems(String yaml) {
        ConfigException e = assertThrows(ConfigException.class, () -> GatewayConfig.parse(yaml));
        return String.join("\n", e.problems());
    }

    @Test
    void llamacppServesPlainChwblAndSession() throws Exception {
        for (String policy : new String[] {"round_robin", "weighted", "least_outstanding", "chwbl", "session"}) {
            RuleConfig r = GatewayConfig.parse(rule("llamacpp", policy, "")).rules().get(0);
            assertEquals(RuleConfig.Engine.LLAMACPP, r.engineKind(), policy);
            assertTrue(r.engineKind().answers503WhileLoading());
        }
    }

    @Test
    void llamacppKvExactAndPdAreErrorsThatSayWhy() {
        String kv = problems(rule("llamacpp", "kv_exact", ""));
        assertTrue(kv.contains("rules[0] (name=r).policy: value 'kv_exact' engine 'llamacpp' cannot serve it: llama-server publishes"
            + " no KV-cache events (kv_exact routes on them)"), kv);
        String pd = problems(rule("llamacpp", "pd", ""));
        assertTrue(pd.contains("rules[0] (name=r).policy: value 'pd' engine 'llamacpp' cannot serve it: llama-server publishes"
            + " no KV-cache events and has no prefill/decode disaggregation"), pd);
    }

    @Test
    void trtllmServesPlainChwblSessionAndPdButNotKvExactYet() throws Exception {
        for (String policy : new String[] {"round_robin", "chwbl", "session", "pd"}) {
            RuleConfig r = GatewayConfig.parse(rule("trtllm", policy, "")).rules().get(0);
            assertEquals(RuleConfig.Engine.TRTLLM, r.engineKind(), policy);
            assertFalse(r.engineKind().answers503WhileLoading());
        }
        String kv = problems(rule("trtllm", "kv_exact", ""));
        assertTrue(kv.contains("rules[0] (name=r).policy: value 'kv_exact' engine 'trtllm' is not supported yet"), kv);
    }

    @Test
    void unknownEngineNamesTheChoices() {
        String p = problems(rule("tgi", "round_robin", ""));
        assertTrue(p.contains("rules[0] (name=r).engine") && p.contains("vllm|sglang|trtllm|llamacpp"), p);
    }

    @Test
    void chwblPrefixCharsDefaultsAndBounds() throws Exception {
        assertEquals(1024, GatewayConfig.parse(rule("vllm", "chwbl", "")).rules().get(0).chwbl().prefixChars());
        assertEquals(64, GatewayConfig.parse(rule("llamacpp", "chwbl", "    chwbl: {prefix_chars: 64}\n")).rules().get(0)
            .chwbl().prefixChars());
        String p = problems(rule("llamacpp", "chwbl", "    chwbl: {prefix_chars: 0}\n"));
        assertTrue(p.contains("rules[0] (name=r).chwbl.prefix_chars: value 0 must be in [1, 16384]"), p);
    }

    @Test
    void pinSlotOnlyForLlamacppSessionRules() throws Exception {
        RuleConfig r = GatewayConfig.parse(rule("llamacpp", "session", "    session: {pin_slot: true, slots: 8}\n")).rules().get(0);
        assertTrue(r.session().pinSlot());
        assertEquals(8, r.session().slots());
        assertEquals(4, GatewayConfig.parse(rule("llamacpp", "session", "")).rules().get(0).session().slots());
        String vllm = problems(rule("vllm", "session", "    session: {pin_slot: true}\n"));
        assertTrue(vllm.contains("rules[0] (name=r).session.pin_slot: value true pins a llama.cpp slot (id_slot): only valid with"
            + " engine 'llamacpp' (this rule's engine is 'vllm')"), vllm);
        String chwbl = problems(rule("llamacpp", "chwbl", "    session: {pin_slot: true}\n"));
        assertTrue(chwbl.contains("session.pin_slot: value true pins the slot of a session-affine request: only valid under"
            + " policy 'session' (this rule's policy is 'chwbl')"), chwbl);
        String slots = problems(rule("llamacpp", "session", "    session: {pin_slot: true, slots: 0}\n"));
        assertTrue(slots.contains("rules[0] (name=r).session.slots: value 0 must be in [1, 4096]"), slots);
    }

    @Test
    void zmqKvEventsOnlyForEnginesThatPublishThem() {
        String p = problems(rule("llamacpp", "chwbl", "").replace("      - url: http://127.0.0.1:9002\n",
            "      - url: http://127.0.0.1:9002\n        kv_events: tcp://127.0.0.1:5557\n"));
        assertTrue(p.contains("rules[0] (name=r).endpoints (url=http://127.0.0.1:9002): kv_events tcp://127.0.0.1:5557 is only valid"
            + " for engines that publish KV events over ZeroMQ (vllm, sglang); engine 'llamacpp' publishes none"), p);
    }
}
