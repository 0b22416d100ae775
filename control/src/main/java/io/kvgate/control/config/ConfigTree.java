package io.kvgate.control.config;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import org.yaml.snakeyaml.DumperOptions;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.constructor.SafeConstructor;
import org.yaml.snakeyaml.representer.Representer;

/**
 * A {@link GatewayConfig} written back in its own YAML vocabulary, every effective value spelled out (defaults
 * included): what {@code GET /admin/v1/config} returns, what a reload is compared against, what the digest covers and
 * what a {@code PATCH} of tunables edits before the result is parsed and validated like any other configuration.
 *
 * <p>Secrets ({@code admin_token}, {@code api_keys}) are written as {@link GatewayConfig#REDACTED} unless the caller
 * asks for them; secrets that come from files are written as the file names. Stateless and thread-safe.
 */
public final class ConfigTree {
    private static final ObjectMapper CANONICAL = new ObjectMapper().configure(SerializationFeature.ORDER_MAP_ENTRIES_BY_KEYS, true);

    /** Rule keys {@code PATCH /control/v1/rules/{name}} may change live; anything else is refused, naming the key. */
    public static final List<String> RULE_TUNABLES = List.of("fallback", "explain", "max_n", "max_prompt_tokens",
        "max_model_len", "on_context_overflow", "greedy_n", "speculative", "max_logit_bias", "tool_call_parser",
        "kv.mode", "kv.load_cap_factor", "kv.load_slack", "kv.lambda", "kv.min_match_blocks", "kv.cold_readmit_every",
        "kv.speculative_ttl_ms", "kv.watchdog_zero_hit_streak", "kv.warmup_ms",
        "kv.tier_weights.GPU", "kv.tier_weights.CPU_TIER", "kv.tier_weights.DISK", "kv.prefill_token_weight", "kv.dp_rank_hint",
        "chwbl.load_factor", "chwbl.virtual_nodes", "chwbl.prefix_tokens", "chwbl.prefix_blocks", "chwbl.prefix_chars",
        "session.ttl_ms", "session.max_entries", "session.load_cap_factor", "session.load_slack",
        "session.share_cap_factor",
        "pd.prefill_timeout_ms", "pd.decode_timeout_ms");

    private ConfigTree() {}

    /** The configuration as a YAML-vocabulary tree; {@code withSecrets=false} redacts admin_token and api_keys. */
    public static Map<String, Object> toTree(GatewayConfig c, boolean withSecrets) {
        Map<String, Object> t = new LinkedHashMap<>();
        t.put("listen", c.listen().toString());
        t.put("admin_listen", c.adminListen().toString());
        if (c.adminTokenFile() != null) {
            t.put("admin_token_file", c.adminTokenFile());
        } else if (c.adminToken() != null) {
            t.put("admin_token", withSecrets ? c.adminToken() : GatewayConfig.REDACTED);
        }
        t.put("transport", c.transport());
        t.put("io_threads", c.ioThreads());
        if (c.controlSocket() != null) {
            t.put("control_socket", c.controlSocket());
        }
        if (!c.controlAllowedUids().isEmpty()) {
            t.put("control_allowed_uids", new ArrayList<>(c.controlAllowedUids()));
        }
        Map<String, Object> al = new LinkedHashMap<>();
        al.put("max_connections", c.adminLimits().maxConnections());
        al.put("idle_timeout_ms", c.adminLimits().idleTimeoutMs());
        al.put("max_body_bytes", c.adminLimits().maxBodyBytes());
        t.put("admin_limits", al);
        GatewayConfig.Limits l = c.limits();
        Map<String, Object> lm = new LinkedHashMap<>();
        lm.put("max_body_bytes", l.maxBodyBytes());
        lm.put("max_header_bytes", l.maxHeaderBytes());
        lm.put("max_initial_line_bytes", l.maxInitialLineBytes());
        lm.put("request_read_timeout_ms", l.requestReadTimeoutMs());
        lm.put("client_idle_timeout_ms", l.clientIdleTimeoutMs());
        lm.put("max_connections", l.maxConnections());
        lm.put("client_stall_timeout_ms", l.clientStallTimeoutMs());
        if (l.maxConnectionsPerClient() != GatewayConfig.Limits.CONNECTIONS_PER_CLIENT_DEFAULT) {
            lm.put("max_connections_per_client", l.maxConnectionsPerClient()); // unset: it follows max_connections
        }
        lm.put("max_buffered_response_bytes", l.maxBufferedResponseBytes());
        t.put("limits", lm);
        GatewayConfig.Upstream u = c.upstream();
        Map<String, Object> um = new LinkedHashMap<>();
        um.put("connect_timeout_ms", u.connectTimeoutMs());
        um.put("first_byte_timeout_ms", u.firstByteTimeoutMs());
        um.put("idle_timeout_ms", u.idleTimeoutMs());
        um.put("max_connect_attempts", u.maxConnectAttempts());
        um.put("max_idle_per_endpoint", u.maxIdlePerEndpoint());
        um.put("max_error_body_bytes", u.maxErrorBodyBytes());
        t.put("upstream", um);
        GatewayConfig.Health h = c.health();
        Map<String, Object> hm = new LinkedHashMap<>();
        hm.put("path", h.path());
        hm.put("interval_ms", h.intervalMs());
        hm.put("timeout_ms", h.timeoutMs());
        hm.put("healthy_threshold", h.healthyThreshold());
        hm.put("unhealthy_threshold", h.unhealthyThreshold());
        hm.put("breaker_failure_threshold", h.breakerFailureThreshold());
        hm.put("breaker_open_ms", h.breakerOpenMs());
        hm.put("retry_after_seconds", h.retryAfterSeconds());
        t.put("health", hm);
        Map<String, Object> rm = new LinkedHashMap<>();
        rm.put("ring_size", c.router().ringSize());
        rm.put("wait_strategy", c.router().waitStrategy());
        rm.put("thread", c.router().thread());
        t.put("router", rm);
        GatewayConfig.Ingest in = c.ingest();
        Map<String, Object> im = new LinkedHashMap<>();
        im.put("max_frame_bytes", in.maxFrameBytes());
        im.put("receive_buffer_bytes", in.receiveBufferBytes());
        im.put("socket_receive_buffer_bytes", in.socketReceiveBufferBytes());
        im.put("retry_initial_ms", in.retryInitialMs());
        im.put("retry_max_ms", in.retryMaxMs());
        im.put("max_peers_per_bind_socket", in.maxPeersPerBindSocket());
        t.put("ingest", im);
        GatewayConfig.Load ld = c.load();
        Map<String, Object> lm2 = new LinkedHashMap<>();
        lm2.put("enabled", ld.enabled());
        lm2.put("scrape_interval_ms", ld.scrapeIntervalMs());
        lm2.put("stale_ms", ld.staleMs());
        lm2.put("timeout_ms", ld.timeoutMs());
        lm2.put("max_body_bytes", ld.maxBodyBytes());
        lm2.put("path", ld.path());
        lm2.put("peer_decay", ld.peerDecay());
        t.put("load", lm2);
        t.put("shutdown", c.shutdown().tree());
        if (c.apiKeysFile() != null) {
            t.put("api_keys_file", c.apiKeysFile());
        } else if (!c.apiKeys().isEmpty()) {
            List<Object> keys = new ArrayList<>();
            for (String k : c.apiKeys()) {
                keys.add(withSecrets ? k : GatewayConfig.REDACTED);
            }
            t.put("api_keys", keys);
        }
        List<Object> rules = new ArrayList<>();
        for (RuleConfig r : c.rules()) {
            rules.add(rule(r));
        }
        t.put("rules", rules);
        return t;
    }

    /** {@code models}: a plain name as a string, a renamed one as {@code {name, served_as}}. */
    private static List<Object> models(RuleConfig r) {
        List<Object> out = new ArrayList<>();
        for (ModelEntry e : r.modelEntries()) {
            if (e.servedAs() == null && e.adapters().isEmpty()) {
                out.add(e.name());
            } else {
                Map<String, Object> em = new LinkedHashMap<>();
                em.put("name", e.name());
                if (e.servedAs() != null) {
                    em.put("served_as", e.servedAs());
                }
                if (!e.adapters().isEmpty()) {
                    em.put("adapters", e.adapters());
                }
                out.add(em);
            }
        }
        return out;
    }

    private static Map<String, Object> rule(RuleConfig r) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("name", r.name());
        m.put("models", models(r));
        m.put("engine", r.engine());
        m.put("policy", r.policy());
        m.put("fallback", r.fallback());
        if (r.tokenizer() != null) {
            m.put("tokenizer", r.tokenizer());
        }
        if (r.chatTemplate() != null) {
            m.put("chat_template", r.chatTemplate().path());
        }
        m.put("block_size", r.blockSize());
        m.put("hash_seed", r.hashSeed());
        m.put("hash_algo", r.hashAlgo());
        m.put("kv_key_mode", r.kvKeyMode());
        m.put("kv_capacity_blocks", r.kvCapacityBlocks());
        m.put("explain", r.explain());
        m.put("max_n", r.maxN());
        m.put("max_prompt_tokens", r.maxPromptTokens());
        if (r.maxModelLen() > 0) {
            m.put("max_model_len", r.maxModelLen()); // absent: discovered from the endpoints
        }
        m.put("on_context_overflow", r.onContextOverflow());
        m.put("greedy_n", r.greedyN().configValue());
        m.put("speculative", r.speculative());
        m.put("max_logit_bias", r.maxLogitBias());
        if (r.toolCallParser() != null) {
            m.put("tool_call_parser", r.toolCallParser()); // absent: not declared (tool requests pass through)
        }
        RuleConfig.SessionConfig s = r.session();
        Map<String, Object> sm = new LinkedHashMap<>();
        sm.put("key", s.key());
        if (s.header() != null) {
            sm.put("header", s.header());
        }
        if (s.cookie() != null) {
            sm.put("cookie", s.cookie());
        }
        sm.put("mode", s.mode());
        // Each mode's knobs only: the other mode's are refused on read (they would do nothing).
        if (s.modeKind() == RuleConfig.SessionMode.TABLE) {
            sm.put("ttl_ms", s.ttlMs());
            sm.put("max_entries", s.maxEntries());
        } else {
            sm.put("load_cap_factor", s.loadCapFactor());
            sm.put("load_slack", s.loadSlack());
            sm.put("share_cap_factor", s.shareCapFactor());
        }
        sm.put("pin_slot", s.pinSlot());
        sm.put("slots", s.slots());
        m.put("session", sm);
        RuleConfig.ChwblConfig ch = r.chwbl();
        Map<String, Object> cm = new LinkedHashMap<>();
        cm.put("prefix_tokens", ch.prefixTokens());
        cm.put("prefix_blocks", ch.prefixBlocks());
        cm.put("virtual_nodes", ch.virtualNodes());
        cm.put("load_factor", ch.loadFactor());
        cm.put("prefix_chars", ch.prefixChars());
        m.put("chwbl", cm);
        RuleConfig.KvExactConfig k = r.kvExact();
        Map<String, Object> km = new LinkedHashMap<>();
        km.put("mode", k.mode());
        km.put("load_cap_factor", k.loadCapFactor());
        km.put("load_slack", k.loadSlack());
        km.put("lambda", k.lambda());
        km.put("min_match_blocks", k.minMatchBlocks());
        km.put("cold_readmit_every", k.coldReadmitEvery());
        km.put("speculative_ttl_ms", k.speculativeTtlMs());
        km.put("watchdog_zero_hit_streak", k.watchdogZeroHitStreak());
        km.put("parity_probe_at_startup", k.parityProbeAtStartup());
        km.put("warmup_ms", k.warmupMs());
        Map<String, Object> tw = new LinkedHashMap<>();
        tw.put("GPU", k.tierWeights().gpu());
        tw.put("CPU_TIER", k.tierWeights().cpu());
        tw.put("DISK", k.tierWeights().disk());
        km.put("tier_weights", tw);
        km.put("prefill_token_weight", k.prefillTokenWeight());
        km.put("dp_rank_hint", k.dpRankHint());
        m.put("kv", km);
        RuleConfig.PdConfig p = r.pd();
        Map<String, Object> pm = new LinkedHashMap<>();
        pm.put("prefill_timeout_ms", p.prefillTimeoutMs());
        pm.put("decode_timeout_ms", p.decodeTimeoutMs());
        pm.put("prefill_policy", p.prefillPolicy());
        pm.put("session_affinity", p.sessionAffinity());
        pm.put("min_uncached_tokens", p.minUncachedTokens());
        m.put("pd", pm);
        RuleConfig.AdmissionConfig a = r.admission();
        if (a.enabled()) {
            Map<String, Object> am = new LinkedHashMap<>();
            am.put("max_queue", a.maxQueue());
            am.put("max_wait_ms", a.maxWaitMs());
            if (a.maxWaiting() >= 0) {
                am.put("max_waiting", a.maxWaiting());
            }
            if (a.maxKvUsage() >= 0) {
                am.put("max_kv_usage", a.maxKvUsage());
            }
            if (a.maxOutstanding() >= 0) {
                am.put("max_outstanding", a.maxOutstanding());
            }
            if (a.interactiveReserve() > 0) {
                am.put("interactive_reserve", a.interactiveReserve());
            }
            if (!a.apiKeyPriorities().isEmpty()) {
                am.put("api_key_priorities", new LinkedHashMap<>(a.apiKeyPriorities()));
            }
            m.put("admission", am);
        }
        if (r.health().path() != null || r.health().timeoutMs() > 0) {
            Map<String, Object> hm = new LinkedHashMap<>();
            if (r.health().path() != null) {
                hm.put("path", r.health().path());
            }
            if (r.health().timeoutMs() > 0) {
                hm.put("timeout_ms", r.health().timeoutMs());
            }
            m.put("health", hm);
        }
        List<Object> eps = new ArrayList<>();
        for (EndpointConfig e : r.endpoints()) {
            Map<String, Object> em = new LinkedHashMap<>();
            em.put("url", e.url());
            em.put("weight", e.weight());
            if (e.kvEvents() != null) {
                em.put("kv_events", e.kvEvents());
                em.put("kv_events_bind", e.kvEventsBind());
                em.put("kv_topic", e.kvTopic());
                em.put("dp_ranks", e.dpRanks());
                if (e.kvEventsOverHttp()) {
                    em.put("kv_poll_ms", e.kvPollMs());
                }
                if (!e.kvEventsAllow().isEmpty()) {
                    em.put("kv_events_allow", new ArrayList<>(e.kvEventsAllow()));
                }
                if (e.kvEventsCurveServerKey() != null) {
                    em.put("kv_events_curve_server_key", e.kvEventsCurveServerKey());
                    em.put("kv_events_curve_secret_file", e.kvEventsCurveSecretFile());
                }
            }
            if (e.kvReplay() != null) {
                em.put("kv_replay", e.kvReplay());
            }
            if (e.role() != null) {
                em.put("role", e.role());
            }
            if (e.bootstrapPort() > 0) {
                em.put("bootstrap_port", e.bootstrapPort());
            }
            eps.add(em);
        }
        m.put("endpoints", eps);
        return m;
    }

    /** Editable YAML with secrets redacted: PUT back unchanged, it parses to the same configuration. */
    public static String toYaml(GatewayConfig c) {
        return dump(toTree(c, false));
    }

    public static String dump(Object tree) {
        DumperOptions o = new DumperOptions();
        o.setDefaultFlowStyle(DumperOptions.FlowStyle.BLOCK);
        o.setIndent(2);
        o.setIndicatorIndent(0);
        o.setWidth(160);
        return new Yaml(new Representer(o), o).dump(tree);
    }

    /** Loads YAML into a plain tree (maps, lists, scalars), refusing duplicate keys. */
    public static Object load(String yamlText) throws ConfigException {
        try {
            LoaderOptions options = new LoaderOptions();
            options.setAllowDuplicateKeys(false);
            options.setMaxAliasesForCollections(10);
            return new Yaml(new SafeConstructor(options)).load(yamlText);
        } catch (Exception e) {
            throw new ConfigException("configuration is not valid YAML: " + String.valueOf(e.getMessage()).replace('\n', ' '));
        }
    }

    /**
     * SHA-256 (hex) of the effective configuration with secrets redacted, over a canonical form (keys sorted):
     * two files that mean the same thing share a digest. Secret values are not covered (a digest exported on
     * /metrics must not let anyone test guesses of a key); rotating a key bumps the version, not the digest.
     */
    public static String digest(GatewayConfig c) {
        try {
            byte[] canonical = CANONICAL.writeValueAsBytes(toTree(c, false));
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(canonical));
        } catch (com.fasterxml.jackson.core.JsonProcessingException | NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Whether two configurations are the same in every effective value, secrets included (record equality). */
    public static boolean sameEffective(GatewayConfig a, GatewayConfig b) {
        return a.equals(b);
    }

    /**
     * Replaces every {@link GatewayConfig#REDACTED} secret in an uploaded document by the current secret (what
     * {@code GET /admin/v1/config} showed): {@code admin_token}, and {@code api_keys[i]} by the current i-th key.
     */
    public static String keepRedactedSecrets(String yamlText, GatewayConfig current) throws ConfigException {
        if (!yamlText.contains(GatewayConfig.REDACTED)) {
            return yamlText;
        }
        Object root = load(yamlText);
        if (!(root instanceof Map<?, ?> raw)) {
            return yamlText; // the parser reports the shape
        }
        @SuppressWarnings("unchecked")
        Map<String, Object> m = (Map<String, Object>) raw;
        List<String> problems = new ArrayList<>();
        if (GatewayConfig.REDACTED.equals(m.get("admin_token"))) {
            if (current.adminToken() == null || current.adminTokenFile() != null) {
                problems.add("admin_token: value '" + GatewayConfig.REDACTED + "' but the current configuration has no inline admin_token to keep");
            } else {
                m.put("admin_token", current.adminToken());
            }
        }
        if (m.get("api_keys") instanceof List<?> keys) {
            List<Object> out = new ArrayList<>();
            for (int i = 0; i < keys.size(); i++) {
                Object k = keys.get(i);
                if (GatewayConfig.REDACTED.equals(k)) {
                    if (current.apiKeysFile() != null || i >= current.apiKeys().size()) {
                        problems.add("api_keys[" + i + "]: value '" + GatewayConfig.REDACTED
                            + "' but the current configuration has no inline key at that position to keep");
                        continue;
                    }
                    out.add(current.apiKeys().get(i));
                } else {
                    out.add(k);
                }
            }
            m.put("api_keys", out);
        }
        if (!problems.isEmpty()) {
            throw new ConfigException(problems);
        }
        return dump(m);
    }

    /**
     * The current configuration with {@code changes} (tunable key path → value) applied to rule {@code ruleName},
     * as YAML (secrets included, for parsing). Problems name each refused key.
     */
    public static String patchRule(GatewayConfig current, String ruleName, Map<String, Object> changes) throws ConfigException {
        Map<String, Object> tree = toTree(current, true);
        Map<String, Object> rule = null;
        for (Object o : (List<?>) tree.get("rules")) {
            @SuppressWarnings("unchecked")
            Map<String, Object> r = (Map<String, Object>) o;
            if (ruleName.equals(r.get("name"))) {
                rule = r;
            }
        }
        if (rule == null) {
            throw new ConfigException("rule '" + ruleName + "' does not exist (rules: "
                + String.join(", ", current.rules().stream().map(RuleConfig::name).toList()) + ")");
        }
        List<String> problems = new ArrayList<>();
        for (Map.Entry<String, Object> c : changes.entrySet()) {
            String key = c.getKey();
            if (!RULE_TUNABLES.contains(key)) {
                String why = key.equals("kv_capacity_blocks") ? "is restart-only (the index is sized at start-up)"
                    : isRuleKey(rule, key) ? "is not a live tunable (change it with a full configuration: PUT /admin/v1/config)"
                    : "is not a rule key";
                problems.add("rules (name=" + ruleName + ")." + key + ": " + why + "; tunables: " + String.join(", ", RULE_TUNABLES));
                continue;
            }
            Map<String, Object> at = rule;
            String[] parts = key.split("\\.");
            for (int i = 0; i < parts.length - 1; i++) {
                @SuppressWarnings("unchecked")
                Map<String, Object> child = (Map<String, Object>) at.get(parts[i]);
                at = child;
            }
            at.put(parts[parts.length - 1], c.getValue());
        }
        if (!problems.isEmpty()) {
            throw new ConfigException(problems);
        }
        return dump(tree);
    }

    private static boolean isRuleKey(Map<String, Object> rule, String key) {
        Object at = rule;
        for (String part : key.split("\\.")) {
            if (!(at instanceof Map<?, ?> m) || !m.containsKey(part)) {
                return Set.of("tokenizer", "endpoints").contains(key);
            }
            at = m.get(part);
        }
        return true;
    }

    /** The current configuration with endpoint {@code key} (host:port) given {@code weight} in every rule, as YAML. */
    public static String withEndpointWeight(GatewayConfig current, String key, int weight) throws ConfigException {
        Map<String, Object> tree = toTree(current, true);
        boolean found = false;
        for (int i = 0; i < current.rules().size(); i++) {
            List<EndpointConfig> eps = current.rules().get(i).endpoints();
            @SuppressWarnings("unchecked")
            List<Map<String, Object>> raw = (List<Map<String, Object>>) ((Map<String, Object>) ((List<?>) tree.get("rules")).get(i)).get("endpoints");
            for (int j = 0; j < eps.size(); j++) {
                if (eps.get(j).key().equals(key)) {
                    raw.get(j).put("weight", weight);
                    found = true;
                }
            }
        }
        if (!found) {
            throw new ConfigException("endpoint '" + key + "' is not in the configuration");
        }
        return dump(tree);
    }

    /**
     * What changes from {@code a} to {@code b}, one line per key path ({@code path: old -> new}), secrets redacted.
     * Rules and endpoints are matched by name and url, so reordering is not a change.
     */
    public static List<String> diff(GatewayConfig a, GatewayConfig b) {
        Map<String, Object> fa = new LinkedHashMap<>();
        Map<String, Object> fb = new LinkedHashMap<>();
        flatten("", toTree(a, false), fa);
        flatten("", toTree(b, false), fb);
        // A rotated secret is a change even though both sides print as redacted.
        if (!Objects.equals(a.adminToken(), b.adminToken()) && Objects.equals(a.adminTokenFile(), b.adminTokenFile())) {
            fb.put("admin_token", "<redacted, changed>");
        }
        if (!a.apiKeys().equals(b.apiKeys()) && Objects.equals(a.apiKeysFile(), b.apiKeysFile())) {
            fb.put("api_keys", "<redacted, changed>");
            fa.put("api_keys", "<redacted>");
            fa.keySet().removeIf(k -> k.startsWith("api_keys["));
            fb.keySet().removeIf(k -> k.startsWith("api_keys["));
        }
        // A chat_template file whose content changed under the same path: the tree shows the path only.
        for (RuleConfig rb : b.rules()) {
            RuleConfig ra = a.rules().stream().filter(r -> r.name().equals(rb.name())).findFirst().orElse(null);
            if (ra != null && ra.chatTemplate() != null && rb.chatTemplate() != null
                && ra.chatTemplate().path().equals(rb.chatTemplate().path())
                && !Objects.equals(ra.chatTemplate().source(), rb.chatTemplate().source())) {
                fa.put("rules[name=" + rb.name() + "].chat_template.sha256", ra.chatTemplate().sha256());
                fb.put("rules[name=" + rb.name() + "].chat_template.sha256", rb.chatTemplate().sha256());
            }
        }
        List<String> out = new ArrayList<>();
        java.util.Set<String> reported = new java.util.HashSet<>();
        for (Map.Entry<String, Object> e : fa.entrySet()) {
            Object nb = fb.get(e.getKey());
            if (!fb.containsKey(e.getKey())) {
                String gone = wholeElementMissing(e.getKey(), fb);
                if (gone == null) {
                    out.add(e.getKey() + ": " + e.getValue() + " -> (removed)");
                } else if (reported.add(gone)) {
                    out.add(gone + ": removed");
                }
            } else if (!Objects.equals(e.getValue(), nb)) {
                out.add(e.getKey() + ": " + e.getValue() + " -> " + nb);
            }
        }
        for (Map.Entry<String, Object> e : fb.entrySet()) {
            if (!fa.containsKey(e.getKey())) {
                String added = wholeElementMissing(e.getKey(), fa);
                if (added == null) {
                    out.add(e.getKey() + ": (absent) -> " + e.getValue());
                } else if (reported.add(added)) {
                    out.add(added + ": added");
                }
            }
        }
        return out;
    }

    /**
     * The outermost rule or endpoint ({@code ...[name=x]} / {@code ...[url=y]}) holding {@code key} that has no key
     * at all on the other side, or null: a whole added or removed element is one line of the diff, not one per field.
     */
    private static String wholeElementMissing(String key, Map<String, Object> other) {
        for (int i = key.indexOf("]."); i >= 0; i = key.indexOf("].", i + 1)) {
            String element = key.substring(0, i + 1);
            String fields = element + ".";
            if (other.keySet().stream().noneMatch(k -> k.startsWith(fields))) {
                return element;
            }
        }
        return null;
    }

    private static void flatten(String prefix, Object v, Map<String, Object> out) {
        if (v instanceof Map<?, ?> m) {
            for (Map.Entry<?, ?> e : m.entrySet()) {
                flatten(prefix.isEmpty() ? String.valueOf(e.getKey()) : prefix + "." + e.getKey(), e.getValue(), out);
            }
        } else if (v instanceof List<?> l && !l.isEmpty() && l.get(0) instanceof Map<?, ?>) {
            for (int i = 0; i < l.size(); i++) {
                Map<?, ?> m = (Map<?, ?>) l.get(i);
                String id = m.containsKey("name") ? "name=" + m.get("name") : m.containsKey("url") ? "url=" + m.get("url") : String.valueOf(i);
                flatten(prefix + "[" + id + "]", m, out);
            }
        } else {
            out.put(prefix, v instanceof List<?> l ? String.valueOf(l) : v);
        }
    }

    /** UTF-8 bytes, for callers that hash or send a dump. */
    public static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
