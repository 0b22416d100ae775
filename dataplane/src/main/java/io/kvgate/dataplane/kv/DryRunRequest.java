package io.kvgate.dataplane.kv;

import io.kvgate.dataplane.route.Decision;
import io.kvgate.dataplane.route.Role;
import io.kvgate.dataplane.route.RouteCallback;
import io.kvgate.dataplane.route.RouterPort;
import io.kvgate.dataplane.route.Rule;
import java.util.concurrent.CompletableFuture;

/**
 * The admin explain's request to the routing stage: decided as a client's request with the same prompt, salt and
 * session would be (explained, with a DP rank as a client request gets one, a P/D rule's prefill pool), but as a dry
 * run, so it counts no load, records no speculative blocks and pins no session. The decision completes
 * {@link #result()} on the port's event loop; the admin thread waits for it.
 */
final class DryRunRequest implements RouteCallback {
    /** What the routing stage decided: the endpoint's URL (null: none) and its explanation. */
    record Decided(String endpointUrl, String explanation) {}

    private final Rule rule;
    private final int[] promptTokens;
    private final String cacheSalt;
    private final long sessionKeyHash;
    private final CompletableFuture<Decided> result = new CompletableFuture<>();

    DryRunRequest(Rule rule, int[] promptTokens, String cacheSalt, long sessionKeyHash) {
        this.rule = rule;
        this.promptTokens = promptTokens;
        this.cacheSalt = cacheSalt;
        this.sessionKeyHash = sessionKeyHash;
    }

    CompletableFuture<Decided> result() {
        return result;
    }

    /** Publishes the request through {@code port} (its callers serialize themselves); false when the ring is full. */
    boolean publish(RouterPort port) {
        return port.tryRoute(port.inputs()
            .rule(rule)
            .role(rule.isPd() ? Role.PREFILL : Role.ANY)
            .promptTokens(promptTokens)
            .cacheSalt(cacheSalt)
            .sessionKeyHash(sessionKeyHash)
            .explain(true)
            .dryRun(true)
            .sendsDpRank(true), this); // explain the decision a client request would get (a dry run pins nothing)
    }

    @Override
    public void onDecision(Decision d) {
        result.complete(new Decided(d.endpoint() == null ? null : d.endpoint().config().url(), d.explanation()));
    }
}
