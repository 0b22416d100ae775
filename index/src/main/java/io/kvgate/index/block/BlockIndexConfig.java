package io.kvgate.index.block;

/**
 * Sizing of a {@link BlockIndex}, validated once at construction.
 *
 * @param capacityBlocks     hard capacity in distinct blocks (config rule key {@code kv_capacity_blocks}); the
 *                           off-heap map is sized for exactly this many entries up front
 * @param maxEndpoints       endpoint ids are {@code 0..maxEndpoints-1} (assigned by the gateway), at most 8192
 * @param avgHoldersPerBlock expected (block, rank) memberships per block, used only to size map entries; a
 *                           wrong guess costs memory or an extra chunk per entry, never correctness
 * @param maxPromptBlocks    longest prompt (in blocks) a lookup considers; longer prompts are scored on their
 *                           first {@code maxPromptBlocks} blocks
 * @param hotCacheEntries    slots of each reader's on-heap cache of probed blocks (40 bytes each; 0 disables it;
 *                           only used with at most 64 endpoints), see {@link BlockIndexReader}
 */
public record BlockIndexConfig(int capacityBlocks, int maxEndpoints, int avgHoldersPerBlock, int maxPromptBlocks,
                               int hotCacheEntries) {

    public static final int DEFAULT_AVG_HOLDERS_PER_BLOCK = 2;
    public static final int DEFAULT_MAX_PROMPT_BLOCKS = 8192;

    public BlockIndexConfig {
        if (capacityBlocks < 16 || capacityBlocks > 1_000_000_000) {
            throw new IllegalArgumentException(
                "kv_capacity_blocks=" + capacityBlocks + " must be in 16..1000000000");
        }
        if (maxEndpoints < 1 || maxEndpoints > Holders.MAX_ENDPOINTS) {
            throw new IllegalArgumentException(
                "maxEndpoints=" + maxEndpoints + " must be in 1.." + Holders.MAX_ENDPOINTS);
        }
        if (avgHoldersPerBlock < 1 || avgHoldersPerBlock > 64) {
            throw new IllegalArgumentException(
                "avgHoldersPerBlock=" + avgHoldersPerBlock + " must be in 1..64");
        }
        if (hotCacheEntries < 0 || hotCacheEntries > 1 << 28) {
            throw new IllegalArgumentException(
                "hotCacheEntries=" + hotCacheEntries + " must be in 0..268435456");
        }
        if (maxPromptBlocks < 1 || maxPromptBlocks > 1 << 20) {
            throw new IllegalArgumentException(
                "maxPromptBlocks=" + maxPromptBlocks + " must be in 1..1048576");
        }
    }

    /**
     * Blocks a rule's lookup considers: the full blocks of its longest admitted prompt ({@code max_prompt_tokens} /
     * {@code block_size}: a longer prompt is refused before routing), at most {@link #maxPromptBlocks()}. Readers and
     * key arrays are sized by it.
     */
    public int lookupDepthBlocks(int maxPromptTokens, int blockSize) {
        return Math.max(1, Math.min(maxPromptBlocks, maxPromptTokens / Math.max(1, blockSize)));
    }

    public static BlockIndexConfig of(int capacityBlocks, int maxEndpoints) {
        return new BlockIndexConfig(capacityBlocks, maxEndpoints, DEFAULT_AVG_HOLDERS_PER_BLOCK,
            DEFAULT_MAX_PROMPT_BLOCKS, defaultHotCacheEntries(capacityBlocks));
    }

    /** 2^16 slots (2.5 MiB per reader): the prompts being routed now, not the whole inventory. */
    public static int defaultHotCacheEntries(int capacityBlocks) {
        return 1 << 16;
    }
}
