package io.kvgate.tools.sim;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

/**
 * Admission control of every DP rank: each rank schedules on its own (like vLLM's engine cores and SGLang's DP
 * schedulers), running at most {@code max-concurrency} generations and holding at most {@code queue} more in a
 * FIFO; beyond that a request is refused (the caller answers 503). The running and waiting counts are the numbers
 * the engines export as {@code num_requests_running}/{@code num_requests_waiting} (vLLM) and
 * {@code num_running_reqs}/{@code num_queue_reqs} (SGLang).
 *
 * <p>Engine-loop confined (single writer).
 */
final class Admission {
    private final int maxRunning;
    private final int queueDepth;
    private final int[] running;
    private final List<ArrayDeque<Generation>> waiting;
    /** Starts an admitted generation (cache lookup, timers). */
    private final Consumer<Generation> starter;
    /** Whether a generation can start when a slot is free (llama.cpp: its pinned slot must be idle). */
    private final java.util.function.Predicate<Generation> ready;
    /** Deep health probes waiting for the engine to make progress (SGLang {@code /health_generate}). */
    private final ArrayDeque<Runnable> progressWaiters = new ArrayDeque<>();

    Admission(int ranks, int maxRunning, int queueDepth, Consumer<Generation> starter) {
        this(ranks, maxRunning, queueDepth, starter, g -> true);
    }

    Admission(int ranks, int maxRunning, int queueDepth, Consumer<Generation> starter,
              java.util.function.Predicate<Generation> ready) {
        this.ready = ready;
        this.maxRunning = maxRunning;
        this.queueDepth = queueDepth;
        this.running = new int[ranks];
        this.waiting = new ArrayList<>(ranks);
        for (int r = 0; r < ranks; r++) {
            waiting.add(new ArrayDeque<>());
        }
        this.starter = starter;
    }

    /** Starts the generation or queues it. Returns false when the rank's queue is full (nothing was changed). */
    boolean offer(Generation g) {
        int r = g.rank;
        if (running[r] < maxRunning && ready.test(g)) {
            running[r]++;
            g.started = true;
            starter.accept(g);
            return true;
        }
        if (waiting.get(r).size() < queueDepth) {
            waiting.get(r).addLast(g);
            return true;
        }
        return false;
    }

    /** Removes a generation that ends (any way); frees its slot and starts queued work on its rank. */
    void onEnd(Generation g, SimStats stats) {
        int r = g.rank;
        if (waiting.get(r).remove(g)) {
            return; // never ran: nothing to release
        }
        if (g.started) {
            running[r] = Math.max(0, running[r] - 1);
        }
        ArrayDeque<Generation> q = waiting.get(r);
        // FIFO, except that a request waiting for a specific busy slot lets the ones behind it go first. Each pass
        // restarts the scan: starting a generation can end it (and re-enter this method) at once.
        List<Generation> abandoned = new ArrayList<>();
        boolean progressed = true;
        while (running[r] < maxRunning && progressed) {
            progressed = false;
            for (var it = q.iterator(); it.hasNext(); ) {
                Generation next = it.next();
                if (!next.ctx.channel().isActive()) {
                    it.remove();
                    abandoned.add(next);
                    progressed = true;
                    break;
                }
                if (ready.test(next)) {
                    it.remove();
                    running[r]++;
                    next.started = true;
                    starter.accept(next);
                    progressed = true;
                    break;
                }
            }
        }
        for (Generation a : abandoned) {
            stats.inc("aborted_while_queued");
            a.end();
        }
        if (g.started) {
            Runnable w;
            while ((w = progressWaiters.poll()) != null) {
                w.run();
            }
        }
    }

    /** True when a new generation would start at once on some rank. */
    boolean hasFreeSlot() {
        for (int n : running) {
            if (n < maxRunning) {
                return true;
            }
        }
        return false;
    }

    /** Runs {@code w} once the next running generation finishes (the engine made progress). */
    void onProgress(Runnable w) {
        progressWaiters.add(w);
    }

    int running(int rank) {
        return running[rank];
    }

    int waiting(int rank) {
        return waiting.get(rank).size();
    }

    int totalRunning() {
        int t = 0;
        for (int n : running) {
            t += n;
        }
        return t;
    }

    int totalWaiting() {
        int t = 0;
        for (ArrayDeque<Generation> q : waiting) {
            t += q.size();
        }
        return t;
    }
}
