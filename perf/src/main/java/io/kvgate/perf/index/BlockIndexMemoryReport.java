package io.kvgate.perf.index;

import java.util.SplittableRandom;

import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.BlockIndexConfig;

/**
 * Bytes per (block, endpoint) membership of the off-heap index, filled to {@code memberships} memberships with
 * {@code holders} endpoints per block (each on its own rank 0..7), capacity sized exactly to the blocks.
 * Usage: {@code BlockIndexMemoryReport [memberships=10000000] [holders=1,2,4]}
 */
public final class BlockIndexMemoryReport {
    private BlockIndexMemoryReport() {
    }

    public static void main(String[] args) {
        long memberships = args.length > 0 ? Long.parseLong(args[0]) : 10_000_000L;
        String[] holderCounts = (args.length > 1 ? args[1] : "1,2,4").split(",");
        System.out.println("| holders/block | blocks | memberships | off-heap bytes | bytes/membership | bytes/block "
            + "| fill ns/op |");
        System.out.println("|---|---|---|---|---|---|---|");
        for (String h : holderCounts) {
            int holders = Integer.parseInt(h.trim());
            int blocks = (int) (memberships / holders);
            SplittableRandom rnd = new SplittableRandom(holders);
            try (BlockIndex index = new BlockIndex(new BlockIndexConfig(blocks, 64, holders, 8192,
                BlockIndexConfig.defaultHotCacheEntries(blocks)))) {
                long t0 = System.nanoTime();
                for (int b = 0; b < blocks; b++) {
                    long key = rnd.nextLong();
                    int first = rnd.nextInt(64);
                    for (int i = 0; i < holders; i++) {
                        index.stored((first + i * 7) & 63, i & 7, key);
                    }
                }
                long ns = System.nanoTime() - t0;
                long bytes = index.sizeBytes();
                System.out.printf("| %d | %,d | %,d | %,d | %.1f | %.1f | %.0f |%n", holders, index.size(),
                    index.memberships(), bytes, (double) bytes / index.memberships(), (double) bytes / index.size(),
                    (double) ns / ((long) blocks * holders));
                if (index.evictions() != 0 || index.insertFailures() != 0) {
                    System.out.println("  (evictions=" + index.evictions() + " insertFailures="
                        + index.insertFailures() + ")");
                }
            }
        }
    }
}
