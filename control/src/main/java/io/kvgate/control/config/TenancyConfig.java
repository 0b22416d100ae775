package io.kvgate.control.config;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * Tenancy (top-level keys {@code tenants}, {@code rate_limit_store}, {@code cache_salt} and {@code replicas}): who the
 * callers are, what each may use, where their counters live, how many replicas share their limits and the secret their
 * cache salts derive from (see
 * [tenants](tenants.md)). Immutable; files are read when parsed (a reload reads them again, so a changed key file or
 * secret takes effect with the reload that swaps the tenants).
 *
 * @param tenants        the configured tenants, in document order; the flat {@code api_keys}, if any, are one more,
 *                       anonymous tenant without limits beside them
 * @param rateLimitStore where the limits' counters live when they must hold across replicas, or null (each replica
 *                       then enforces {@code limit / replicas}, as it does when the store fails with {@code local})
 * @param cacheSalt      the secret per-tenant cache salts derive from, or null (no gateway-owned salts)
 * @param replicas       gateway replicas sharing the fleet: without a store each enforces its share of every limit
 */
public record TenancyConfig(List<Tenant> tenants, RateLimitStore rateLimitStore, CacheSalt cacheSalt, int replicas) {
    public static final TenancyConfig NONE = new TenancyConfig(List.of(), null, null, 1);

    /** {@code rate_limit_store.on_failure}: what a request meets when the store does not answer in time. */
    public static final List<String> ON_FAILURE = List.of("local", "deny", "allow");
    /** {@code redis://host:port[/db]}: the host a name or IPv4 address, or an IPv6 address in brackets. */
    private static final Pattern REDIS_URL = Pattern.compile("redis://([A-Za-z0-9.-]+|\\[[0-9A-Fa-f:.]+\\]):(\\d{1,5})(/\\d{1,2})?");

    /** {@code tenants[].client_cache_salt}: what a client's own {@code cache_salt} meets. */
    public static final List<String> CLIENT_SALT = List.of("drop", "refuse");
    /** A tenant name: it is a metric label and a cache-salt input, so a small vocabulary. */
    private static final Pattern NAME = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._-]{0,63}");
    private static final Pattern SHA256_HEX = Pattern.compile("[0-9a-fA-F]{64}");

    /**
     * One tenant.
     *
     * @param name             unique; the metrics' {@code tenant} label, the access log's {@code tenant}, the salt input
     * @param apiKeySha256     lower-case hex SHA-256 digests of the tenant's API keys (the keys are never stored)
     * @param apiKeysFile      the file those digests were read from (one per line), or null when written inline
     * @param models           the models the tenant may use (empty: every model); others are 404 {@code model_not_found}
     * @param priority         the tenant's admission class ({@code interactive|standard|batch}), or null: standard
     * @param priorityHeader   whether the tenant's clients may choose their class with {@code X-Kvgate-Priority}
     * @param limits           the tenant's limits (0: none)
     * @param sharedPrefixSalt whether the tenant's requests carry the shared salt instead of its own (public prompts)
     * @param clientCacheSalt  what a client's own {@code cache_salt} meets: {@code drop} (replaced) or {@code refuse} (400)
     */
    public record Tenant(String name, List<String> apiKeySha256, String apiKeysFile, List<String> models, String priority,
                         boolean priorityHeader, Limits limits, boolean sharedPrefixSalt, String clientCacheSalt) {}

    /** A tenant's limits; 0 is no limit. */
    public record Limits(long requestsPerMinute, long tokensPerMinute, long maxConcurrent, long tokensPerDay) {
        public static final Limits NONE = new Limits(0, 0, 0, 0);

        public boolean any() {
            return requestsPerMinute > 0 || tokensPerMinute > 0 || maxConcurrent > 0 || tokensPerDay > 0;
        }
    }

    /**
     * @param url       {@code redis://host:port[/db]}
     * @param onFailure {@code local} (this replica's share, as without a store), {@code deny} (503) or {@code allow}
     * @param timeoutMs how long a request waits for the store (the gateway's own timer) before {@code on_failure} decides
     */
    public record RateLimitStore(String url, String onFailure, long timeoutMs) {}

    /**
     * @param secretFile the file holding the secret (absolute path)
     * @param secret     its contents, stripped (never written back: the read-back names the file)
     */
    public record CacheSalt(String secretFile, String secret) {
        @Override
        public String toString() {
            return "CacheSalt[secretFile=" + secretFile + "]";
        }
    }

    /** Whether any tenant has a limit (then requests are counted and reserved). */
    public boolean anyLimits() {
        for (Tenant t : tenants) {
            if (t.limits().any()) {
                return true;
            }
        }
        return false;
    }

    /** Reads the tenancy keys of the root node; relative files resolve against {@code baseDir}. */
    static TenancyConfig read(ConfigNode root, Path baseDir, List<String> flatApiKeys) {
        List<Tenant> tenants = new ArrayList<>();
        Set<String> names = new HashSet<>();
        Map<String, String> digestOwner = new HashMap<>();
        for (ConfigNode t : root.children(TenancyKeys.TENANTS.name())) {
            Tenant tenant = readTenant(t, baseDir);
            if (tenant.name() != null && !names.add(tenant.name())) {
                t.problem("name", tenant.name(), "is already the name of another tenant (names must be unique)");
            }
            for (String d : tenant.apiKeySha256()) {
                String prev = digestOwner.putIfAbsent(d, tenant.name());
                if (prev != null) {
                    t.problem("api_key_sha256", d, "is already a key of tenant '" + prev + "' (a key names one tenant)");
                }
            }
            tenants.add(tenant);
        }
        for (String k : flatApiKeys) {
            String owner = digestOwner.get(sha256Hex(k));
            if (owner != null) {
                // One key, two callers: the tenant's limits would not hold for requests the flat list admits.
                root.problem("api_keys", null, "holds a key that is also a key of tenant '" + owner + "' (a key names one caller)");
            }
        }
        RateLimitStore store = null;
        if (root.has(TenancyKeys.STORE.name())) {
            ConfigNode s = root.child(TenancyKeys.STORE.name());
            String url = TenancyKeys.STORE_URL.read(s);
            if (url == null) {
                s.problem("url", null, "is required (redis://host:port[/db], the Redis server the replicas share)");
            } else {
                java.util.regex.Matcher m = REDIS_URL.matcher(url);
                if (!m.matches()) {
                    s.problem("url", url, "must be redis://host:port[/db] (no password in the URL; TLS is not supported)");
                } else if (Integer.parseInt(m.group(2)) < 1 || Integer.parseInt(m.group(2)) > 65535) {
                    s.problem("url", url, "has port " + m.group(2) + ", outside 1-65535");
                }
            }
            store = new RateLimitStore(url, TenancyKeys.STORE_ON_FAILURE.read(s), TenancyKeys.STORE_TIMEOUT_MS.read(s));
            s.finish();
        }
        CacheSalt salt = null;
        if (root.has(TenancyKeys.SALT.name())) {
            ConfigNode s = root.child(TenancyKeys.SALT.name());
            String file = TenancyKeys.SALT_SECRET_FILE.read(s);
            if (file == null) {
                s.problem("secret_file", null, "is required (a file holding at least 16 bytes of secret)");
            } else {
                Path p = resolve(file, baseDir);
                String secret = readFile(s, "secret_file", p);
                if (secret != null && secret.strip().length() < 16) {
                    s.problem("secret_file", file, "holds " + secret.strip().length()
                        + " characters: a salt secret needs at least 16 (anyone who can guess it can compute every tenant's salt)");
                }
                salt = new CacheSalt(p.toString(), secret == null ? "" : secret.strip());
            }
            s.finish();
        }
        int replicas = TenancyKeys.REPLICAS.read(root);
        return new TenancyConfig(List.copyOf(tenants), store, salt, replicas);
    }

    private static Tenant readTenant(ConfigNode t, Path baseDir) {
        String name = t.requiredString(TenancyKeys.NAME.name());
        if (name != null && !NAME.matcher(name).matches()) {
            t.problem("name", name, "must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
                + " (it is a metric label)");
        }
        List<String> inline = TenancyKeys.API_KEY_SHA256.read(t);
        String file = TenancyKeys.API_KEYS_FILE.read(t);
        List<String> digests = new ArrayList<>();
        String fileRead = null;
        if (file != null) {
            if (!inline.isEmpty()) {
                t.problem("api_keys_file", file, "cannot be combined with api_key_sha256 (use one)");
            }
            Path p = resolve(file, baseDir);
            fileRead = p.toString();
            String text = readFile(t, "api_keys_file", p);
            int line = 0;
            for (String l : text == null ? new String[0] : text.split("\n")) {
                line++;
                String d = l.strip();
                if (d.isEmpty() || d.startsWith("#")) {
                    continue;
                }
                if (!SHA256_HEX.matcher(d).matches()) {
                    t.problem("api_keys_file", file, "line " + line + " is not a SHA-256 hex digest (64 hex digits; the file"
                        + " holds `printf %s KEY | sha256sum` of each key, never the key)");
                    continue;
                }
                digests.add(d.toLowerCase(Locale.ROOT));
            }
        } else {
            for (String d : inline) {
                if (!SHA256_HEX.matcher(d).matches()) {
                    t.problem("api_key_sha256", d.length() > 12 ? d.substring(0, 12) + "..." : d,
                        "must be a SHA-256 hex digest (64 hex digits: `printf %s KEY | sha256sum`), never the key itself");
                    continue;
                }
                digests.add(d.toLowerCase(Locale.ROOT));
            }
        }
        if (file == null && inline.isEmpty()) {
            t.problem("api_key_sha256", null, "is required (or api_keys_file): a tenant no key names cannot be used");
        }
        List<String> models = TenancyKeys.MODELS.read(t);
        String priority = TenancyKeys.PRIORITY.read(t);
        boolean priorityHeader = TenancyKeys.PRIORITY_HEADER.read(t);
        ConfigNode l = t.child(TenancyKeys.LIMITS.name());
        Limits limits = new Limits(TenancyKeys.REQUESTS_PER_MINUTE.read(l), TenancyKeys.TOKENS_PER_MINUTE.read(l),
            TenancyKeys.MAX_CONCURRENT.read(l), TenancyKeys.TOKENS_PER_DAY.read(l));
        l.finish();
        boolean shared = TenancyKeys.SHARED_PREFIX_SALT.read(t);
        String clientSalt = TenancyKeys.CLIENT_CACHE_SALT.read(t);
        t.finish();
        return new Tenant(name, List.copyOf(digests), fileRead == null ? null : file, List.copyOf(models), priority,
            priorityHeader, limits, shared, clientSalt);
    }

    /** Lower-case hex SHA-256 of {@code key}'s UTF-8 bytes: how a key is written in {@code api_key_sha256}. */
    public static String sha256Hex(String key) {
        try {
            return HexFormat.of().formatHex(java.security.MessageDigest.getInstance("SHA-256")
                .digest(key.getBytes(StandardCharsets.UTF_8)));
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is part of every JDK", e);
        }
    }

    private static Path resolve(String file, Path baseDir) {
        Path p = Path.of(file);
        return !p.isAbsolute() && baseDir != null ? baseDir.resolve(p).normalize() : p;
    }

    private static String readFile(ConfigNode n, String key, Path p) {
        try {
            return Files.readString(p, StandardCharsets.UTF_8);
        } catch (java.io.IOException e) {
            n.problem(key, p.toString(), "cannot be read (" + e.getClass().getSimpleName() + ": " + e.getMessage() + ")");
            return null;
        }
    }
}
