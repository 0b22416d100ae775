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
    public static final List<String> RULE_TUNABLES = ConfigSchema.ruleTunables();

    private ConfigTree() {}

    /**
     * The configuration as a YAML-vocabulary tree, written key by key from the declarations ({@link ConfigSchema});
     * {@code withSecrets=false} redacts the secret keys (admin_token, api_keys).
     */
    public static Map<String, Object> toTree(GatewayConfig c, boolean withSecrets) {
        return GatewayKeys.SECTION.write(c, withSecrets);
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
                ConfigKey<?, ?> declared = ConfigSchema.key(ConfigSection.RULE_PREFIX + key);
                String why = declared != null && declared.scope() == Scope.RESTART ? "is restart-only"
                    + (declared.restartReason() == null ? "" : " (" + declared.restartReason() + ")")
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
