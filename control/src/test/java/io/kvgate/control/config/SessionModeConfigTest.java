package io.kvgate.control.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@code session.mode} (issue #14 item 6): hash by default, the TTL table on request, each mode's own knobs only. */
class SessionModeConfigTest {
    private static String config(String session) {
        return "rules:\n  - name: r\n    models: [m]\n    engine: vllm\n    policy: session\n" + session
            + "    endpoints: [{url: \"http://127.0.0.1:9001\"}, {url: \"http://127.0.0.1:9002\"}]\n";
    }

    private static String problems(String yaml) {
        ConfigException e = assertThrows(ConfigException.class, () -> GatewayConfig.parse(yaml));
        return String.join("\n", e.problems());
    }

    @Test
    void hashIsTheDefaultWithItsLoadBoundAndTableKeepsItsTtlTable() throws Exception {
        RuleConfig.SessionConfig d = GatewayConfig.parse(config("")).rules().get(0).session();
        assertEquals(RuleConfig.SessionMode.HASH, d.modeKind());
        assertEquals(1.5, d.loadCapFactor());
        assertEquals(2.0, d.loadSlack());
        assertEquals(0.0, d.shareCapFactor(), "the share bound is opt-in");
        RuleConfig.SessionConfig h = GatewayConfig.parse(config("    session: {mode: hash, load_cap_factor: 1.2, load_slack: 0,"
            + " share_cap_factor: 1.3}\n")).rules().get(0).session();
        assertEquals(1.2, h.loadCapFactor());
        assertEquals(0.0, h.loadSlack());
        assertEquals(1.3, h.shareCapFactor());
        assertEquals(1.1, GatewayConfig.parse(config("    session: {share_cap_factor: 1.1}\n")).rules().get(0).session()
            .shareCapFactor());
        RuleConfig.SessionConfig t = GatewayConfig.parse(config("    session: {mode: table, ttl_ms: 5000, max_entries: 10}\n"))
            .rules().get(0).session();
        assertEquals(RuleConfig.SessionMode.TABLE, t.modeKind());
        assertEquals(5000, t.ttlMs());
        assertEquals(10, t.maxEntries());
    }

    @Test
    void eachModeReadsBackWithOnlyItsOwnKeys() throws Exception {
        for (String s : new String[] {"", "    session: {mode: hash, load_cap_factor: 3, load_slack: 1, share_cap_factor: 1.25}\n",
            "    session: {mode: table, ttl_ms: 5000, max_entries: 10}\n"}) {
            GatewayConfig c = GatewayConfig.parse(config(s));
            String yaml = ConfigTree.toYaml(c);
            assertEquals(c, GatewayConfig.parse(yaml), "read back: " + yaml);
            boolean table = s.contains("table");
            @SuppressWarnings("unchecked")
            Map<String, Object> rule = (Map<String, Object>) ((java.util.List<?>) ConfigTree.toTree(c, false).get("rules")).get(0);
            Map<?, ?> session = (Map<?, ?>) rule.get("session");
            assertEquals(table, session.containsKey("ttl_ms") && session.containsKey("max_entries"), yaml);
            assertEquals(!table, session.containsKey("load_cap_factor") && session.containsKey("load_slack")
                && session.containsKey("share_cap_factor"), yaml);
        }
    }

    @Test
    void theOtherModesKnobsAreRefusedNamingTheModeAndTheFix() {
        String ttl = problems(config("    session: {mode: hash, ttl_ms: 5000}\n"));
        assertTrue(ttl.contains("rules[0] (name=r).session.ttl_ms: value 5000 applies to the pin table only (session.mode:"
            + " table); this rule's session.mode is 'hash'"), ttl);
        assertTrue(ttl.contains("set session.mode: table to keep the TTL table, or remove ttl_ms"), ttl);
        String entries = problems(config("    session: {mode: hash, max_entries: 10}\n"));
        assertTrue(entries.contains("session.max_entries: value 10 applies to the pin table only"), entries);
        String cap = problems(config("    session: {mode: table, load_cap_factor: 2}\n"));
        assertTrue(cap.contains("rules[0] (name=r).session.load_cap_factor: value 2.0 bounds the load of hashed sessions"
            + " (session.mode: hash); this rule's session.mode is 'table'"), cap);
        String slack = problems(config("    session: {mode: table, load_slack: 1}\n"));
        assertTrue(slack.contains("session.load_slack: value 1.0 bounds the load of hashed sessions"), slack);
        String share = problems(config("    session: {mode: table, share_cap_factor: 1.2}\n"));
        assertTrue(share.contains("session.share_cap_factor: value 1.2 bounds the load of hashed sessions"), share);
    }

    @Test
    void aShareCapBelowOneIsRefusedNamingTheRule() {
        // Below 1 every endpoint is over its fair share: all of them would shed, which is no bound at all.
        String p = problems(config("    session: {share_cap_factor: 0.5}\n"));
        assertTrue(p.contains("rules[0] (name=r).session.share_cap_factor: value 0.5 must be 0 (off) or at least 1.0"), p);
        String range = problems(config("    session: {share_cap_factor: -1}\n"));
        assertTrue(range.contains("rules[0] (name=r).session.share_cap_factor: value -1 must be in [0.0, 100.0]"), range);
    }

    @Test
    void aConfigurationThatTunesTheTableWithoutNamingAModeKeepsTheTable() throws Exception {
        // Written before session.mode existed (table was the only mode): it must mean what it meant.
        for (String legacy : new String[] {"    session: {ttl_ms: 5000}\n", "    session: {max_entries: 10}\n"}) {
            GatewayConfig c = GatewayConfig.parse(config(legacy));
            assertEquals("table", c.rules().get(0).session().mode(), legacy);
            assertEquals(c, GatewayConfig.parse(ConfigTree.toYaml(c)), "the read-back keeps the table: " + legacy);
        }
        assertEquals(5000, GatewayConfig.parse(config("    session: {ttl_ms: 5000}\n")).rules().get(0).session().ttlMs());
        assertEquals("hash", GatewayConfig.parse(config("    session: {key: user}\n")).rules().get(0).session().mode(),
            "without table knobs the default is hash");
    }

    @Test
    void badValuesNameTheKeyAndTheRule() {
        String mode = problems(config("    session: {mode: ring}\n"));
        assertTrue(mode.contains("rules[0] (name=r).session.mode: value 'ring' must be one of hash|table"), mode);
        String factor = problems(config("    session: {load_cap_factor: 0.5}\n"));
        assertTrue(factor.contains("rules[0] (name=r).session.load_cap_factor: value 0.5 must be in [1.0, 100.0]"), factor);
        String slack = problems(config("    session: {load_slack: -1}\n"));
        assertTrue(slack.contains("rules[0] (name=r).session.load_slack: value -1 must be in [0.0, 1000000.0]"), slack);
    }

    @Test
    void aLivePatchOfTheOtherModesKnobIsRefusedByValidationAndTheBoundIsTunable() throws Exception {
        GatewayConfig c = GatewayConfig.parse(config(""));
        String patched = ConfigTree.patchRule(c, "r", Map.of("session.load_slack", 4.0));
        assertEquals(4.0, GatewayConfig.parse(patched).rules().get(0).session().loadSlack());
        String ttl = ConfigTree.patchRule(c, "r", Map.of("session.ttl_ms", 1000));
        String refused = problems(ttl);
        assertTrue(refused.contains("session.ttl_ms: value 1000 applies to the pin table only"), refused);
        ConfigException mode = assertThrows(ConfigException.class, () -> ConfigTree.patchRule(c, "r", Map.of("session.mode", "table")));
        assertFalse(mode.problems().isEmpty());
        assertTrue(mode.problems().get(0).contains("session.mode: is not a live tunable"), mode.problems().toString());
    }
}
