package io.kvgate.dataplane.config;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.index.block.BlockIndexConfig;
import io.kvgate.index.block.LearnedKeyMap;
import io.kvgate.ingest.zmq.IngestConfig;

/**
 * How the gateway's block index and its ingest are sized from the configuration: used by the KV state that builds
 * them and by {@link MemoryBudget} that states their cost, so the two cannot disagree. Here rather than in
 * {@code dataplane.kv} because the budget is a configuration fact ({@code kv} depends on the admin API, which
 * depends on this package).
 */
public final class KvIndexSizing {
    /** Endpoint ids above this are refused (the index sizes per-endpoint arrays up front). */
    public static final int MAX_ENDPOINTS = 1024;

    private KvIndexSizing() {}

    /** The block index of a gateway whose largest rule capacity is {@code capacityBlocks}. */
    public static BlockIndexConfig indexConfig(long capacityBlocks) {
        return BlockIndexConfig.of((int) Math.min(Integer.MAX_VALUE - 8, capacityBlocks), MAX_ENDPOINTS);
    }

    /**
     * The ingest's configuration: the {@code ingest} section, and a learned-key map sized for the index (review B-7:
     * it took its 2^20-entry default, 16 MiB, even for a 1024-block index or no learned-key endpoint at all; a
     * mapping for a block the index cannot hold serves nothing).
     */
    public static IngestConfig ingestConfig(long capacityBlocks, GatewayConfig.Ingest bounds) {
        IngestConfig c = IngestConfig.of(bounds.maxFrameBytes(), bounds.receiveBufferBytes(),
            bounds.socketReceiveBufferBytes(), bounds.retryInitialMs(), bounds.retryMaxMs(), bounds.maxPeersPerBindSocket());
        return new IngestConfig(c.maxFrameBytes(), c.receiveBufferBytes(), c.socketReceiveBufferBytes(),
            c.replayTimeoutNs(), c.replayBackoffNs(), c.retryInitialNs(), c.retryMaxNs(), c.maxMessagesPerPoll(),
            LearnedKeyMap.entriesFor(capacityBlocks, c.learnedKeyCapacity()), c.hasher(), c.maxPeersPerBindSocket());
    }
}
