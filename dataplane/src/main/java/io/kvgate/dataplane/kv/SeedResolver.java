package io.kvgate.dataplane.kv;

import io.kvgate.control.log.Log;
import io.kvgate.dataplane.route.Rule;
import java.util.List;
import java.util.function.Supplier;

/**
 * Finds the seed of every rule with {@code hash_seed: auto} by running the parity probe against its engines until
 * one candidate's keys appear in their events; the probe then hands the seed to the gateway, which applies it as a
 * reload (the one path by which a rule's hasher changes). Probes are real requests to the engines, so they are sent
 * only while some rule is unresolved, one round per retry interval. One daemon thread; {@link #close} stops it.
 */
public final class SeedResolver implements AutoCloseable {
    private final ParityProbe probe;
    private final Supplier<List<Rule>> rules;
    private final Supplier<KvState> kv;
    private final long retryMs;
    private final long probeTimeoutMs;
    private final Object wake = new Object();
    private final Thread thread;
    private volatile boolean closed;

    public SeedResolver(ParityProbe probe, Supplier<List<Rule>> rules, Supplier<KvState> kv, long retryMs, long probeTimeoutMs) {
        this.probe = probe;
        this.rules = rules;
        this.kv = kv;
        this.retryMs = retryMs;
        this.probeTimeoutMs = probeTimeoutMs;
        this.thread = new Thread(this::run, "kvgate-seed-resolver");
        thread.setDaemon(true);
    }

    public void start() {
        thread.start();
    }

    /** A rule set changed (a reload may have added an {@code auto} rule): probe now rather than at the next retry. */
    public void poke() {
        synchronized (wake) {
            wake.notifyAll();
        }
    }

    private void run() {
        while (!closed) {
            try {
                resolveOnce();
            } catch (RuntimeException e) {
                Log.warn("hash_seed auto: probe round failed: " + e);
            }
            synchronized (wake) {
                if (closed) {
                    return;
                }
                try {
                    wake.wait(retryMs); // not a timing assumption: the pause between probe rounds
                } catch (InterruptedException e) {
                    return;
                }
            }
        }
    }

    /** One round: every unresolved {@code auto} rule is probed once. */
    void resolveOnce() {
        KvState k = kv.get();
        if (k == null) {
            return;
        }
        for (Rule r : rules.get()) {
            if (closed || !r.config().hashSeedAuto()) {
                continue;
            }
            ParityProbe.SeedState before = probe.seedState(r.name());
            probe.probe(k, r, probeTimeoutMs);
            ParityProbe.SeedState after = probe.seedState(r.name());
            // Said once per change of state, not every round: an engine still starting would repeat the same line.
            if (after != null && (before == null || !before.state().equals(after.state()))) {
                String line = "rule '" + r.name() + "' hash_seed auto: " + after.state() + " (" + after.detail() + ")";
                if ("resolved".equals(after.state())) {
                    Log.info(line);
                } else {
                    Log.warn(line);
                }
            }
        }
    }

    @Override
    public void close() {
        closed = true;
        poke();
        thread.interrupt();
    }
}
