package io.kvgate.index.block;

/**
 * The gateway's own chained block hash, for learned-key mode: engines whose block hashes cannot be reproduced
 * (vLLM with PYTHONHASHSEED unset draws its root hash from os.urandom; the default {@code sha256} pickles) are
 * indexed by this hash of the {@code token_ids} their events carry, and requests are scored by the same hash of
 * the prompt's tokens. Both sides must use the same implementation and the same token cells (in SGLang EAGLE
 * bigram mode a cell is the pair {@code (t[j], t[j+1])}, so both sides feed 2 ints per cell).
 *
 * <p>Implementations must be pure functions (thread-safe, no allocation) and must never return 0 for a block
 * key (0 marks an empty slot in {@link LearnedKeyMap}).
 */
public interface ChainedTokenHasher {
    /** The parent key of a sequence's first block. */
    long rootKey();

    /** Key of the block holding {@code tokens[offset..offset+length)}, chained on its parent's key. */
    long blockKey(long parentKey, int[] tokens, int offset, int length);
}
