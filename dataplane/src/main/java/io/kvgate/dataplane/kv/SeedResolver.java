package io.kvgate.dataplane.kv;

import io.kvgate.control.log.Log;
import io.kvgate.dataplane.route.Rule;
import java.util.List;
import java.util.function.Supplier;

/**
 * Finds the seed of every rule with {@code hash_seed: auto} by running the parity probe against its engines until
 * one candidate's keys appear in their events; the probe then hands the seed to the gateway, which applies it as a
 * reload (the one path by which a rule's hasher changes). Probes are real requests to the engines, so they are sent
 * only while some rule is unresolved, one round per retry interval. Each round also lets learned-key rules adopt
 * the block size their engines' events carry ({@link #adoptBlockSizes}), through the same reload. One daemon
 * thread; {@link #close} stops it.
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
    /**
     * Learned-key rules keyed at their engines' block size: rule name -> {configured block_size, the engines'}. Only
     * learned keys allow it: their index entries are keyed at the events' own token count already, so the requests
     * follow and nothing indexed changes meaning; exact keys depend on the engine's hash, which the size alone
     * does not fix.
     */
    private final java.util.Map<String, int[]> adopted = new java.util.concurrent.ConcurrentHashMap<>();
    /** The largest block size a rule may be configured with ({@code block_size} in [1, 4096]). */
    private static final int MAX_ADOPTED_BLOCK_SIZE = 4096;
    /** Applies what was found (the gateway: a reload of the configuration in effect). */
    private volatile Runnable onAdopted = () -> { };

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

    /** Sets who applies an adopted block size (the gateway, through its reload path). */
    public void onAdopted(Runnable apply) {
        this.onAdopted = apply;
    }

    /**
     * The block size a learned-key rule adopted from its engines while configured with {@code configured}, or 0:
     * substituted whenever a configuration naming the rule with that block size is applied.
     */
    public int adoptedBlockSize(String rule, int configured) {
        int[] a = adopted.get(rule);
        return a != null && a[0] == configured ? a[1] : 0;
    }

    /**
     * Learned-key rules whose engines all key at one block size other than the rule's adopt it (warned once per
     * change); engines that disagree keep the rule as configured (the inventory shows each one's size).
     */
    void adoptBlockSizes(KvState k) {
        boolean any = false;
        for (Rule r : rules.get()) {
            if (!"learned".equals(r.config().kvKeyMode())) {
                continue;
            }
            int seen = 0;
            boolean agree = true;
            for (io.kvgate.dataplane.route.EndpointState ep : r.endpoints()) {
                int size = ep.config().kvEvents() == null ? 0 : k.ingest().blockSizes().lastEventBlockSize(ep.id());
                if (size > 0) {
                    agree &= seen == 0 || seen == size;
                    seen = size;
                }
            }
            int now = r.config().blockSize();
            if (seen == 0 || !agree || seen == now || seen > MAX_ADOPTED_BLOCK_SIZE) {
                continue;
            }
            int[] before = adopted.get(r.name());
            int configured = before != null && before[1] == now ? before[0] : now;
            adopted.put(r.name(), new int[] {configured, seen});
            Log.warn("rule '" + r.name() + "' (kv_key_mode learned): its engines key at block_size " + seen + ", not "
                + now + ": adopting " + seen + " (set block_size: " + seen + " to say so in the configuration)");
            any = true;
        }
        if (any) {
            onAdopted.run();
        }
    }

    /** One round: every unresolved {@code auto} rule is probed once; learned rules adopt their engines' block size. */
    void resolveOnce() {
        KvState k = kv.get();
        if (k == null) {
            return;
        }
        adoptBlockSizes(k);
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

    /**
     * {@code next} with each {@code hash_seed: auto} the parity probe resolved (for the same rule name and hash
     * algorithm) replaced by its seed, and each learned-key rule's block size by the one its engines key at (when
     * it adopted one while configured as it is in {@code next}), so reloading an unchanged file keeps what was found.
     */
    public io.kvgate.control.config.GatewayConfig withResolvedSeeds(io.kvgate.control.config.GatewayConfig next) {
        List<io.kvgate.control.config.RuleConfig> rules = new java.util.ArrayList<>(next.rules());
        boolean changed = false;
        for (int i = 0; i < rules.size(); i++) {
            io.kvgate.control.config.RuleConfig rc = rules.get(i);
            String seed = rc.hashSeedAuto() ? probe.resolvedSeed(rc.name(), rc.hashAlgo()) : null;
            if (seed != null) {
                rc = rc.withHashSeed(seed);
                changed = true;
            }
            int adopted = "learned".equals(rc.kvKeyMode()) ? adoptedBlockSize(rc.name(), rc.blockSize()) : 0;
            if (adopted > 0) {
                rc = rc.withBlockSize(adopted);
                changed = true;
            }
            rules.set(i, rc);
        }
        return changed ? next.withRules(rules) : next;
    }

    @Override
    public void close() {
        closed = true;
        poke();
        thread.interrupt();
    }
}
