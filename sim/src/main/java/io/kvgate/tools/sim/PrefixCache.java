package io.kvgate.tools.sim;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;

/**
 * A paged prefix cache of one DP rank, modelled on vLLM's block pool: a fixed number of blocks; a block whose key
 * is cached can be shared by any request whose prompt has the same key chain; blocks referenced by a running
 * request cannot be evicted; unreferenced blocks sit in an LRU free queue and are evicted from its head when a new
 * block needs room. A finishing request returns its blocks tail first (as vLLM does), so within a chain the leaf
 * is always older in the queue than its parent and eviction is leaf-first. Each change is reported to a
 * {@link Listener} so the simulator can publish the KV events the engine would.
 *
 * <p>Engine-loop confined (single writer). Bounded: at most {@code capacityBlocks} blocks.
 */
final class PrefixCache {
    /** Receives cache changes in the order they happen. */
    interface Listener {
        /** New blocks {@code keys[from..to)} were stored; {@code parent} is the key before {@code from} (if any). */
        void onStored(long[] keys, int from, int to, boolean hasParent, long parent, int[] tokens, int blockSize);

        void onRemoved(long[] keys, int count);
    }

    static final class Block {
        final long key;
        /** Physical block number (vLLM's remote_block_ids). */
        final int id;
        int refs;
        Block prev;
        Block next;
        boolean inFree;

        Block(long key, int id) {
            this.key = key;
            this.id = id;
        }
    }

    /** Blocks held by one request; returned by {@link #acquire} and given back to {@link #release}. */
    static final class Lease {
        final List<Block> blocks = new ArrayList<>();
        int cachedTokens;
        int hitBlocks;
    }

    private final int capacityBlocks;
    private final Listener listener;
    private final HashMap<Long, Block> byKey = new HashMap<>();
    // intrusive LRU queue of unreferenced blocks: head = next victim
    private Block head;
    private Block tail;
    private int freeCount;
    private long[] removedScratch = new long[64];
    private int nextId;

    PrefixCache(int capacityBlocks, Listener listener) {
        this.capacityBlocks = capacityBlocks;
        this.listener = listener;
    }

    int size() {
        return byKey.size();
    }

    int freeQueueLength() {
        return freeCount;
    }

    boolean contains(long key) {
        return byKey.containsKey(key);
    }

    /**
     * Looks up the longest cached prefix of {@code keys}, references it, and stores (and references) the
     * remaining full blocks as far as capacity allows. {@code promptTokens} caps the hit like vLLM: at least the
     * last prompt token is always computed, so a fully cached prompt reports one block less.
     */
    Lease acquire(long[] keys, int[] tokens, int blockSize) {
        Lease lease = new Lease();
        int hit = 0;
        while (hit < keys.length && byKey.containsKey(keys[hit])) {
            hit++;
        }
        int maxHitBlocks = (tokens.length - 1) / blockSize;
        lease.hitBlocks = Math.min(hit, maxHitBlocks);
        lease.cachedTokens = lease.hitBlocks * blockSize;
        for (int i = 0; i < hit; i++) {
            ref(lease, byKey.get(keys[i]));
        }
        int stored = hit;
        int removedCount = 0;
        while (stored < keys.length) {
            if (byKey.size() >= capacityBlocks) {
                Block victim = head;
                if (victim == null) {
                    break; // every block is referenced by a running request: this one's tail is not cached
                }
                unlinkFree(victim);
                byKey.remove(victim.key);
                if (removedCount == removedScratch.length) {
                    removedScratch = Arrays.copyOf(removedScratch, removedCount * 2);
                }
                removedScratch[removedCount++] = victim.key;
            }
            Block b = new Block(keys[stored], nextId);
            nextId = (nextId + 1) % capacityBlocks;
            byKey.put(b.key, b);
            ref(lease, b);
            stored++;
        }
        if (removedCount > 0) {
            listener.onRemoved(removedScratch, removedCount);
        }
        if (stored > hit) {
            listener.onStored(keys, hit, stored, hit > 0, hit > 0 ? keys[hit - 1] : 0, tokens, blockSize);
        }
        return lease;
    }

    private void ref(Lease lease, Block b) {
        if (b.inFree) {
            unlinkFree(b);
        }
        b.refs++;
        lease.blocks.add(b);
    }

    /** Gives the blocks back, tail first, so leaves become eviction candidates before their parents. */
    void release(Lease lease) {
        List<Block> blocks = lease.blocks;
        for (int i = blocks.size() - 1; i >= 0; i--) {
            Block b = blocks.get(i);
            if (--b.refs == 0 && byKey.get(b.key) == b) {
                appendFree(b);
            }
        }
        blocks.clear();
    }

    /** Drops everything (engine restart); no events: the new process simply starts empty. */
    void clear() {
        byKey.clear();
        head = tail = null;
        freeCount = 0;
    }

    private void appendFree(Block b) {
        b.inFree = true;
        b.prev = tail;
        b.next = null;
        if (tail != null) {
            tail.next = b;
        } else {
            head = b;
        }
        tail = b;
        freeCount++;
    }

    private void unlinkFree(Block b) {
        if (b.prev != null) {
            b.prev.next = b.next;
        } else {
            head = b.next;
        }
        if (b.next != null) {
            b.next.prev = b.prev;
        } else {
            tail = b.prev;
        }
        b.prev = b.next = null;
        b.inFree = false;
        freeCount--;
    }
}
