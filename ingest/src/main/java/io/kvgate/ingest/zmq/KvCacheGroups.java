package io.kvgate.ingest.zmq;

import io.kvgate.index.block.Holders;
import io.kvgate.ingest.codec.SpecKind;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.function.Consumer;

/**
 * The KV-cache groups of each endpoint's engine, learned from its stored events ({@code group_idx},
 * {@code kv_cache_spec_kind}, issue #36 item 6). A hybrid model (sliding-window or Mamba layers beside full
 * attention) publishes one event stream per group, all chained over the same hashes; only the full-attention groups
 * keep every block of a prefix, so only their blocks are indexed. The others are counted, and their removals
 * (which carry only {@code group_idx}) are recognised by the group index their stores announced.
 *
 * <p>vLLM hashes a hybrid model at the GCD of its groups' block sizes (or {@code prefix_match_unit}) and announces
 * each group's block by the LAST fine hash it covers ({@code BlockHashListWithBlockSize}). Once groups of different
 * block sizes are seen, an endpoint whose rule hashes at its full block size gets zero hits: that is warned once per
 * endpoint, pointing at learned keys (chained from the events' own tokens at the full group's block size, whatever
 * granularity the engine hashed at); the gateway does not hash exact keys at a finer granularity yet.
 *
 * <p><b>Threading:</b> {@link #expect} from the configuration thread, {@link #admit}/{@link #admitRemoval} from the
 * ingest thread (the index's single writer), the readers from any thread.
 */
public final class KvCacheGroups {
    /** Group indexes beyond this are not remembered by index (their removals are applied as full-attention ones). */
    static final int MAX_GROUP = 63;

    /** Per endpoint: bit g set when group g announced a kind that does not hold whole prefixes. */
    private final AtomicLongArray partialGroups = new AtomicLongArray(Holders.MAX_ENDPOINTS);
    /** Per endpoint: bit g set for every group index seen in a stored event. */
    private final AtomicLongArray groupsSeen = new AtomicLongArray(Holders.MAX_ENDPOINTS);
    private final AtomicLongArray skippedBlocks = new AtomicLongArray(Holders.MAX_ENDPOINTS);
    /** Per endpoint: the GCD of every group's block size seen (0 before any grouped event). */
    private final AtomicIntegerArray hashUnit = new AtomicIntegerArray(Holders.MAX_ENDPOINTS);
    /** Per endpoint: the full-attention group's block size (0 before one). */
    private final AtomicIntegerArray fullBlockSize = new AtomicIntegerArray(Holders.MAX_ENDPOINTS);
    /** Per endpoint: the granularity its rule hashes at (0 = do not check). */
    private final AtomicIntegerArray expectedHashUnit = new AtomicIntegerArray(Holders.MAX_ENDPOINTS);
    private final AtomicReferenceArray<String> names = new AtomicReferenceArray<>(Holders.MAX_ENDPOINTS);
    /** Ingest thread only: the endpoints already warned about, until their expectation changes. */
    private final boolean[] warned = new boolean[Holders.MAX_ENDPOINTS];
    private final Consumer<String> warn;

    public KvCacheGroups(Consumer<String> warn) {
        this.warn = warn;
    }

    /**
     * The granularity the gateway hashes {@code endpointId}'s requests at in exact-key mode (its rule's block_size;
     * 0 = do not check: learned keys), and how warnings name the endpoint.
     */
    public void expect(int endpointId, int hashBlockSize, String name) {
        if (!inRange(endpointId)) {
            return;
        }
        names.set(endpointId, name);
        if (expectedHashUnit.getAndSet(endpointId, hashBlockSize) != hashBlockSize) {
            warned[endpointId] = false;
        }
    }

    /**
     * A stored event of {@code endpointId} (ingest thread): whether its blocks are to be indexed. Blocks of a group
     * that does not hold whole prefixes are counted and refused.
     */
    boolean admit(int endpointId, int groupIdx, int specKind, int blockSize, int blocks) {
        if (!inRange(endpointId)) {
            return true;
        }
        if (groupIdx >= 0 && groupIdx <= MAX_GROUP) {
            long bit = 1L << groupIdx;
            if ((groupsSeen.get(endpointId) & bit) == 0) {
                groupsSeen.set(endpointId, groupsSeen.get(endpointId) | bit);
            }
            boolean partial = !SpecKind.holdsWholePrefix(specKind);
            long mask = partialGroups.get(endpointId);
            if (partial != ((mask & bit) != 0)) {
                partialGroups.set(endpointId, partial ? mask | bit : mask & ~bit);
            }
            if (blockSize > 0) {
                int unit = hashUnit.get(endpointId);
                int g = unit == 0 ? blockSize : gcd(unit, blockSize);
                if (g != unit) {
                    hashUnit.set(endpointId, g);
                }
                if (!partial) {
                    fullBlockSize.set(endpointId, blockSize);
                }
                checkGranularity(endpointId);
            }
        }
        if (SpecKind.holdsWholePrefix(specKind)) {
            return true;
        }
        skippedBlocks.addAndGet(endpointId, blocks);
        return false;
    }

    /** A removal of {@code endpointId}'s group {@code groupIdx} (ingest thread): whether it applies to the index. */
    boolean admitRemoval(int endpointId, int groupIdx, int blocks) {
        if (!inRange(endpointId) || groupIdx < 0 || groupIdx > MAX_GROUP
            || (partialGroups.get(endpointId) & (1L << groupIdx)) == 0) {
            return true;
        }
        skippedBlocks.addAndGet(endpointId, blocks);
        return false;
    }

    private void checkGranularity(int endpointId) {
        int want = expectedHashUnit.get(endpointId);
        int unit = hashUnit.get(endpointId);
        int full = fullBlockSize.get(endpointId);
        if (want <= 0 || full <= 0 || unit >= full || want == unit || warned[endpointId]) {
            return;
        }
        warned[endpointId] = true;
        warn.accept("endpoint " + names.get(endpointId) + ": the engine's KV-cache groups key blocks of "
            + Long.bitCount(groupsSeen.get(endpointId)) + " sizes (full attention " + full + ", GCD " + unit
            + "): vLLM hashes such a hybrid model every " + unit + " tokens and names each " + full
            + "-token block by its last " + unit + "-token hash, but the rule hashes every " + want
            + " tokens, so no exact key can match; set the rule's kv_key_mode to learned (keys chained from the"
            + " events' own tokens at block_size " + full + ")");
    }

    /** Blocks of groups that do not hold whole prefixes (sliding window, Mamba, ...), stored or removed: not indexed. */
    public long skippedBlocks(int endpointId) {
        return inRange(endpointId) ? skippedBlocks.get(endpointId) : 0;
    }

    /** How many KV-cache groups the endpoint's events named (0 for engines that send no {@code group_idx}). */
    public int groups(int endpointId) {
        return inRange(endpointId) ? Long.bitCount(groupsSeen.get(endpointId)) : 0;
    }

    /** The GCD of the endpoint's group block sizes: the hash granularity vLLM uses for it (0 before grouped events). */
    public int hashUnit(int endpointId) {
        return inRange(endpointId) ? hashUnit.get(endpointId) : 0;
    }

    /** The endpoint's groups hash finer than its rule does: its prefixes cannot match until hash_block_size is set. */
    public boolean granularityMismatched(int endpointId) {
        if (!inRange(endpointId)) {
            return false;
        }
        int want = expectedHashUnit.get(endpointId);
        int unit = hashUnit.get(endpointId);
        int full = fullBlockSize.get(endpointId);
        return want > 0 && full > 0 && unit < full && want != unit;
    }

    private static int gcd(int a, int b) {
        while (b != 0) {
            int t = a % b;
            a = b;
            b = t;
        }
        return a;
    }

    private static boolean inRange(int endpointId) {
        return endpointId >= 0 && endpointId < Holders.MAX_ENDPOINTS;
    }
}
