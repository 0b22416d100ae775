package io.kvgate.dataplane.route;

import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.route.RuleStats.MissReason;
import io.kvgate.dataplane.route.RuleStats.Tier;
import java.util.Arrays;

/**
 * Consistent hashing with bounded loads on a prompt-prefix key: a prompt family (same system prompt, same few-shot
 * block) lands on the same engine, so its prefix stays warm there, without any KV events. Each endpoint owns
 * {@code virtual_nodes × weight} points on a 64-bit ring; the key is the hash of {@code prefix_tokens} tokens (or
 * {@code prefix_blocks} blocks) of the rendered or token-id prompt, from the first block after the prefix every prompt
 * of the rule has shared so far ({@code skip_common_prefix}, see {@link #keyOf}), or, when the rule has no tokenizer and
 * the prompt is text, the hash of its first {@code prefix_chars} characters (computed by the prompt stage from the
 * text the body stage captured). The owner takes the request unless it
 * is over the bound {@code (1+ε)·mean load}; then the walk goes clockwise to the next endpoint under it — the bound is
 * always applied, also for hot keys. Load is each endpoint's estimate ({@link EndpointState#load()}: engine-reported
 * plus this gateway's requests since the scrape, else this gateway's in-flight count).
 *
 * <p>Routing stage only. The ring is built once per rule version (endpoints are fixed for a rule); the walk is
 * bounded by the number of ring points. The owner of a key depends only on endpoint keys and weights, so a
 * configuration swap that keeps them keeps every key's owner (nothing else to carry over).
 */
final class ChwblPolicy implements RoutingPolicy {
    private final RuleConfig.ChwblConfig knobs;
    private final int prefixTokens;
    private final RoutingPolicy fallback;
    private final RuleStats stats;
    private final long[] points;
    private final int[] owners;
    private final int blockSize;
    /**
     * {@code skip_common_prefix}: the chained hash of each full block of the first prompt seen, and how many of them
     * every prompt since has shared ({@code -1} before the first). Routing stage only.
     */
    private final long[] commonChain;
    private int commonBlocks = -1;

    ChwblPolicy(RuleConfig rule, EndpointState[] endpoints, RoutingPolicy fallback, RuleStats stats) {
        this.knobs = rule.chwbl();
        this.prefixTokens = knobs.prefixTokens() > 0 ? knobs.prefixTokens() : Math.max(1, knobs.prefixBlocks()) * rule.blockSize();
        this.fallback = fallback;
        this.stats = stats;
        this.blockSize = Math.max(1, rule.blockSize());
        this.commonChain = knobs.skipCommonPrefix() ? new long[MAX_COMMON_BLOCKS] : null;
        int total = 0;
        for (int i = 0; i < endpoints.length; i++) {
            total += knobs.virtualNodes() * rule.endpoints().get(i).weight();
        }
        long[] pts = new long[total];
        int[] own = new int[total];
        int k = 0;
        for (int i = 0; i < endpoints.length; i++) {
            long base = endpoints[i].key().hashCode() * 0x9E3779B97F4A7C15L;
            int vn = knobs.virtualNodes() * rule.endpoints().get(i).weight();
            for (int v = 0; v < vn; v++) {
                pts[k] = mix(base + v * 0xBF58476D1CE4E5B9L);
                own[k] = i;
                k++;
            }
        }
        // Sort points, carrying owners along.
        Integer[] order = new Integer[total];
        for (int i = 0; i < total; i++) {
            order[i] = i;
        }
        Arrays.sort(order, (a, b) -> Long.compareUnsigned(pts[a], pts[b]));
        this.points = new long[total];
        this.owners = new int[total];
        for (int i = 0; i < total; i++) {
            points[i] = pts[order[i]];
            owners[i] = own[order[i]];
        }
    }

    static long mix(long z) {
        z = (z ^ (z >>> 33)) * 0xff51afd7ed558ccdL;
        z = (z ^ (z >>> 33)) * 0xc4ceb9fe1a85ec53L;
        return z ^ (z >>> 33);
    }

    /** The longest common prefix {@code skip_common_prefix} tracks, in blocks (16,384 tokens at block size 16). */
    static final int MAX_COMMON_BLOCKS = 1024;

    /**
     * The ring key of a prompt: {@code prefixTokens} tokens (all of them if shorter), from the first block boundary
     * after the prefix every prompt of the rule has shared so far ({@code skip_common_prefix}), else from the start.
     * A key over a prefix all requests share would send them all to one owner (issue #35: a 64-token key that is
     * just the common system prompt gave every conversation the same engine).
     */
    long keyOf(int[] tokens) {
        int start = commonChain == null ? 0 : skipCommon(tokens);
        int n = Math.min(prefixTokens, tokens.length - start);
        long h = 0x243F6A8885A308D3L ^ n;
        for (int i = start; i < start + n; i++) {
            h = mix(h ^ (tokens[i] & 0xFFFFFFFFL));
        }
        return h;
    }

    /**
     * Updates the common prefix with {@code tokens} and returns where its key starts: after the common blocks, or at
     * 0 when the prompt has nothing beyond them (it is the common prefix itself, or a prefix of it). The common
     * prefix only shrinks: one prompt that starts differently takes it back to 0 blocks, the head key as before.
     */
    private int skipCommon(int[] tokens) {
        int full = Math.min(MAX_COMMON_BLOCKS, tokens.length / blockSize);
        long h = 0x452821E638D01377L;
        int shared = 0;
        boolean first = commonBlocks < 0;
        int limit = first ? full : Math.min(full, commonBlocks);
        for (int b = 0; b < limit; b++) {
            for (int i = b * blockSize, end = i + blockSize; i < end; i++) {
                h = mix(h ^ (tokens[i] & 0xFFFFFFFFL));
            }
            if (first) {
                commonChain[b] = h;
            } else if (commonChain[b] != h) {
                break;
            }
            shared++;
        }
        commonBlocks = first ? full : shared;
        int start = commonBlocks * blockSize;
        return start < tokens.length ? start : 0;
    }

    /** Blocks every prompt has shared so far, -1 before the first ({@code skip_common_prefix}; tests). */
    int commonBlocks() {
        return commonBlocks;
    }

    @Override
    public EndpointState choose(EndpointState[] c, RouteEvent r, long nowNs, StringBuilder why) {
        int[] tokens = r.promptTokens();
        boolean hasTokens = tokens != null && tokens.length > 0;
        long textKey = r.textPrefixKey();
        if (!hasTokens && textKey == 0L) {
            stats.miss(MissReason.NO_TOKENS);
            stats.tier(r.decidedBy(Tier.FALLBACK));
            EndpointState ep = fallback.choose(c, r, nowNs, why);
            if (r.explain()) {
                why.append("tier=fallback(no_tokens)");
            }
            return ep;
        }
        int eligible = 0;
        long load = 0;
        for (EndpointState e : c) {
            if (RoutingPolicy.eligible(e, r, nowNs)) {
                eligible++;
                load += e.load();
            }
        }
        if (eligible == 0) {
            return null;
        }
        double bound = Math.ceil((1.0 + knobs.loadFactor()) * (load + 1) / eligible);
        long key = hasTokens ? keyOf(tokens) : mix(textKey ^ 0x6A09E667F3BCC909L);
        int start = search(key);
        EndpointState owner = c[owners[start]];
        for (int step = 0; step < points.length; step++) {
            EndpointState e = c[owners[(start + step) % points.length]];
            // An endpoint far slower to its first token than its fleet counts as that much busier (load.ttft_aware).
            if (RoutingPolicy.eligible(e, r, nowNs) && TtftEstimate.weigh(e.load(), e.ttft().loadFactor()) + 1 <= bound) {
                stats.tier(r.decidedBy(e == owner ? Tier.CHWBL_OWNER : Tier.CHWBL_WALK));
                if (r.explain()) {
                    why.append(hasTokens ? "tier=chwbl; key=" : "tier=chwbl(text_prefix); key=").append(Long.toHexString(key)).append("; owner=").append(owner.key())
                        .append(e == owner ? "" : " (over bound or unavailable: walked clockwise)").append("; bound=")
                        .append((long) bound).append("; load=");
                    e.loadEstimate().explain(why);
                }
                return e;
            }
        }
        stats.tier(r.decidedBy(Tier.FALLBACK));
        stats.miss(MissReason.ALL_OVER_BOUND);
        return fallback.choose(c, r, nowNs, why);
    }

    private int search(long key) {
        int lo = 0;
        int hi = points.length;
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (Long.compareUnsigned(points[mid], key) < 0) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo == points.length ? 0 : lo;
    }
}
