package io.kvgate.control.config;

import io.kvgate.control.config.TenancyConfig.CacheSalt;
import io.kvgate.control.config.TenancyConfig.Limits;
import io.kvgate.control.config.TenancyConfig.RateLimitStore;
import io.kvgate.control.config.TenancyConfig.Tenant;
import java.util.ArrayList;
import java.util.List;

/**
 * Sections {@code tenants[]}, {@code tenants[].limits}, {@code rate_limit_store} and {@code cache_salt}: read by
 * {@link TenancyConfig#read} (the top-level {@code replicas} is {@link GatewayKeys#REPLICAS}).
 */
public final class TenancyKeys {
    private TenancyKeys() {}

    /** The limits' largest value: a count per minute or day no fleet reaches, far from overflow when summed. */
    static final long MAX_LIMIT = 1L << 50;

    public static final ConfigKey<GatewayConfig, Integer> REPLICAS = GatewayKeys.REPLICAS;

    public static final ConfigSection<Tenant> TENANTS = ConfigSection.listOf(GatewayKeys.SECTION, "tenants",
        "callers by API key, with allowed models, priority and limits (see [tenants](tenants.md)); not with `api_keys`",
        (GatewayConfig c) -> c.tenancy().tenants());

    public static final ConfigKey<Tenant, Object> NAME = TENANTS.customKey("name", "string, required").defaultText("required")
        .doc("tenant name (unique; 1-64 of `A-Za-z0-9._-`): the metrics' `tenant` label and the cache-salt input")
        .readBack(Tenant::name);
    public static final ConfigKey<Tenant, List<String>> API_KEY_SHA256 = TENANTS.stringListKey("api_key_sha256")
        .doc("SHA-256 hex digests of the tenant's API keys (`printf %s KEY | sha256sum`); the keys are never stored")
        .readBack(t -> t.apiKeysFile() != null || t.apiKeySha256().isEmpty() ? null : new ArrayList<>(t.apiKeySha256()));
    public static final ConfigKey<Tenant, String> API_KEYS_FILE = TENANTS.stringKey("api_keys_file", null)
        .typeText("path").doc("file with one SHA-256 hex digest per line (`#` comments); not with `api_key_sha256`")
        .readBack(Tenant::apiKeysFile);
    public static final ConfigKey<Tenant, List<String>> MODELS = TENANTS.stringListKey("models")
        .defaultText("every model").doc("the models the tenant may use; any other is 404 `model_not_found`")
        .readBack(t -> t.models().isEmpty() ? null : new ArrayList<>(t.models()));
    public static final ConfigKey<Tenant, String> PRIORITY = TENANTS.oneOfKey("priority", null,
            List.of("interactive", "standard", "batch"))
        .defaultText("standard").doc("the admission class of the tenant's requests (trusted: not the client's header)")
        .readBack(Tenant::priority);
    public static final ConfigKey<Tenant, Boolean> PRIORITY_HEADER = TENANTS.boolKey("priority_header", false)
        .doc("whether the tenant's clients choose their class with `X-Kvgate-Priority` (else the header is ignored)")
        .readBack(t -> t.priorityHeader() ? true : null);
    public static final ConfigKey<Tenant, Boolean> SHARED_PREFIX_SALT = TENANTS.boolKey("shared_prefix_salt", false)
        .doc("the tenant's requests carry the shared cache salt, so they hit prefixes cached by other opted-in tenants"
            + " (public system prompts)")
        .readBack(t -> t.sharedPrefixSalt() ? true : null);
    public static final ConfigKey<Tenant, String> CLIENT_CACHE_SALT = TENANTS.oneOfKey("client_cache_salt", "drop",
            TenancyConfig.CLIENT_SALT)
        .doc("a client's own `cache_salt` (with `cache_salt` set): `drop` replaces it with the gateway's, `refuse` answers 400")
        .readBack(t -> t.clientCacheSalt().equals("drop") ? null : t.clientCacheSalt());

    public static final ConfigSection<Limits> LIMITS = ConfigSection.optionalMapping(TENANTS, "limits",
        "the tenant's limits across all replicas: held in `rate_limit_store`, else each replica enforces `limit / replicas`"
            + " (0 or absent: none)", Tenant::limits, Limits::any);

    public static final ConfigKey<Limits, Long> REQUESTS_PER_MINUTE = LIMITS.longKey("requests_per_minute", 0, 0, MAX_LIMIT)
        .doc("requests in any 60 s (sliding, 1 s buckets)").readBack(l -> l.requestsPerMinute() > 0 ? l.requestsPerMinute() : null);
    public static final ConfigKey<Limits, Long> TOKENS_PER_MINUTE = LIMITS.longKey("tokens_per_minute", 0, 0, MAX_LIMIT)
        .doc("prompt + completion tokens in any 60 s: reserved before dispatch, settled from the usage")
        .readBack(l -> l.tokensPerMinute() > 0 ? l.tokensPerMinute() : null);
    public static final ConfigKey<Limits, Long> MAX_CONCURRENT = LIMITS.longKey("max_concurrent", 0, 0, MAX_LIMIT)
        .doc("requests in flight at once").readBack(l -> l.maxConcurrent() > 0 ? l.maxConcurrent() : null);
    public static final ConfigKey<Limits, Long> TOKENS_PER_DAY = LIMITS.longKey("tokens_per_day", 0, 0, MAX_LIMIT)
        .doc("prompt + completion tokens in any 24 h (sliding, 1 min buckets)")
        .readBack(l -> l.tokensPerDay() > 0 ? l.tokensPerDay() : null);

    public static final ConfigSection<RateLimitStore> STORE = ConfigSection.optionalMapping(GatewayKeys.SECTION,
        "rate_limit_store", "where the limits' counters live so they hold across replicas (Redis, see [tenants](tenants.md));"
            + " absent = each replica enforces `limit / replicas`", (GatewayConfig c) -> c.tenancy().rateLimitStore(), s -> true);

    public static final ConfigKey<RateLimitStore, String> STORE_URL = STORE.stringKey("url", null).typeText("redis://host:port[/db]")
        .defaultText("required").doc("the Redis server the replicas share").readBack(RateLimitStore::url);
    public static final ConfigKey<RateLimitStore, String> STORE_ON_FAILURE = STORE.oneOfKey("on_failure", "local",
            TenancyConfig.ON_FAILURE)
        .doc("when the store does not answer in time or is down: `local` enforces this replica's share (`limit / replicas`),"
            + " `deny` answers 503, `allow` admits unchecked; each decision is counted")
        .readBack(RateLimitStore::onFailure);
    public static final ConfigKey<RateLimitStore, Long> STORE_TIMEOUT_MS = STORE.longKey("timeout_ms", 50, 1, 10_000)
        .doc("how long a request waits for the store (the gateway's own timer) before `on_failure` decides")
        .readBack(RateLimitStore::timeoutMs);

    public static final ConfigSection<CacheSalt> SALT = ConfigSection.optionalMapping(GatewayKeys.SECTION, "cache_salt",
        "gateway-owned per-tenant cache salts for vllm and sglang rules: `HMAC-SHA256(secret, tenant)`",
        (GatewayConfig c) -> c.tenancy().cacheSalt(), s -> true);

    public static final ConfigKey<CacheSalt, String> SALT_SECRET_FILE = SALT.stringKey("secret_file", null).typeText("path")
        .defaultText("required").doc("file holding the secret (at least 16 characters; re-read on reload)")
        .readBack(CacheSalt::secretFile);
}
