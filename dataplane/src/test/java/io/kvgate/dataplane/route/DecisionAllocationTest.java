package io.kvgate.dataplane.route;

import static io.kvgate.dataplane.route.RouteFixtures.config;
import static io.kvgate.dataplane.route.RouteFixtures.table;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.BlockIndexConfig;
import java.lang.management.ManagementFactory;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The load estimate and the token-aware cost keep the routing thread's decision allocation-free: kv_exact (bounded
 * and soft), its least_outstanding fallback and chwbl, deciding on fresh engine readings with prefill tokens in
 * flight, measured with the thread's own allocation counter ({@code ThreadMXBean}) over thousands of decisions.
 * (RingHandoffBench measures the same on the real routing thread, ring and ports included.)
 */
class DecisionAllocationTest {
    private static final int BLOCK = 16;
    private final ManualClock clock = new ManualClock();
    private final com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    private BlockIndex index;

    @AfterEach
    void closeIndex() {
        if (index != null) {
            index.close();
        }
    }

    private Rule rule(String policySettings, boolean kv) {
        return rule(policySettings, kv, 1);
    }

    private Rule rule(String policySettings, boolean kv, int dpRanks) {
        String[] eps = new String[4];
        for (int i = 0; i < eps.length; i++) {
            eps[i] = "url: http://127.0.0.1:" + (20000 + i) + (kv ? "\n        kv_events: tcp://127.0.0.1:" + (30000 + 10 * i)
                + "\n        dp_ranks: " + dpRanks : "");
        }
        if (kv && index == null) {
            index = new BlockIndex(new BlockIndexConfig(4096, 8, 2, 8192, 1024));
        }
        return table(config("", RouteFixtures.rule("r", policySettings + "    block_size: 16\n", eps)), kv ? index : null, clock)
            .ruleByName("r");
    }

    /**
     * Bytes the current thread allocates over {@code n} decisions of {@code r} after warming up: the least of five
     * runs. A run can catch the JIT replacing the code under it (a few hundred bytes once, measured); an allocation
     * per decision, however small (16 B), would show in every run as {@code 16 n} bytes or more.
     */
    private long bytesPerRun(Rule r, int[] tokens, int n) {
        EndpointState[] eps = r.candidates(Role.ANY);
        long now = clock.nanoTime();
        for (int i = 0; i < eps.length; i++) {
            eps[i].loadEstimate().publishReading(new EngineReading(now, 0, 0, new int[] {i * 3}, new int[] {i}, new double[] {0.1 * i}));
            eps[i].loadEstimate().refresh(now, Long.MAX_VALUE);
        }
        RouteEvent e = RouteEvent.of(r, Role.ANY, tokens, null, SessionKeys.NONE, false, false).tracksPrefill(true)
            .sendsDpRank(true);
        StringBuilder why = new StringBuilder(256);
        RoutingPolicy p = r.policyFor(Role.ANY);
        for (int i = 0; i < 50_000; i++) {
            decide(p, eps, e, why, now);
        }
        long best = Long.MAX_VALUE;
        for (int run = 0; run < 5; run++) {
            long before = threads.getCurrentThreadAllocatedBytes();
            for (int i = 0; i < n; i++) {
                decide(p, eps, e, why, now);
            }
            best = Math.min(best, threads.getCurrentThreadAllocatedBytes() - before);
        }
        return best;
    }

    /** One decision as the routing stage makes it: choose, charge, and the request's end (prefill then completion). */
    private static void decide(RoutingPolicy p, EndpointState[] eps, RouteEvent e, StringBuilder why, long now) {
        why.setLength(0);
        e.uncachedTokens = 0;
        e.chosenRank = -1;
        EndpointState ep = p.choose(eps, e, now, why);
        int rank = e.chosenRank;
        ep.onRouted(now, e.uncachedTokens, rank);
        for (EndpointState x : eps) {
            x.loadEstimate().refresh(now, Long.MAX_VALUE);
        }
        ep.loadEstimate().onPrefillDone(e.uncachedTokens);
        if (rank >= 0) {
            ep.rankLoad().onPrefillDone(rank, e.uncachedTokens);
            ep.rankLoad().onCompleted(rank, 1);
        }
        ep.onCompleted(1, 0, 0, 5, 1, now);
    }

    private void cacheEverywhere(Rule r, int[] tokens, int blocks) {
        long[] keys = new long[tokens.length / BLOCK];
        new RuleHasher(r.config(), 0).hash(tokens, null, keys);
        for (EndpointState ep : r.endpoints()) {
            for (int b = 0; b < blocks; b++) {
                index.stored(ep.id(), 0, keys[b]);
            }
            blocks = Math.max(1, blocks - 1); // different depths per endpoint
        }
    }

    private static int[] prompt(int blocks) {
        int[] t = new int[blocks * BLOCK + 5];
        for (int i = 0; i < t.length; i++) {
            t[i] = 1_000 + i;
        }
        return t;
    }

    @Test
    void kvExactDecisionsOnEngineReadingsAllocateNothing() {
        int[] p = prompt(32);
        Rule bounded = rule("    policy: kv_exact\n    fallback: least_outstanding\n    kv: {mode: bounded, speculative_ttl_ms: 0}\n", true);
        cacheEverywhere(bounded, p, 24);
        assertEquals(0, bytesPerRun(bounded, p, 10_000), "bounded kv_exact");
        Rule soft = rule("    policy: kv_exact\n    fallback: least_outstanding\n    kv: {mode: soft, speculative_ttl_ms: 0}\n", true);
        assertEquals(0, bytesPerRun(soft, p, 10_000), "soft kv_exact");
        int[] miss = new int[40 * BLOCK];
        for (int i = 0; i < miss.length; i++) {
            miss[i] = 77_000 + i;
        }
        assertEquals(0, bytesPerRun(bounded, miss, 10_000), "a miss: the token-aware least_outstanding fallback");
        assertTrue(bounded.stats().missCount(RuleStats.MissReason.NO_MATCH) > 0);
        for (String spread : new String[] {"two_choices", "recent_work"}) {
            Rule r = rule("    policy: kv_exact\n    fallback: least_outstanding\n    kv: {mode: bounded, speculative_ttl_ms: 0, spread: "
                + spread + "}\n", true);
            assertEquals(0, bytesPerRun(r, miss, 10_000), "a miss placed by kv.spread: " + spread);
            assertTrue(r.stats().missCount(RuleStats.MissReason.NO_MATCH) > 0);
        }
    }

    @Test
    void kvExactDecisionsScoringDpRanksAllocateNothing() {
        int[] p = prompt(32);
        Rule r = rule("    policy: kv_exact\n    fallback: least_outstanding\n    kv: {mode: bounded, speculative_ttl_ms: 2000}\n",
            true, 4);
        long[] keys = new long[p.length / BLOCK];
        new RuleHasher(r.config(), 0).hash(p, null, keys);
        for (EndpointState ep : r.endpoints()) {
            for (int rank = 0; rank < 4; rank++) {
                for (int b = 0; b < 8 + rank * 5; b++) {
                    index.stored(ep.id(), rank, keys[b]);
                }
            }
        }
        assertEquals(0, bytesPerRun(r, p, 10_000), "per-rank depths, loads and the speculation memo");
        int[] miss = new int[40 * BLOCK];
        for (int i = 0; i < miss.length; i++) {
            miss[i] = 55_000 + i;
        }
        assertEquals(0, bytesPerRun(r, miss, 10_000), "a miss pinned to the least loaded rank");
    }

    @Test
    void loadPolicyDecisionsOnEngineReadingsAllocateNothing() {
        assertEquals(0, bytesPerRun(rule("    policy: least_outstanding\n", false), null, 10_000), "least_outstanding");
        assertEquals(0, bytesPerRun(rule("    policy: chwbl\n    fallback: least_outstanding\n"
            + "    chwbl: {prefix_blocks: 1, virtual_nodes: 16, load_factor: 0.25}\n", false), prompt(4), 10_000), "chwbl");
    }

    /**
     * As {@link #bytesPerRun}, on readings that age (load.peer_decay: lifetime): time advances 1 ms per decision,
     * each request lives 0.5 ms, and every 50 decisions the endpoints publish their next reading (built up front,
     * taken then), which folds a new sample into the peers' mean and the lifetime; so the peers' part is predicted,
     * with a known lifetime and a sample weight below 1, on every decision but the first after a scrape.
     */
    private long bytesPerRunOnAgingReadings(Rule r, int[] tokens, int n) {
        EndpointState[] eps = r.candidates(Role.ANY);
        int periods = (50_000 + 5 * n) / 50 + 1;
        EngineReading[][] readings = new EngineReading[periods][eps.length];
        long start = clock.nanoTime();
        for (int k = 0; k < periods; k++) {
            for (int i = 0; i < eps.length; i++) { // taken when it is published: 50 decisions of 1 ms apart
                readings[k][i] = new EngineReading(start + k * 50_000_000L, 0, 0, new long[0], new long[0],
                    new int[] {i * 3 + k % 2, k % 2}, new int[] {i, 0}, new double[] {0.1 * i, 0.1});
            }
        }
        RouteEvent e = RouteEvent.of(r, Role.ANY, tokens, null, SessionKeys.NONE, false, false).tracksPrefill(true)
            .sendsDpRank(true);
        StringBuilder why = new StringBuilder(256);
        RoutingPolicy p = r.policyFor(Role.ANY);
        long[] decisions = {0};
        Runnable one = () -> {
            long now = clock.nanoTime();
            if (decisions[0]++ % 50 == 0) {
                EngineReading[] next = readings[(int) (decisions[0] / 50)];
                for (int i = 0; i < eps.length; i++) {
                    eps[i].loadEstimate().publishReading(next[i]);
                }
            }
            for (EndpointState x : eps) {
                x.loadEstimate().refresh(now, Long.MAX_VALUE, true);
            }
            why.setLength(0);
            e.uncachedTokens = 0;
            e.chosenRank = -1;
            EndpointState ep = p.choose(eps, e, now, why);
            int rank = e.chosenRank;
            ep.onRouted(now, e.uncachedTokens, rank);
            ep.loadEstimate().onPrefillDone(e.uncachedTokens);
            if (rank >= 0) {
                ep.rankLoad().onPrefillDone(rank, e.uncachedTokens);
                ep.rankLoad().onCompleted(rank, 1);
            }
            ep.onCompleted(1, 0, 0, 5, 1, now + 500_000);
            clock.advance(1, java.util.concurrent.TimeUnit.MILLISECONDS);
        };
        for (int i = 0; i < 50_000; i++) {
            one.run();
        }
        double weight = eps[0].loadEstimate().sampleWeight();
        assertTrue(eps[0].loadEstimate().lifetimeNs() > 0 && weight < 1.0 && weight > 0.0, "aged: lifetime " + eps[0].loadEstimate().lifetimeNs() + " weight " + weight);
        long best = Long.MAX_VALUE;
        for (int run = 0; run < 5; run++) {
            long before = threads.getCurrentThreadAllocatedBytes();
            for (int i = 0; i < n; i++) {
                one.run();
            }
            best = Math.min(best, threads.getCurrentThreadAllocatedBytes() - before);
        }
        return best;
    }

    @Test
    void decisionsOnAgingReadingsAllocateNothing() {
        int[] p = prompt(32);
        Rule kv = rule("    policy: kv_exact\n    fallback: least_outstanding\n    kv: {mode: bounded, speculative_ttl_ms: 0}\n", true, 2);
        cacheEverywhere(kv, p, 24);
        assertEquals(0, bytesPerRunOnAgingReadings(kv, p, 10_000), "kv_exact over two DP ranks, peers' part predicted");
        assertEquals(0, bytesPerRunOnAgingReadings(rule("    policy: least_outstanding\n", false), null, 10_000), "least_outstanding");
        assertEquals(0, bytesPerRunOnAgingReadings(rule("    policy: session\n    session: {mode: hash}\n", false), null, 10_000),
            "session hash");
    }
}
