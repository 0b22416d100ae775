package io.kvgate.dataplane.exchange;

import java.util.concurrent.TimeUnit;

/**
 * The extra prefill of one rule's hedge legs, capped at a fraction of the rule's interactive prompt tokens over a
 * sliding window ({@code rules[].hedge.max_extra_ratio} over {@code window_ms}, docs/hedging.md). Both sums are
 * kept in {@link #BUCKETS} time buckets of {@code window/BUCKETS} each, so the window slides by a bucket at a time
 * and nothing is allocated per request.
 *
 * <p>Shared by the rule's requests on every event loop: its methods are synchronized (one short critical section
 * per interactive request of a hedging rule, and one per late first token). Time is passed in (the event loop's
 * ticker in the gateway, any value in tests), never read here.
 */
public final class HedgeBudget {
    static final int BUCKETS = 20;

    private final long windowMs;
    private final long bucketNs;
    /** Per bucket: the prompt tokens of the rule's hedgeable requests, and the hedge legs' prompt tokens. */
    private final long[] prompt = new long[BUCKETS];
    private final long[] extra = new long[BUCKETS];
    /** The bucket number (time / bucketNs) each slot last held; a slot from an older round is stale (empty). */
    private final long[] round = new long[BUCKETS];

    public HedgeBudget(long windowMs) {
        this.windowMs = windowMs;
        this.bucketNs = Math.max(1, TimeUnit.MILLISECONDS.toNanos(windowMs) / BUCKETS);
        java.util.Arrays.fill(round, Long.MIN_VALUE);
    }

    /** The window this budget was made for, in milliseconds. */
    public long windowMs() {
        return windowMs;
    }

    /** A hedgeable request of the rule with {@code tokens} prompt tokens arrived at {@code nowNs}. */
    public synchronized void recordPrompt(long nowNs, int tokens) {
        prompt[slot(nowNs)] += Math.max(0, tokens);
    }

    /**
     * A hedge leg of {@code tokens} prompt tokens is about to go out at {@code nowNs}: charged and true when the
     * window's extra tokens stay within {@code ratio} of its prompt tokens, else false and nothing charged.
     */
    public synchronized boolean tryCharge(long nowNs, int tokens, double ratio) {
        int s = slot(nowNs);
        long promptSum = 0;
        long extraSum = 0;
        long current = Math.floorDiv(nowNs, bucketNs);
        for (int i = 0; i < BUCKETS; i++) {
            if (round[i] != Long.MIN_VALUE && current - round[i] < BUCKETS) {
                promptSum += prompt[i];
                extraSum += extra[i];
            }
        }
        if (extraSum + Math.max(0, tokens) > ratio * promptSum) {
            return false;
        }
        extra[s] += Math.max(0, tokens);
        return true;
    }

    /** A charge that did not become a hedge leg (no endpoint to send it to) is handed back. */
    public synchronized void refund(long chargedAtNs, int tokens) {
        long chargedRound = Math.floorDiv(chargedAtNs, bucketNs);
        int s = (int) Math.floorMod(chargedRound, (long) BUCKETS);
        if (round[s] == chargedRound) {
            extra[s] = Math.max(0, extra[s] - Math.max(0, tokens));
        }
    }

    /** The slot for {@code nowNs}, emptied first when it last held an older bucket. */
    private int slot(long nowNs) {
        long r = Math.floorDiv(nowNs, bucketNs);
        int s = (int) Math.floorMod(r, (long) BUCKETS);
        if (round[s] != r) {
            round[s] = r;
            prompt[s] = 0;
            extra[s] = 0;
        }
        return s;
    }
}
