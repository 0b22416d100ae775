package io.kvgate.tools.sim;

/**
 * Deterministic "model output": token k of a sequence is a word from a fixed list chosen by a SplitMix64 stream
 * seeded by (simulator seed, request seed, prompt hash, choice index). The first token has no leading space,
 * the others have one, so the text of k tokens is the words joined by single spaces. Pure and thread-safe.
 */
final class TextGenerator {
    static final String[] WORDS = {
        "the", "cache", "gateway", "token", "prefix", "engine", "block", "route", "latency", "stream",
        "model", "prefill", "decode", "event", "hash", "queue", "batch", "load", "page", "rank",
        "fast", "small", "exact", "warm", "cold", "bright", "quiet", "steady", "simple", "clear",
        "runs", "holds", "finds", "sends", "keeps", "moves", "waits", "reads", "writes", "counts",
        "and", "of", "to", "in", "with", "for", "on", "at", "by", "from",
        "river", "mountain", "garden", "window", "letter", "signal", "bridge", "harbor", "lantern", "meadow",
    };

    private TextGenerator() {}

    /** Seed of one generated sequence. */
    static long sequenceSeed(long simSeed, long requestSeed, long promptHash, int choiceIndex) {
        return mix(mix(mix(simSeed ^ 0x5DEECE66DL) ^ requestSeed) ^ promptHash) + choiceIndex * 0x9E3779B97F4A7C15L;
    }

    /** Text of token {@code k} (0-based) of the sequence with seed {@code seqSeed}. */
    static String token(long seqSeed, int k) {
        long r = mix(seqSeed + (k + 1) * 0x9E3779B97F4A7C15L);
        String w = WORDS[(int) Long.remainderUnsigned(r, WORDS.length)];
        return k == 0 ? w : " " + w;
    }

    /** Length the model "chooses" (EOS) when the request gives no max_tokens. */
    static int naturalLength(long seqSeed, int min, int max) {
        return min + (int) Long.remainderUnsigned(mix(seqSeed ^ 0xE05L), max - min + 1L);
    }

    static long hashTokens(int[] tokens) {
        long h = 0xcbf29ce484222325L;
        for (int t : tokens) {
            h = (h ^ t) * 0x100000001b3L;
        }
        return mix(h);
    }

    static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
        z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
        return z ^ (z >>> 31);
    }
}
