package io.kvgate.control.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The declarations ({@link ConfigSchema}) and the parser cannot drift apart: every key the parser reads is declared,
 * every declared key is read, set to a non-default value it reads back as set, an unknown key is refused in every
 * section, and the lists derived from the declarations (tunables, restart-only keys, vocabularies) are what the
 * rest of the gateway has always used.
 */
class ConfigSchemaTest {
    @TempDir
    Path dir;

    /** The two documents that together set every key: the inline and the file form of each secret. */
    private List<String> documents() throws Exception {
        String a = ConfigTreeCoverageTest.full(dir);
        Files.writeString(dir.resolve("token"), "token-from-file-0123456789\n");
        String b = a.replace("api_keys_file: keys", "api_keys: [k1, k2]")
            .replace("admin_token: admin-token-0123456789", "admin_token_file: token");
        return List.of(a, b);
    }

    /** A labelled node path ({@code rules[0] (name=r).endpoints[1] (url=http://h:1).weight}) as declared. */
    private static String declaredForm(String path) {
        return path.replaceAll("\\[\\d+]( \\((name|url)=[^)]*\\))?", "[]");
    }

    private static Set<String> declaredPaths() {
        Set<String> out = new TreeSet<>();
        for (ConfigKey<?, ?> k : ConfigSchema.keys()) {
            out.add(k.path());
        }
        return out;
    }

    /** Section names the parser asks for (a child mapping or a list of them): not keys of their own. */
    private static Set<String> containerPaths() {
        Set<String> out = new TreeSet<>();
        for (ConfigSection<?> s : ConfigSchema.SECTIONS) {
            if (!s.path().isEmpty()) {
                out.add(s.path().endsWith("[]") ? s.path().substring(0, s.path().length() - 2) : s.path());
            }
        }
        return out;
    }

    @SuppressWarnings("unchecked")
    private GatewayConfig read(String yaml, Set<String> asked) throws ConfigException {
        List<String> problems = new ArrayList<>();
        ConfigNode root = new ConfigNode("", (Map<String, Object>) ConfigTree.load(yaml), problems, name -> null);
        GatewayConfig c = GatewayConfig.read(root, dir);
        if (!problems.isEmpty()) {
            throw new ConfigException(problems);
        }
        for (String p : root.asked()) {
            asked.add(declaredForm(p));
        }
        return c;
    }

    @Test
    void everyKeyTheParserReadsIsDeclaredAndEveryDeclaredKeyIsRead() throws Exception {
        Set<String> asked = new TreeSet<>();
        for (String doc : documents()) {
            read(doc, asked);
        }
        Set<String> containers = containerPaths();
        containers.removeAll(declaredPaths()); // models: a key whose entries may be mappings of their own
        asked.removeAll(containers);
        Set<String> undeclared = new TreeSet<>(asked);
        undeclared.removeAll(declaredPaths());
        assertEquals(Set.of(), undeclared, "keys the parser reads that no *Keys class declares (declare them: ConfigSchema)");
        Set<String> unread = new TreeSet<>(declaredPaths());
        unread.removeAll(asked);
        assertEquals(Set.of(), unread, "declared keys the parser never reads");
    }

    @Test
    void everyDeclaredKeySetToANonDefaultValueReadsBackAsSet() throws Exception {
        Set<String> setNonDefault = new TreeSet<>();
        List<String> mismatches = new ArrayList<>();
        for (String doc : documents()) {
            GatewayConfig c = read(doc, new TreeSet<>());
            Map<String, Object> written = new LinkedHashMap<>();
            flatten("", ConfigTree.load(doc), written);
            Map<String, Object> readBack = new LinkedHashMap<>();
            flatten("", ConfigTree.toTree(c, true), readBack);
            for (Map.Entry<String, Object> e : written.entrySet()) {
                ConfigKey<?, ?> key = ConfigSchema.key(declaredForm(e.getKey()));
                if (key == null) {
                    continue; // a section, or a list as a whole
                }
                Object back = readBack.get(e.getKey());
                if (!same(e.getValue(), back) && !resolvedPath(e.getValue(), back)) {
                    mismatches.add(e.getKey() + ": set " + e.getValue() + ", read back " + back);
                }
                if (!same(e.getValue(), key.defaultValue())) {
                    setNonDefault.add(key.path());
                }
            }
        }
        assertEquals(List.of(), mismatches);
        Set<String> notExercised = new TreeSet<>(declaredPaths());
        notExercised.removeAll(setNonDefault);
        assertEquals(Set.of(), notExercised,
            "declared keys the test documents do not set to a non-default value (add them to ConfigTreeCoverageTest.full)");
    }

    /** A relative path the parser resolved against the configuration's directory. */
    private boolean resolvedPath(Object written, Object back) {
        return written instanceof String w && back instanceof String b && b.equals(dir.resolve(w).normalize().toString());
    }

    private static boolean same(Object a, Object b) {
        if (a instanceof Number x && b instanceof Number y) {
            return x.doubleValue() == y.doubleValue();
        }
        return java.util.Objects.equals(a, b);
    }

    /**
     * Values by concrete path: every value, and inside every mapping (a mapping-valued key such as
     * {@code api_key_priorities} is a value too) and every list item that is a mapping.
     */
    private static void flatten(String prefix, Object v, Map<String, Object> out) {
        if (!prefix.isEmpty()) {
            out.put(prefix, v);
        }
        if (v instanceof Map<?, ?> m) {
            for (Map.Entry<?, ?> e : m.entrySet()) {
                flatten(prefix.isEmpty() ? String.valueOf(e.getKey()) : prefix + "." + e.getKey(), e.getValue(), out);
            }
            return;
        }
        if (v instanceof List<?> l) {
            for (int i = 0; i < l.size(); i++) {
                if (l.get(i) instanceof Map<?, ?>) {
                    flatten(prefix + "[" + i + "]", l.get(i), out);
                }
            }
        }
    }

    @Test
    @SuppressWarnings("unchecked")
    void anUnknownKeyIsRefusedInEverySection() throws Exception {
        for (ConfigSection<?> s : ConfigSchema.SECTIONS) {
            Map<String, Object> tree = (Map<String, Object>) ConfigTree.load(documents().get(0));
            Map<String, Object> at = tree;
            StringBuilder where = new StringBuilder();
            for (String part : s.path().isEmpty() ? new String[0] : s.path().split("\\.")) {
                boolean list = part.endsWith("[]");
                String name = list ? part.substring(0, part.length() - 2) : part;
                Object next = at.computeIfAbsent(name, k -> new LinkedHashMap<String, Object>());
                where.append(where.isEmpty() ? "" : ".").append(name);
                if (list) {
                    List<Object> items = (List<Object>) next;
                    int i = 0;
                    while (!(items.get(i) instanceof Map<?, ?>)) {
                        i++; // a plain model name: the first entry written as a mapping
                    }
                    next = items.get(i);
                    where.append("[").append(i).append("]");
                }
                at = (Map<String, Object>) next;
            }
            at.put("zz_unknown", 1);
            ConfigException e = assertThrows(ConfigException.class, () -> read(ConfigTree.dump(tree), new TreeSet<>()), s.path());
            String expected = (s.path().isEmpty() ? "" : s.path() + ".") + "zz_unknown: unknown key";
            assertTrue(e.problems().stream().anyMatch(p -> declaredForm(p).startsWith(expected)), s + ": " + e.problems());
        }
    }

    @Test
    void derivedListsAreTheOnesTheGatewayUsed() {
        assertEquals(List.of("fallback", "explain", "max_n", "max_prompt_tokens", "max_model_len", "on_context_overflow",
            "greedy_n", "speculative", "max_logit_bias", "tool_call_parser", "session.ttl_ms", "session.max_entries",
            "session.load_cap_factor", "session.load_slack", "session.share_cap_factor", "chwbl.prefix_tokens",
            "chwbl.prefix_blocks", "chwbl.virtual_nodes", "chwbl.load_factor", "chwbl.prefix_chars",
            "chwbl.skip_common_prefix", "kv.mode",
            "kv.load_cap_factor", "kv.load_slack", "kv.lambda", "kv.min_match_blocks", "kv.cold_readmit_every",
            "kv.speculative_ttl_ms", "kv.watchdog_zero_hit_streak", "kv.warmup_ms", "kv.prefill_token_weight",
            "kv.dp_rank_hint", "kv.min_match_fraction", "kv.spread", "kv.recent_work_window_ms", "kv.tier_weights.GPU", "kv.tier_weights.CPU_TIER", "kv.tier_weights.DISK",
            "pd.prefill_timeout_ms", "pd.decode_timeout_ms"), ConfigTree.RULE_TUNABLES);
        assertEquals(List.of("listen", "admin_listen", "epp_listen", "transport", "io_threads", "control_socket", "router.ring_size",
            "router.wait_strategy", "router.thread", "ingest", "epp_tls", "tracing", "logging", "rules[*].kv_capacity_blocks (the index is sized at start-up)"),
            GatewayConfig.RESTART_ONLY);
        // Vocabularies declared by enum are the lists the rest of the gateway validates and switches on.
        assertEquals(GatewayConfig.TRANSPORTS, GatewayKeys.TRANSPORT.values());
        assertEquals(RuleConfig.ENGINES, RuleKeys.ENGINE.values());
        assertEquals(RuleConfig.POLICIES, RuleKeys.POLICY.values());
        assertEquals(RuleConfig.FALLBACKS, RuleKeys.FALLBACK.values());
        assertEquals(RuleConfig.SESSION_MODES, SessionKeys.MODE.values());
        assertEquals(RuleConfig.GreedyN.class, RuleKeys.GREEDY_N.enumType());
    }

    @Test
    void secretsAreRedactedAndOnlySecrets() throws Exception {
        GatewayConfig c = GatewayConfig.parse(documents().get(1).replace("admin_token_file: token",
            "admin_token: admin-token-0123456789"), dir, n -> null);
        Map<String, Object> shown = ConfigTree.toTree(c, false);
        assertEquals(GatewayConfig.REDACTED, shown.get("admin_token"));
        assertEquals(List.of(GatewayConfig.REDACTED, GatewayConfig.REDACTED), shown.get("api_keys"));
        Set<String> secrets = new TreeSet<>();
        for (ConfigKey<?, ?> k : ConfigSchema.keys()) {
            if (k.isSecret()) {
                secrets.add(k.path());
            }
        }
        assertEquals(Set.of("admin_token", "api_keys"), secrets);
        Map<String, Object> withSecrets = ConfigTree.toTree(c, true);
        withSecrets.remove("admin_token");
        withSecrets.remove("api_keys");
        shown.remove("admin_token");
        shown.remove("api_keys");
        assertEquals(withSecrets, shown, "only secrets differ between the redacted and the full read-back");
    }

    @Test
    void aPatchOfARestartOnlyKeySaysWhy() throws Exception {
        GatewayConfig c = GatewayConfig.parse(documents().get(0), dir, n -> null);
        ConfigException e = assertThrows(ConfigException.class,
            () -> ConfigTree.patchRule(c, "r", Map.of("kv_capacity_blocks", 4096)));
        assertTrue(e.problems().get(0).contains("rules (name=r).kv_capacity_blocks: is restart-only (the index is sized at"
            + " start-up)"), e.problems().toString());
        assertNotNull(ConfigSchema.key("rules[].kv_capacity_blocks"));
    }
}
