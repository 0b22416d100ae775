package io.kvgate.index.block;

/**
 * Encoding of one block's holder list as stored in the off-heap map: a packed sequence of 32-bit cells, one per
 * holder, in native int order.
 *
 * <pre>
 *  bits 31..19  endpointId (13 bits, 0..8191)
 *  bits 18..16  dpRank     (3 bits, 0..7)
 *  bits 15..0   refCount   (16 bits, 1..65535; saturates, see below)
 * </pre>
 *
 * Why a reference count per holder: vLLM does not de-duplicate; the same hash can be stored twice (e.g. GPU and CPU
 * tier, or two requests racing) and is removed once per copy. A count that reaches {@link #MAX_REF} is sticky (never
 * decremented) so that an absurd duplicate storm degrades to "held until the rank is cleared" rather than an early,
 * wrong removal. 4 bytes per (block, rank) keeps the membership cost inside the 32-byte budget.
 *
 * <p>Stateless helpers only; thread-safe.
 */
public final class Holders {
    /** Largest endpoint id the cell format can carry (exclusive bound). */
    public static final int MAX_ENDPOINTS = 1 << 13;
    /** Ranks per endpoint the cell format can carry (exclusive bound). */
    public static final int MAX_RANKS = 8;
    /** Sticky saturation value of the per-holder reference count. */
    public static final int MAX_REF = 0xFFFF;
    /** Bytes per holder cell as the read API returns it ({@link BlockIndexReader#holders}). */
    public static final int CELL_BYTES = 4;

    /**
     * Bytes per stored membership word in the off-heap map: the 32-bit cell above in the low half, and in the high
     * half the memory tier (bits 33..32) and the holder's generation (bits 63..34) at the time of the store. A word
     * whose generation is not the holder's current one belongs to a cleared holder: readers ignore it and the
     * writer drops it when it next touches the block (O(1) clears, see {@link BlockIndex#clearRank}).
     */
    public static final int WORD_BYTES = 8;

    /** Memory tiers the index distinguishes (from the event's {@code medium}). */
    public static final int TIER_GPU = 0;
    public static final int TIER_CPU = 1;
    public static final int TIER_DISK = 2;
    /** For removals without a medium: any tier of the holder (the fastest first). */
    public static final int TIER_ANY = -1;
    /** Generations are 30 bits; see {@link BlockIndex#clearRank} for what happens at the wrap. */
    public static final int MAX_GENERATION = (1 << 30) - 1;

    public static String tierName(int tier) {
        return switch (tier) {
            case TIER_GPU -> "GPU";
            case TIER_CPU -> "CPU_TIER";
            default -> "DISK";
        };
    }

    static long word(int cell, int tier, int generation) {
        return (cell & 0xFFFFFFFFL) | ((long) tier << 32) | ((long) generation << 34);
    }

    static int cellOf(long word) {
        return (int) word;
    }

    static int tierOf(long word) {
        return (int) (word >>> 32) & 3;
    }

    static int generationOf(long word) {
        return (int) (word >>> 34);
    }

    private Holders() {
    }

    /** A holder id: endpointId * 8 + rank (16 bits). */
    public static int holder(int endpointId, int rank) {
        return (endpointId << 3) | rank;
    }

    public static int cell(int endpointId, int rank, int refCount) {
        return (endpointId << 19) | (rank << 16) | refCount;
    }

    public static int endpointOf(int cell) {
        return cell >>> 19;
    }

    public static int rankOf(int cell) {
        return (cell >>> 16) & 7;
    }

    /** endpointId * 8 + rank. */
    public static int holderOf(int cell) {
        return cell >>> 16;
    }

    public static int refOf(int cell) {
        return cell & 0xFFFF;
    }
}
