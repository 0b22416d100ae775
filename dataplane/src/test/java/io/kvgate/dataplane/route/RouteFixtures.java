package io.kvgate.dataplane.route;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.metrics.StageTimers;
import io.kvgate.index.block.BlockIndex;
import io.netty.channel.DefaultEventLoop;
import java.util.concurrent.TimeUnit;

/** Configurations, tables and scripted requests for routing unit tests (no threads, no network). */
final class RouteFixtures {
    private RouteFixtures() {}

    /** A gateway configuration around {@code rules} (YAML list items, indented by two spaces). */
    static GatewayConfig config(String extra, String rules) {
        try {
            return GatewayConfig.parse("listen: 127.0.0.1:18080\nadmin_listen: 127.0.0.1:18081\n" + extra + "rules:\n" + rules);
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    /** One rule named {@code name} serving model {@code name}, with {@code settings} lines (4-space indent) and endpoints. */
    static String rule(String name, String settings, String... endpointLines) {
        StringBuilder y = new StringBuilder();
        y.append("  - name: ").append(name).append("\n    models: [").append(name).append("]\n    engine: vllm\n").append(settings);
        y.append("    endpoints:\n");
        for (String e : endpointLines) {
            y.append("      - ").append(e).append('\n');
        }
        return y.toString();
    }

    /** {@code url: http://127.0.0.1:(20000+i)} for i in 0..n-1. */
    static String[] endpoints(int n) {
        String[] e = new String[n];
        for (int i = 0; i < n; i++) {
            e[i] = "url: http://127.0.0.1:" + (20000 + i);
        }
        return e;
    }

    static RouteTable table(GatewayConfig cfg, BlockIndex index, NanoClock clock) {
        return RouteTable.build(cfg, new EndpointRegistry(), ctx -> RulePolicies.create(ctx, index, clock));
    }

    static RouteEvent event(Rule rule) {
        return RouteEvent.of(rule, Role.ANY, null, null, SessionKeys.NONE, false, false);
    }

    /** Decides {@code e} as the routing stage would (policy + load accounting), without the ring. */
    static EndpointState decide(Rule rule, RouteEvent e, long nowNs) {
        EndpointState ep = rule.policyFor(e.role()).choose(rule.candidates(e.role()), e, nowNs, new StringBuilder());
        if (ep != null && !e.dryRun()) {
            ep.onRouted(nowNs);
        }
        return ep;
    }

    /**
     * As {@link #decide}, charging the chosen endpoint the uncached prompt tokens the policy found when the event
     * tracks its prefill (what the routing stage does).
     */
    static EndpointState decideCharging(Rule rule, RouteEvent e, long nowNs) {
        e.uncachedTokens = 0;
        EndpointState ep = rule.policyFor(e.role()).choose(rule.candidates(e.role()), e, nowNs, new StringBuilder());
        if (ep != null && !e.dryRun()) {
            ep.onRouted(nowNs, e.tracksPrefill ? e.uncachedTokens : 0);
        }
        return ep;
    }

    /** An engine reading of one rank: {@code running} and {@code waiting} requests, taken at {@code takenAtNs}. */
    static EngineReading reading(EndpointState ep, long takenAtNs, int running, int waiting) {
        return new EngineReading(takenAtNs, ep.loadEstimate().routedTotal(), ep.loadEstimate().completedTotal(), new int[] {running}, new int[] {waiting},
            new double[] {Double.NaN});
    }

    /** Returns one request's load to {@code ep} with {@code outcome} (threshold 3, open 1 s). */
    static void finish(EndpointState ep, Outcome outcome, long nowNs) {
        ep.onCompleted(outcome == Outcome.SUCCESS ? 1 : 0, outcome == Outcome.FAILURE ? 1 : 0, outcome == Outcome.RELEASED ? 1 : 0,
            3, 1_000_000_000L, nowNs);
    }

    /** Who runs a test's routing stage ({@code router.thread}): a thread of its own, or an event loop. */
    enum Runner { DEDICATED, IO }

    /**
     * Starts routing stages for a test in either mode; in io mode the stage's runner is an event loop of its own
     * ({@link #loop}), standing in for the gateway's one I/O thread. Close after the stage.
     */
    static final class Stages implements AutoCloseable {
        /** io mode: the loop that runs the stage (null in dedicated mode). */
        DefaultEventLoop loop;

        RoutingStage start(Runner runner, GatewayConfig.Router cfg, RouteTable table, NanoClock clock) {
            if (runner == Runner.DEDICATED) {
                return new RoutingStage(cfg, table, clock);
            }
            if (loop == null) {
                loop = new DefaultEventLoop();
            }
            return new RoutingStage(cfg, table, clock, new StageTimers(), loop);
        }

        @Override
        public void close() {
            if (loop != null) {
                loop.shutdownGracefully(0, 1, TimeUnit.SECONDS).syncUninterruptibly();
                loop = null;
            }
        }
    }
}
