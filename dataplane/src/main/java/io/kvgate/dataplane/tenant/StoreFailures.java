package io.kvgate.dataplane.tenant;

import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.util.concurrent.atomic.LongAdder;

/**
 * {@code kvgate_rate_limit_store_failures_total{decision,cause}}: each time the shared store did not decide a
 * reservation, and what decided instead ({@code local}, {@code deny}, {@code allow} per {@code on_failure}), or a
 * settlement that did not reach it ({@code lost}: its tokens stay held until their bucket leaves the window, its
 * in-flight slot until its lease ends), or a late grant given back after {@code on_failure} had decided
 * ({@code released}). Cause: {@code timeout} (the gateway's timer, {@code timeout_ms}) or {@code error} (refused,
 * disconnected, a Redis error). Owned by {@link Tenants}, so counts survive a reload that replaces the store.
 */
final class StoreFailures {
    static final String[] DECISIONS = {"local", "deny", "allow", "lost", "released"};
    static final String[] CAUSES = {"timeout", "error"};
    private final LongAdder[] counts = new LongAdder[DECISIONS.length * CAUSES.length];

    StoreFailures() {
        for (int i = 0; i < counts.length; i++) {
            counts[i] = new LongAdder();
        }
    }

    void count(String decision, boolean timeout) {
        counts[index(decision) * CAUSES.length + (timeout ? 0 : 1)].increment();
    }

    long get(String decision, boolean timeout) {
        return counts[index(decision) * CAUSES.length + (timeout ? 0 : 1)].sum();
    }

    private static int index(String decision) {
        for (int i = 0; i < DECISIONS.length; i++) {
            if (DECISIONS[i].equals(decision)) {
                return i;
            }
        }
        throw new IllegalArgumentException("no decision " + decision);
    }

    void register(PrometheusRegistry registry) {
        CounterWithCallback.builder().name("kvgate_rate_limit_store_failures_total")
            .help("Reservations the shared rate_limit_store did not decide, by what decided instead (on_failure: local,"
                + " deny, allow), settlements that did not reach it (lost) and late grants given back (released); cause"
                + " timeout (timeout_ms) or error.").labelNames("decision", "cause")
            .callback(cb -> {
                for (int d = 0; d < DECISIONS.length; d++) {
                    for (int c = 0; c < CAUSES.length; c++) {
                        cb.call(counts[d * CAUSES.length + c].sum(), DECISIONS[d], CAUSES[c]);
                    }
                }
            }).register(registry);
    }
}
