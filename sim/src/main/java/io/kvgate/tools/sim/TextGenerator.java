package io.kvgate.tools.sim;

/**
 * Deterministic "model output". Sampled requests: token k of a sequence is a word from a fixed list chosen by a
 * SplitMix64 stream seeded by (simulator seed, request seed, prompt hash, choice index). Greedy requests
 * (temperature 0) are a function of the preceding tokens instead, like a real model's argmax: the next word is chosen
 * by a rolling hash of the whole context (prompt + everything generated so far) reduced to its words, so generating
 * from (prompt + the first k generated tokens) — as token ids, as text appended to a completions prompt, or as an
 * assistant prefix with {@code continue_final_message} — gives exactly tokens k+1.. of the uninterrupted run (the
 * gateway's mid-stream failover is tested against that). A greedy answer without {@code max_tokens} ends where the
 * context's hash says EOS (a per-token chance of 2/(min+max) of the natural range), so a continued run ends at the
 * same token too. The first token has no leading space when the context ends in whitespace (a fresh chat turn, a
 * prompt ending in a blank) or is not text the simulator can read, else one; every later token has one, so the text of
 * k tokens is the words joined by single spaces. Pure and thread-safe.
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

    /** The greedy context before any token: the same on every simulated engine with the same {@code --seed}. */
    static long greedyStart(long simSeed) {
        return mix(simSeed ^ 0x6A09E667F3BCC908L);
    }

    /** The greedy context after one more word (its key: {@link WordTokenizer#wordKey}). */
    static long greedyNext(long context, int wordKey) {
        return mix((context ^ (wordKey & 0xffffffffL)) * 0x100000001b3L + 0x2545F4914F6CDD1DL);
    }

    /** The word greedy decoding picks after {@code context}. */
    static String greedyWord(long context) {
        return WORDS[(int) Long.remainderUnsigned(mix(context + 0x9E3779B97F4A7C15L), WORDS.length)];
    }

    /** Whether greedy decoding emits EOS after {@code context} (a chance of 1/{@code meanLength} per token). */
    static boolean greedyEos(long context, int meanLength) {
        return Long.remainderUnsigned(mix(context ^ 0xE05E05E05L), Math.max(1, meanLength)) == 0;
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
