package io.kvgate.tools.bench;

import java.util.SplittableRandom;

/**
 * The open-loop timeline: the intended start time of every request, fixed in advance from the rate, the arrival
 * process and the seed, never from when earlier responses came back. The driver polls it with the current time and
 * gets every arrival that is due; latency is then measured from the intended time, so a slow server (or a slow
 * generator) shows up in the numbers instead of silently lowering the offered load (no coordinated omission).
 *
 * <p>Constant arrivals are spaced exactly {@code 1/rate} apart (computed as {@code startNs + i * 1e9 / rate} so no
 * rounding drift accumulates); Poisson arrivals have exponential gaps of mean {@code 1/rate} drawn from a
 * {@link SplittableRandom} seeded with the run's seed, so a given seed always yields the same timeline.
 *
 * <p>The lag between an arrival's intended time and its actual send is measured by the driver at send time (it
 * includes waiting for a free connection), see {@link BenchStats}.
 *
 * <p>Threading: single owner (the driver's event loop, or a test thread). Time is passed in, never read here.
 */
public final class ArrivalScheduler {
    /** How the gaps between intended start times are drawn. */
    public enum Arrival { CONSTANT, POISSON }

    /** Receives the arrivals that are due. */
    @FunctionalInterface
    public interface Sink {
        /**
         * @param seq        0-based arrival number on the timeline
         * @param intendedNs intended start time (same time base as the clock passed to {@link #poll})
         */
        void onArrival(long seq, long intendedNs);
    }

    private final Arrival arrival;
    private final double ratePerS;
    private final long startNs;
    private final long endNs;
    private final SplittableRandom random;
    private final double meanGapNs;

    private long nextSeq;
    private long nextDueNs;
    private double poissonOffsetNs;

    /**
     * @param arrival  constant or Poisson
     * @param ratePerS offered rate in requests per second, &gt; 0
     * @param seed     seed of the Poisson gaps (ignored for constant)
     * @param startNs  intended start of arrival 0 (Poisson: of the first gap's origin)
     * @param endNs    no arrival is intended at or after this time
     */
    public ArrivalScheduler(Arrival arrival, double ratePerS, long seed, long startNs, long endNs) {
        if (!(ratePerS > 0) || Double.isInfinite(ratePerS)) {
            throw new IllegalArgumentException("rate=" + ratePerS + " must be a finite number > 0");
        }
        if (endNs < startNs) {
            throw new IllegalArgumentException("endNs=" + endNs + " must be >= startNs=" + startNs);
        }
        this.arrival = arrival;
        this.ratePerS = ratePerS;
        this.startNs = startNs;
        this.endNs = endNs;
        this.random = new SplittableRandom(seed);
        this.meanGapNs = 1e9 / ratePerS;
        this.nextDueNs = computeNext();
    }

    private long computeNext() {
        if (arrival == Arrival.CONSTANT) {
            return startNs + (long) Math.floor(nextSeq * meanGapNs);
        }
        // Exponential gap by inversion; 1 - u is in (0, 1] so the log is finite.
        double u = random.nextDouble();
        poissonOffsetNs += -Math.log(1.0 - u) * meanGapNs;
        return startNs + (long) poissonOffsetNs;
    }

    /**
     * Hands every arrival intended at or before {@code nowNs} to {@code sink}, at most {@code max} of them (so a
     * driver that fell far behind still returns to its I/O between batches).
     *
     * @return the number of arrivals handed out
     */
    public int poll(long nowNs, int max, Sink sink) {
        int n = 0;
        while (n < max && nextDueNs < endNs && nextDueNs <= nowNs) {
            long seq = nextSeq;
            long intended = nextDueNs;
            nextSeq++;
            nextDueNs = computeNext();
            n++;
            sink.onArrival(seq, intended);
        }
        return n;
    }

    /** Intended time of the next arrival, or {@link Long#MAX_VALUE} when the timeline is over. */
    public long nextDueNs() {
        return nextDueNs < endNs ? nextDueNs : Long.MAX_VALUE;
    }

    /** True when every arrival of the timeline has been handed out. */
    public boolean finished() {
        return nextDueNs >= endNs;
    }

    /** Arrivals handed out so far. */
    public long handedOut() {
        return nextSeq;
    }

    public double ratePerS() {
        return ratePerS;
    }

    public Arrival arrival() {
        return arrival;
    }

    public long startNs() {
        return startNs;
    }

    public long endNs() {
        return endNs;
    }
}
