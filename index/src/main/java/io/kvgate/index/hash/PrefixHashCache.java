package io.kvgate.index.hash;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Objects;

/**
 * A bounded memo of block digests, (parent digest, block tokens) → (digest, key), so a conversation that grows
 * turn by turn is not re-hashed from its first block every turn: turn 20 of a chat repeats turns 1..19 verbatim,
 * and every one of those blocks is found here at the cost of a cheap fingerprint and an exact compare instead
 * of a SHA-256.
 *
 * <h2>Exactness</h2>
 * A hit requires the stored parent digest (all 16/32 bytes) and every token of the block to be equal — the 64-bit
 * fingerprint only chooses where to look — so a hit returns exactly what hashing would: never a false hit. The
 * digest already covers everything before the block (seed, salt, earlier tokens), and the cache is bound to one
 * {@link BlockHashSpec} (algorithm, block size, seed, LoRA name), so those need no key. The one block whose digest
 * is not determined by (parent, tokens) — vLLM block 0 of a request with a {@code cache_salt}, whose salt is an
 * extra key rather than part of the parent — is never cached ({@link BlockHasher} hashes it every time).
 *
 * <h2>Bounds and eviction</h2>
 * Fixed capacity (a power of two, all arrays allocated up front; {@code capacity * (4 * blockSize + 2 * digest +
 * 16)} bytes). Open addressing with a probe window of {@value #PROBE} slots; when the window is full, a slot of it
 * is overwritten in round-robin order. Nothing is ever allocated after construction.
 *
 * <h2>Threading</h2>
 * Thread-confined: owned by the thread that owns the {@link BlockHasher} using it (the routing stage or one
 * simulator engine); no synchronization. Counters are plain fields readable by the owner.
 */
public final class PrefixHashCache {
    /** Largest capacity accepted: 4 Mi entries (~600 MB at block size 16), far beyond any sensible setting. */
    public static final int MAX_CAPACITY = 1 << 22;
    /** What a routing rule's memo holds at most: 2^16 blocks (~9 MiB at block size 16 with 32-byte digests). */
    public static final int DEFAULT_RULE_ENTRIES = 1 << 16;
    static final int PROBE = 8;

    private static final VarHandle LONG_LE =
        MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
    private static final long M1 = 0x9E3779B97F4A7C15L;
    private static final long M2 = 0xC2B2AE3D27D4EB4FL;
    /** Stands in for the missing parent of an unsalted SGLang page 0. */
    private static final long NO_PARENT_SEED = 0x5A17_0000_0000_0001L;

    private final BlockHashSpec spec;
    private final int blockSize;
    private final int digestBytes;
    private final int mask;
    /**
     * Per slot {@code [fingerprint, key]}, adjacent so a probe and a hit's key share cache lines. Fingerprint 0 =
     * empty; live fingerprints have bit 0 set and carry "has a parent" in bit 1.
     */
    private final long[] meta;
    /** Per slot {@code [parent digest | block digest]}, adjacent: a hit reads the line it just compared. */
    private final byte[] digests;
    /** Per slot the block's tokens. */
    private final int[] tokens;

    private long pendingFingerprint;
    private int victimCursor;
    private long hits;
    private long misses;
    private long evictions;

    /**
     * @param capacityEntries number of blocks remembered; rounded up to a power of two, in [{@value #PROBE},
     *                        {@link #MAX_CAPACITY}]
     */
    public PrefixHashCache(BlockHashSpec spec, int capacityEntries) {
        this.spec = Objects.requireNonNull(spec, "spec");
        if (capacityEntries < PROBE || capacityEntries > MAX_CAPACITY) {
            throw new IllegalArgumentException("capacityEntries=" + capacityEntries + ": must be in [" + PROBE + ", "
                + MAX_CAPACITY + "]");
        }
        int capacity = Integer.highestOneBit(capacityEntries - 1) << 1;
        if ((long) capacity * spec.blockSize() > Integer.MAX_VALUE - 16) {
            throw new IllegalArgumentException("capacityEntries=" + capacityEntries + " x blockSize="
                + spec.blockSize() + ": must stay below 2^31 token cells");
        }
        this.blockSize = spec.blockSize();
        this.digestBytes = spec.algo().digestBytes();
        this.mask = capacity - 1;
        this.meta = new long[2 * capacity];
        this.digests = new byte[capacity * 2 * digestBytes];
        this.tokens = new int[capacity * blockSize];
    }

    /**
     * Entries of a routing rule's memo for a rule whose engines hold at most {@code kvCapacityBlocks} blocks
     * ({@code kv_capacity_blocks}): a repeated block the engines no longer hold is a miss whether or not its digest is
     * remembered, so remembering more blocks than the engines can hold buys nothing; {@link #DEFAULT_RULE_ENTRIES} at
     * most. Before (review B-7) every rule took 2^16 entries, ~9 MiB, whatever its capacity.
     */
    public static int entriesFor(long kvCapacityBlocks) {
        long wanted = Math.max(PROBE, Math.min(DEFAULT_RULE_ENTRIES, kvCapacityBlocks));
        return Integer.highestOneBit((int) wanted - 1) << 1;
    }

    /** Heap bytes (array payloads) of a memo of {@code capacityEntries} for {@code spec}: {@link #heapBytes()} once built. */
    public static long heapBytesFor(BlockHashSpec spec, int capacityEntries) {
        long slots = Integer.highestOneBit(capacityEntries - 1) << 1;
        return slots * (2L * Long.BYTES + 2L * spec.algo().digestBytes() + (long) spec.blockSize() * Integer.BYTES);
    }

    /** Heap bytes (array payloads) this memo holds, from the arrays it allocated. */
    public long heapBytes() {
        return (long) meta.length * Long.BYTES + digests.length + (long) tokens.length * Integer.BYTES;
    }

    public BlockHashSpec spec() {
        return spec;
    }

    /** Number of slots (a power of two). */
    public int capacity() {
        return mask + 1;
    }

    public long hits() {
        return hits;
    }

    public long misses() {
        return misses;
    }

    /** Live entries overwritten to make room. */
    public long evictions() {
        return evictions;
    }

    /** Forgets every entry (counters are kept). */
    public void clear() {
        Arrays.fill(meta, 0L);
    }

    /**
     * Finds the block whose parent is {@code parent[parentOff, +digest)} (ignored when {@code withParent} is
     * false) and whose tokens are {@code blockTokens[tokenOff, +blockSize)}.
     *
     * @return the slot of an exact match, or -1
     */
    int lookup(byte[] parent, int parentOff, boolean withParent, int[] blockTokens, int tokenOff) {
        long fp = fingerprint(parent, parentOff, withParent, blockTokens, tokenOff);
        pendingFingerprint = fp;
        int home = (int) (fp >>> 40) & mask;
        for (int i = 0; i < PROBE; i++) {
            int slot = (home + i) & mask;
            if (meta[2 * slot] == fp && matches(slot, parent, parentOff, withParent, blockTokens, tokenOff)) {
                hits++;
                return slot;
            }
        }
        misses++;
        return -1;
    }

    /** Copies the digest of hit {@code slot} to {@code dst[off, +digest)} and returns its key. */
    long copyHit(int slot, byte[] dst, int off) {
        System.arraycopy(digests, (2 * slot + 1) * digestBytes, dst, off, digestBytes);
        return meta[2 * slot + 1];
    }

    /**
     * After a {@link #lookup} miss for the same block: picks a slot and stores the block's parent and tokens there.
     * The slot stays invisible to lookups until {@link #commit}.
     */
    int reserve(byte[] parent, int parentOff, boolean withParent, int[] blockTokens, int tokenOff) {
        long fp = pendingFingerprint;
        int home = (int) (fp >>> 40) & mask;
        int victim = -1;
        for (int i = 0; i < PROBE; i++) {
            int slot = (home + i) & mask;
            if (meta[2 * slot] == 0L) {
                victim = slot;
                break;
            }
        }
        if (victim < 0) {
            victim = (home + (victimCursor++ & (PROBE - 1))) & mask;
            evictions++;
        }
        meta[2 * victim] = 0L;
        if (withParent) {
            System.arraycopy(parent, parentOff, digests, 2 * victim * digestBytes, digestBytes);
        }
        System.arraycopy(blockTokens, tokenOff, tokens, victim * blockSize, blockSize);
        return victim;
    }

    /** Completes a {@link #reserve}d slot with the block's digest and key, making it visible. */
    void commit(int slot, byte[] digest, int digestOff, long key) {
        System.arraycopy(digest, digestOff, digests, (2 * slot + 1) * digestBytes, digestBytes);
        meta[2 * slot + 1] = key;
        meta[2 * slot] = pendingFingerprint;
    }

    /** The fingerprint already matched, so "has a parent" (bit 1) matches too. */
    private boolean matches(int slot, byte[] parent, int parentOff, boolean withParent, int[] blockTokens,
                            int tokenOff) {
        if (withParent) {
            // Digests are 16 or 32 bytes: compare 8 at a time (cheaper than a range-equals call for so few).
            int p = 2 * slot * digestBytes;
            long diff = 0;
            for (int i = 0; i < digestBytes; i += 8) {
                diff |= (long) LONG_LE.get(digests, p + i) ^ (long) LONG_LE.get(parent, parentOff + i);
            }
            if (diff != 0) {
                return false;
            }
        }
        int t = slot * blockSize;
        return Arrays.equals(tokens, t, t + blockSize, blockTokens, tokenOff, tokenOff + blockSize);
    }

    /**
     * Parent digests are uniformly distributed, so 8 of their bytes seed the fingerprint; tokens are mixed four
     * lanes at a time (independent multiply chains, so the loop is not one long chain of multiply latencies).
     */
    private long fingerprint(byte[] parent, int parentOff, boolean withParent, int[] blockTokens, int tokenOff) {
        long a = withParent ? (long) LONG_LE.get(parent, parentOff) : NO_PARENT_SEED;
        long b = a ^ M2;
        long c = a + M1;
        long d = a - M2;
        int i = tokenOff;
        int end = tokenOff + blockSize;
        for (; i + 3 < end; i += 4) {
            a = (a ^ (blockTokens[i] & 0xFFFF_FFFFL)) * M1;
            b = (b ^ (blockTokens[i + 1] & 0xFFFF_FFFFL)) * M2;
            c = (c ^ (blockTokens[i + 2] & 0xFFFF_FFFFL)) * M1;
            d = (d ^ (blockTokens[i + 3] & 0xFFFF_FFFFL)) * M2;
        }
        for (; i < end; i++) {
            a = (a ^ (blockTokens[i] & 0xFFFF_FFFFL)) * M1;
        }
        b ^= Long.rotateLeft(c, 17) ^ Long.rotateLeft(d, 43);
        long h = a ^ Long.rotateLeft(b, 31);
        h ^= h >>> 33;
        h *= M1;
        h ^= h >>> 29;
        return (h & ~3L) | (withParent ? 3L : 1L);
    }
}
