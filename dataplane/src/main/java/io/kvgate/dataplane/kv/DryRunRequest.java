package io.kvgate.dataplane.kv;

import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.RouteRequest;
import io.kvgate.dataplane.route.Rule;
import java.util.concurrent.CompletableFuture;

/**
 * The admin explain's request to the routing stage: decided as a client's request with the same prompt, salt and
 * session would be (explained, with a DP rank as a client request gets one, a P/D rule's prefill pool), but as a dry
 * run, so it counts no load, records no speculative blocks and pins no session. The decision completes
 * {@link #result()} on the port's event loop; the admin thread waits for it.
 */
final class DryRunRequest implements RouteRequest {
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

    @Override
    public Rule rule() {
        return rule;
    }

    @Override
    public int[] promptTokens() {
        return promptTokens;
    }

    @Override
    public String cacheSalt() {
        return cacheSalt;
    }

    @Override
    public long sessionKeyHash() {
        return sessionKeyHash;
    }

    @Override
    public boolean explain() {
        return true;
    }

    @Override
    public boolean dryRun() {
        return true;
    }

    @Override
    public boolean sendsDpRank() {
        return true; // explain the decision a client request would get (a dry run pins nothing)
    }

    @Override
    public Role role() {
        return rule.isPd() ? Role.PREFILL : Role.ANY;
    }

    @Override
    public void onRouted(EndpointState endpoint, Rule decidedBy, String why) {
        result.complete(new Decided(endpoint == null ? null : endpoint.config().url(), why));
    }
}
