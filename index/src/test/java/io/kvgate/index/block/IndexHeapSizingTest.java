package io.kvgate.index.block;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.index.hash.BlockHashSpec;
import io.kvgate.index.hash.HashAlgo;
import io.kvgate.index.hash.PrefixHashCache;
import org.junit.jupiter.api.Test;

/**
 * Review B-7: the heap the index's on-heap structures take follows their configuration, and the stated formulas
 * ({@code heapBytesFor}, what {@code serve --check} prints) equal what the constructors allocate.
 */
class IndexHeapSizingTest {

    @Test
    void aReaderIsSizedByItsCandidatesAndLookupDepthNotByTheIndexEndpointIds() {
        try (BlockIndex idx = new BlockIndex(4096, 1024)) {
            BlockIndexReader small = idx.newReader(2, 256);
            BlockIndexReader wide = idx.newReader(70, 8192);
            // 4 bit sets x positions x ceil(candidates / 64) longs, stamps, candidate table, one-slot cache, key.
            assertEquals(4 * 256 * 8 + 256 * 9 + 1024 * 4 + 40 + 8, small.heapBytes());
            assertEquals(4 * 8192 * 2 * 8 + 8192 * 9 + 1024 * 4 + 40 + 8, wide.heapBytes());
            assertEquals(small.heapBytes(), BlockIndexReader.heapBytesFor(idx.config(), 2, 256));
            assertEquals(wide.heapBytes(), BlockIndexReader.heapBytesFor(idx.config(), 70, 8192));
            // The unsized reader keeps the old shape: 1024 ids x 8192 blocks, 4 MiB of bit sets.
            assertEquals(4L * 8192 * 16 * 8 + 8192 * 9 + 1024 * 4 + 40 + 8, idx.newReader().heapBytes());
        }
    }

    @Test
    void aReaderGivenMoreCandidatesThanItWasSizedForGrowsAndAnswersExactly() {
        try (BlockIndex idx = new BlockIndex(4096, 1024)) {
            long[] chain = new long[16];
            for (int i = 0; i < chain.length; i++) {
                chain[i] = 1000 + i;
            }
            for (int b = 0; b < 9; b++) {
                idx.stored(65, 0, chain[b]);
            }
            for (int b = 0; b < 4; b++) {
                idx.stored(3, 0, chain[b]);
            }
            BlockIndexReader r = idx.newReader(1, 16);
            int[] ids = new int[70];
            for (int c = 0; c < ids.length; c++) {
                ids[c] = c;
            }
            int[] out = new int[70];
            r.longestPrefix(chain, 16, ids, 70, out, null);
            int[] want = new int[70];
            want[3] = 4;
            want[65] = 9;
            assertArrayEquals(want, out);
            assertEquals(BlockIndexReader.heapBytesFor(idx.config(), 70, 16), r.heapBytes());
        }
    }

    @Test
    void theChangeLogIsAllocatedOnlyWhereReadersCache() {
        try (BlockIndex caching = new BlockIndex(4096, 8); BlockIndex wide = new BlockIndex(4096, 1024)) {
            assertEquals(1 << 16, caching.changeLogCapacity());
            assertEquals(16, wide.changeLogCapacity());
            assertEquals(2L * (1024 * 8 * 3 + 1) * 8 + 1024 * 8 * 4 + 1024 * 8 + 1024 * 8 + 2 * 256 * 8 + 16 * 32 + 8,
                BlockIndex.heapBytesFor(wide.config(), 2));
        }
    }

    @Test
    void theHashMemoAndOverlayFollowTheRuleCapacity() {
        BlockHashSpec spec = BlockHashSpec.vllm(HashAlgo.SHA256_CBOR, 16, "0", null);
        assertEquals(1024, PrefixHashCache.entriesFor(1024));
        assertEquals(1 << 16, PrefixHashCache.entriesFor(1_000_000));
        PrefixHashCache small = new PrefixHashCache(spec, PrefixHashCache.entriesFor(1024));
        assertEquals(1024L * (2 * 8 + 2 * 32 + 16 * 4), small.heapBytes());
        assertEquals(small.heapBytes(), PrefixHashCache.heapBytesFor(spec, 1024));
        assertEquals(65536L * (2 * 8 + 2 * 32 + 16 * 4), PrefixHashCache.heapBytesFor(spec, PrefixHashCache.entriesFor(1_000_000)));

        assertEquals(1024, SpeculativeOverlay.entriesFor(1024));
        assertEquals(1 << 17, SpeculativeOverlay.entriesFor(1_000_000));
        SpeculativeOverlay o = new SpeculativeOverlay(SpeculativeOverlay.entriesFor(1024), 1_000_000, new ManualClock());
        assertEquals(2048L * 2 * (8 + 4 + 8), o.heapBytes());
        assertEquals(o.heapBytes(), SpeculativeOverlay.heapBytesFor(1024));

        assertEquals(2048, LearnedKeyMap.entriesFor(1024, 1 << 20));
        assertEquals(1 << 20, LearnedKeyMap.entriesFor(2_000_000, 1 << 20));
        LearnedKeyMap m = new LearnedKeyMap(LearnedKeyMap.entriesFor(1024, 1 << 20));
        assertEquals(2048L * 16, m.heapBytes());
        assertEquals(m.heapBytes(), LearnedKeyMap.heapBytesFor(2048));
    }
}
