package io.kvgate.dataplane.route;

/**
 * Rendezvous (highest random weight) hashing, Thaler and Ravishankar 1998: a key goes to the endpoint with the
 * highest score {@code h(key, endpoint)}. Chosen over a ring of virtual nodes for session affinity because it needs
 * no per-rule structure (the candidate set is whatever is healthy at this instant, so nothing is rebuilt when an
 * endpoint leaves or returns), its balance does not depend on a virtual-node count, and it moves the minimum: when an
 * endpoint leaves only the keys it held move (each to its next-highest endpoint, spread over all the others), and
 * when it returns exactly those keys come back. The full ranking also gives a deterministic "next endpoint" for a
 * bounded-load walk without sorting: the best endpoint under the bound is the highest-scoring one under it.
 *
 * <p>Weights use the logarithmic method (Schindelhauer and Schomaker; also Resch, "Weighted rendezvous hashing"):
 * score = {@code -w / ln(u)} with {@code u} the hash mapped into (0, 1), which gives endpoint i a share
 * {@code w_i / Σw} of the keys and keeps the minimal-movement property. When every candidate has the same weight
 * the raw 64-bit hashes are compared instead (same ranking, no logarithm).
 *
 * <p>The endpoint's side of the hash, {@link #seed}, depends only on its {@code host:port} key, so every gateway
 * replica configured with the same endpoints ranks them identically, with no shared state. Pure functions,
 * thread-safe, no allocation.
 */
final class Rendezvous {
    private Rendezvous() {}

    /** The endpoint's hash input: a 64-bit hash of its {@code host:port} key, the same in every process. */
    static long seed(String endpointKey) {
        return mix(SessionKeys.hash(endpointKey) ^ 0x9E3779B97F4A7C15L);
    }

    /** The unweighted score of {@code key} on the endpoint with {@code seed} (compare unsigned). */
    static long score(long key, long seed) {
        // Two rounds of the murmur3 finalizer over key and seed: one round over key ^ seed would leave the scores of
        // two endpoints as a fixed function of each other's inputs (a shared xor difference); the second round with
        // the seed added again breaks that.
        return mix(mix(key ^ seed) + seed);
    }

    /** The weighted score: {@code -weight / ln(u)} with u in (0, 1) from the unweighted score (higher wins). */
    static double weightedScore(long key, long seed, int weight) {
        // 53 high bits, offset by half a step: u is never 0 or 1, so ln(u) is finite and negative.
        double u = ((score(key, seed) >>> 11) + 0.5) * 0x1.0p-53;
        return -weight / Math.log(u);
    }

    /**
     * A value in [0, 1) of {@code key} on the endpoint with {@code seed}, independent of {@link #score} (another
     * constant goes in): the session bound's share shedding walks a conversation from an endpoint when this is under
     * the endpoint's shed fraction, so the same conversations walk in every replica and on every turn.
     */
    static double unit(long key, long seed) {
        return (mix(mix(key ^ seed ^ 0xD1B54A32D192ED03L) + seed) >>> 11) * 0x1.0p-53;
    }

    static long mix(long z) {
        z = (z ^ (z >>> 33)) * 0xff51afd7ed558ccdL;
        z = (z ^ (z >>> 33)) * 0xc4ceb9fe1a85ec53L;
        return z ^ (z >>> 33);
    }
}
