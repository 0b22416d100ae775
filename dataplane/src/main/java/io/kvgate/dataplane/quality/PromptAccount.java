package io.kvgate.dataplane.quality;

/**
 * The attribution of one request's prompt tokens, by position. Positions {@code [0, observed)} the engine served
 * from its cache; every later position was computed, and is attributed to the first of these segments it falls in:
 * {@code [observed, confirmed)} {@link LossCause#INDEX_STALE} (the index said the chosen endpoint held it),
 * {@code [confirmed, predicted)} {@link LossCause#SPECULATIVE}, {@code [predicted, reachable)} the decision's routing
 * cause (another endpoint held it), and from {@code max(observed, predicted, reachable)} to the prompt's end
 * {@link LossCause#COLD}; a request the router did not look up puts every computed token under
 * {@link LossCause#UNKNOWN}. The segments partition {@code [observed, prompt)}: the losses sum exactly to
 * {@code prompt − observed}, and an engine that served more than was predicted (an index lagging behind its cache)
 * shrinks the losses behind it rather than counting negative ones.
 *
 * <p>Pure functions of five counts: the routing stage and the relays share nothing through it.
 */
public final class PromptAccount {
    /** A count the decision did not produce (no lookup ran). */
    public static final int UNKNOWN = -1;

    private PromptAccount() {}

    /**
     * Adds the request's loss per cause into {@code lossByCause} (indexed by {@link LossCause#ordinal()}).
     *
     * @param prompt    prompt tokens (the engine's count)
     * @param observed  prompt tokens the engine served from its cache, in [0, prompt]
     * @param reachable the longest prefix any endpoint of the rule held at decision time, or {@link #UNKNOWN}
     * @param predicted the prefix the chosen endpoint held (index + speculative overlay), or {@link #UNKNOWN}
     * @param confirmed the part of {@code predicted} the index alone confirmed (KV events), or {@link #UNKNOWN}
     * @param routeCause why {@code reachable > predicted}, or null when it is not
     */
    public static void attribute(int prompt, int observed, int reachable, int predicted, int confirmed,
                                 LossCause routeCause, long[] lossByCause) {
        int o = clamp(observed, prompt);
        if (reachable < 0 || predicted < 0) {
            lossByCause[LossCause.UNKNOWN.ordinal()] += prompt - o;
            return;
        }
        int pr = clamp(predicted, prompt);
        int cf = clamp(confirmed < 0 ? predicted : Math.min(confirmed, predicted), prompt);
        int re = clamp(Math.max(reachable, predicted), prompt);
        lossByCause[LossCause.INDEX_STALE.ordinal()] += Math.max(0, cf - o);
        lossByCause[LossCause.SPECULATIVE.ordinal()] += Math.max(0, pr - Math.max(o, cf));
        int routed = Math.max(0, re - Math.max(o, pr));
        if (routed > 0) {
            lossByCause[(routeCause == null ? LossCause.FALLBACK : routeCause).ordinal()] += routed;
        }
        lossByCause[LossCause.COLD.ordinal()] += prompt - Math.max(o, re);
    }

    private static int clamp(int v, int prompt) {
        return Math.max(0, Math.min(v, prompt));
    }
}
