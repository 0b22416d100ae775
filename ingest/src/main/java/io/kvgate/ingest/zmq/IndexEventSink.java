package io.kvgate.ingest.zmq;

import io.kvgate.control.log.Log;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.ChainedTokenHasher;
import io.kvgate.index.block.LearnedKeyMap;
import io.kvgate.index.block.LearnedNamespace;
import io.kvgate.ingest.codec.BlockRemovedEvent;
import io.kvgate.ingest.codec.BlockStoredEvent;
import io.kvgate.ingest.codec.KvEventHandler;
import io.kvgate.ingest.codec.Medium;
import io.kvgate.index.block.Holders;

/**
 * Applies decoded events to the {@link BlockIndex} for the (endpoint, rank) it is currently aimed at
 * ({@link #target}); one instance per ingest thread, re-aimed before each payload, so decoding and applying
 * allocate nothing.
 *
 * <p>Every medium is indexed, each in its memory tier ({@link #tierOf}): a block offloaded to CPU is still a prefix
 * hit (weighed by {@code kv.tier_weights} at routing), and per-(holder, tier) reference counts make "stored on GPU,
 * stored on CPU, removed from GPU" leave the block held on the CPU tier. A removal without a medium (older engines)
 * removes from the fastest tier that holds the block.
 *
 * <p>Storage events of {@code locality: REMOTE} (vLLM #48281: a shared file system or object store) are counted and
 * not indexed: one endpoint's event does not make the block that endpoint's, and crediting it would pull traffic to
 * whichever engine happened to publish it ({@link #remoteBlocks}).
 *
 * <p>Hybrid models: blocks of KV-cache groups whose kind does not hold whole prefixes (sliding window, Mamba) are
 * counted and not indexed ({@link KvCacheGroups}); the full-attention group's blocks are.
 *
 * <p>Learned-key mode: blocks are keyed by {@link ChainedTokenHasher} over the event's own token cells, chained
 * from the own key of {@code parent_block_hash} (looked up in the {@link LearnedKeyMap}) or from the root when
 * there is no parent (the root of the block's namespace, {@link LearnedNamespace}, when its event names a cache salt or
 * a LoRA adapter). A stored event whose parent was never learned cannot be chained and is skipped (counted);
 * a removal whose mapping is unknown cannot be applied (counted: size the map generously).
 *
 * <p><b>Threading contract:</b> ingest thread only (it is the index's single writer).
 */
final class IndexEventSink implements KvEventHandler {
    private final BlockIndex index;
    private final ChainedTokenHasher hasher;
    private final LearnedKeyMap learned;
    /** Each stored event's block size, checked against its endpoint's rule (issue #36, review V6/S4/T9). */
    final EventBlockSizes blockSizes = new EventBlockSizes(m -> Log.warn("KV events: " + m));
    /** Hybrid models' KV-cache groups: only full-attention groups are indexed (issue #36 item 6). */
    final KvCacheGroups groups = new KvCacheGroups(m -> Log.warn("KV events: " + m));

    private int endpointId;
    private int rank;
    private boolean learnedMode;
    private long blockOps;
    private long clears;

    /**
     * Blocks of {@code locality: REMOTE} storage events (vLLM #48281) not indexed: storage that is not the publishing
     * engine's own (shared by several engines, or elsewhere) says nothing about which endpoint holds the prefix.
     */
    long remoteBlocks;
    long learnedUnknownParents;
    long learnedUnmappedRemovals;
    long incompleteBlocks;

    IndexEventSink(BlockIndex index, ChainedTokenHasher hasher, LearnedKeyMap learned) {
        this.index = index;
        this.hasher = hasher;
        this.learned = learned;
    }

    void target(int endpointId, int rank, KeyMode mode) {
        this.endpointId = endpointId;
        this.rank = rank;
        this.learnedMode = mode == KeyMode.LEARNED;
        this.blockOps = 0;
        this.clears = 0;
    }

    /** Block operations applied since {@link #target}. */
    long blockOps() {
        return blockOps;
    }

    /** AllBlocksCleared events applied since {@link #target}. */
    long clears() {
        return clears;
    }

    /**
     * The index tier of an event's {@code medium}: GPU (also absent), CPU_TIER (CPU, CPU_PINNED, SGLang's CPU_TIER1
     * host tier), DISK (the rest, SGLang's CPU_TIER2 storage tier among them).
     */
    static int tierOf(int medium) {
        return switch (medium) {
            case Medium.NONE, Medium.GPU -> Holders.TIER_GPU;
            case Medium.CPU, Medium.CPU_PINNED, Medium.CPU_TIER1 -> Holders.TIER_CPU;
            default -> Holders.TIER_DISK; // STORAGE, DISK, EXTERNAL, CPU_TIER2, and names this gateway does not know
        };
    }

    @Override
    public void onBlockStored(BlockStoredEvent e) {
        long[] keys = e.blockKeys();
        int n = e.blockCount();
        int tier = tierOf(e.medium());
        if (e.locality() == Medium.LOCALITY_REMOTE) {
            remoteBlocks += n;
            return;
        }
        if (!groups.admit(endpointId, e.groupIdx(), e.specKind(), e.blockSize(), n)) {
            return; // a sliding-window or Mamba group: its blocks do not say the prefix is cached
        }
        blockSizes.observe(endpointId, e.blockSize());
        blockSizes.observeCells(endpointId, e.intsPerCell());
        if (!learnedMode) {
            for (int i = 0; i < n; i++) {
                index.stored(endpointId, rank, keys[i], tier);
            }
            blockOps += n;
            return;
        }
        long parent;
        if (e.hasParent()) {
            parent = learned.get(e.parentKey());
            if (parent == 0) {
                learnedUnknownParents++;
                return;
            }
        } else {
            // A salted or adapter sequence (TensorRT-LLM names both per block) chains from its namespace's root.
            parent = LearnedNamespace.root(hasher, e.namespace());
        }
        int cellInts = e.blockSize() * e.intsPerCell();
        for (int i = 0; i < n; i++) {
            int from = i * cellInts;
            if (from + cellInts > e.tokenInts()) {
                incompleteBlocks += n - i;
                return;
            }
            long own = hasher.blockKey(parent, e.tokens(), from, cellInts);
            learned.put(keys[i], own);
            index.stored(endpointId, rank, own, tier);
            blockOps++;
            parent = own;
        }
    }

    @Override
    public void onBlockRemoved(BlockRemovedEvent e) {
        long[] keys = e.blockKeys();
        int n = e.blockCount();
        int tier = e.medium() == Medium.NONE ? Holders.TIER_ANY : tierOf(e.medium());
        if (e.locality() == Medium.LOCALITY_REMOTE) {
            return; // never indexed (onBlockStored)
        }
        if (!groups.admitRemoval(endpointId, e.groupIdx(), n)) {
            return; // the copy of a group that was never indexed
        }
        for (int i = 0; i < n; i++) {
            long key = keys[i];
            if (learnedMode) {
                key = learned.get(key);
                if (key == 0) {
                    learnedUnmappedRemovals++;
                    continue;
                }
            }
            index.removed(endpointId, rank, key, tier);
            blockOps++;
        }
    }

    @Override
    public void onBlockMoved(long blockKey, int fromMedium, int toMedium) {
        long key = blockKey;
        if (learnedMode) {
            key = learned.get(blockKey);
            if (key == 0) {
                learnedUnmappedRemovals++;
                return;
            }
        }
        int from = tierOf(fromMedium);
        int to = tierOf(toMedium);
        if (from == to) {
            return;
        }
        // Store in the new tier first: the block is never absent from the index in between.
        index.stored(endpointId, rank, key, to);
        index.removed(endpointId, rank, key, from);
        blockOps += 2;
    }

    @Override
    public void onAllBlocksCleared() {
        index.clearRank(endpointId, rank);
        clears++;
    }
}
