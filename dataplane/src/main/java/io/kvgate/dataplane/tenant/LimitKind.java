package io.kvgate.dataplane.tenant;

/**
 * The limits a request can meet, named as configured ({@code tenants[].limits.*}); the label of
 * {@code kvgate_tenant_limited_total{limit}}.
 */
public enum LimitKind {
    MAX_CONCURRENT("max_concurrent"),
    REQUESTS_PER_MINUTE("requests_per_minute"),
    TOKENS_PER_MINUTE("tokens_per_minute"),
    TOKENS_PER_DAY("tokens_per_day");

    public final String label;

    LimitKind(String label) {
        this.label = label;
    }
}
