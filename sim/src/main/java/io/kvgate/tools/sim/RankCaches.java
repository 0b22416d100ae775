package io.kvgate.tools.sim;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;

/**
 * The prefix cache of every DP rank and the KV events it publishes (engine-contracts §2-3): block keys are computed
 * by the dialect's {@link BlockKeyer} (cache salt and, on vLLM, the LoRA name included), each cache change becomes
 * an event, and the events of one engine step go out as one batch with the rank's next sequence number.
 *
 * <p>Engine-loop confined (single writer); the publisher's socket thread only sees finished payloads.
 */
final class RankCaches implements AutoCloseable {
    private final SimulatorConfig config;
    private final SimStats stats;
    /** Replaced on restart for TensorRT-LLM, whose internal hashes change with the process. */
    private BlockKeyer keyer;
    private final int blockSize;
    private final PrefixCache[] caches;
    private final KvEventEncoder[] encoders;
    private final long[] eventSeq;
    private final KvEventPublisher publisher;
    /** TensorRT-LLM: the drained JSON event buffer instead of msgpack batches (null for the other dialects). */
    private final TrtllmKvEvents trtllmEvents;
    // the request being stored: its salt and adapter go into the BlockStored events the cache emits
    private String storingSalt;
    private int storingLoraId;
    private String storingLoraName;
    /**
     * SGLang with a LoRA adapter: the radix tree keys blocks by (tokens, adapter), but the event hash ignores the
     * adapter, so a cached block's published key differs from its cache key. Aligned with the keys being stored;
     * null when they are the same.
     */
    private long[] storingEventKeys;
    /** Per rank: cache key → published key, for the blocks whose two keys differ (SGLang LoRA blocks). */
    private final java.util.List<java.util.HashMap<Long, Long>> publishedKeyOf;
    private long[] removedScratch = new long[64];
    /**
     * vLLM hybrid model ({@code --hybrid-group}): the fine hashes of the prompt being stored (every
     * {@link SimulatorConfig#hashBlockSize()} tokens; a full-attention block is named by the last fine hash it covers),
     * and per rank the fine hashes behind each cached full block, for the second group's removals. Null otherwise.
     */
    private long[] storingFineKeys;
    private final java.util.List<java.util.HashMap<Long, long[]>> fineKeysOf;
    private final int fineFactor;
    /** Test tap: every published batch (rank, payload), or null. */
    private java.util.function.BiConsumer<Integer, byte[]> batchTap;

    RankCaches(SimulatorConfig config, SimStats stats) {
        this.config = config;
        this.stats = stats;
        this.keyer = BlockKeyer.forAlgo(config.effectiveHashAlgo(), config.hashSeed);
        this.blockSize = config.effectiveBlockSize();
        int ranks = config.dpRanks;
        this.caches = new PrefixCache[ranks];
        this.encoders = new KvEventEncoder[ranks];
        this.eventSeq = new long[ranks];
        boolean sglang = config.dialect == Dialect.SGLANG;
        this.publishedKeyOf = new java.util.ArrayList<>(ranks);
        this.fineKeysOf = config.hybridGroupKind == null ? null : new java.util.ArrayList<>(ranks);
        this.fineFactor = blockSize / config.hashBlockSize();
        this.trtllmEvents = config.dialect == Dialect.TRTLLM && !config.trtllmStreaming()
            ? new TrtllmKvEvents(config.kvEventBuffer(), config.contextLen, ranks, config.cacheBlocks, config.trtllmHashAlgo) : null;
        for (int r = 0; r < ranks; r++) {
            final int rank = r;
            publishedKeyOf.add(new java.util.HashMap<>());
            if (fineKeysOf != null) {
                fineKeysOf.add(new java.util.HashMap<>());
            }
            KvEventEncoder enc = config.trtllmStreaming() ? KvEventEncoder.trtllmStreaming()
                : new KvEventEncoder(config.eventForm, keyer.unsignedKeys(), sglang);
            encoders[r] = enc;
            caches[r] = new PrefixCache(config.cacheBlocks, new PrefixCache.Listener() {
                @Override
                public void onStored(long[] keys, int from, int to, boolean hasParent, long parent, int[] tokens,
                                     int bs) {
                    stats.add("blocks_stored", to - from);
                    if (trtllmEvents != null) {
                        trtllmEvents.stored(rank, keys, from, to, hasParent, parent, tokens, bs);
                        return;
                    }
                    long[] published = keys;
                    long publishedParent = parent;
                    if (storingEventKeys != null) {
                        for (int i = from; i < to; i++) {
                            publishedKeyOf.get(rank).put(keys[i], storingEventKeys[i]);
                        }
                        published = storingEventKeys;
                        publishedParent = from > 0 ? storingEventKeys[from - 1] : parent;
                    }
                    if (fineKeysOf != null) {
                        hybridStored(rank, enc, keys, from, to, hasParent, parent, tokens, bs);
                        return;
                    }
                    enc.blockStored(published, from, to, hasParent, publishedParent, tokens, bs, storingSalt,
                        storingLoraId, storingLoraName);
                }

                @Override
                public void onRemoved(long[] keys, int count) {
                    stats.add("blocks_evicted", count);
                    if (trtllmEvents != null) {
                        trtllmEvents.removed(rank, keys, count);
                        return;
                    }
                    if (fineKeysOf != null) {
                        hybridRemoved(rank, enc, keys, count);
                        return;
                    }
                    java.util.HashMap<Long, Long> map = publishedKeyOf.get(rank);
                    if (map.isEmpty()) {
                        enc.blockRemoved(keys, count);
                        return;
                    }
                    if (removedScratch.length < count) {
                        removedScratch = new long[count];
                    }
                    for (int i = 0; i < count; i++) {
                        Long published = map.remove(keys[i]);
                        removedScratch[i] = published != null ? published : keys[i];
                    }
                    enc.blockRemoved(removedScratch, count);
                }
            });
        }
        this.publisher = config.kvEventsEndpoint == null ? null
            : new KvEventPublisher(config, stats, config.kvEventsBind());
        if (trtllmEvents != null) {
            trtllmEvents.start();
        }
    }

    /**
     * A hybrid model's stored run: the full-attention group (group_idx 0) announces its blocks, each named by the last
     * fine hash it covers, then the second group announces its own copies at the fine granularity (the same hash chain,
     * as every group of a vLLM hybrid model shares the request's block hashes).
     */
    private void hybridStored(int rank, KvEventEncoder enc, long[] keys, int from, int to, boolean hasParent, long parent,
                              int[] tokens, int bs) {
        enc.group(0, "full_attention");
        enc.blockStored(keys, from, to, hasParent, parent, tokens, bs, storingSalt, storingLoraId, storingLoraName);
        long[] fine = storingFineKeys;
        int k = fineFactor;
        for (int i = from; i < to; i++) {
            fineKeysOf.get(rank).put(keys[i], java.util.Arrays.copyOfRange(fine, i * k, (i + 1) * k));
        }
        enc.group(1, config.hybridGroupKind);
        // The fine run's parent is the fine hash before it: the coarse parent itself (the last fine hash of that block).
        enc.blockStored(fine, from * k, to * k, hasParent, parent, tokens, bs / k, storingSalt, storingLoraId,
            storingLoraName);
        enc.group(-1, null);
    }

    /** A hybrid model's eviction: the full group's blocks, and the second group's copies of them. */
    private void hybridRemoved(int rank, KvEventEncoder enc, long[] keys, int count) {
        enc.group(0, "full_attention");
        enc.blockRemoved(keys, count);
        java.util.List<Long> fine = new java.util.ArrayList<>();
        for (int i = 0; i < count; i++) {
            long[] f = fineKeysOf.get(rank).remove(keys[i]);
            if (f != null) {
                for (long x : f) {
                    fine.add(x);
                }
            }
        }
        if (!fine.isEmpty()) {
            enc.group(1, config.hybridGroupKind);
            enc.blockRemoved(fine.stream().mapToLong(Long::longValue).toArray(), fine.size());
        }
        enc.group(-1, null);
    }

    /** TensorRT-LLM {@code POST /kv_cache_events}: the buffered events, removed from the buffer. */
    com.fasterxml.jackson.databind.node.ArrayNode drainTrtllmEvents() {
        if (trtllmEvents == null) {
            // Streaming mode: the events went out over ZeroMQ and the pull API returns an empty list
            // (StreamingKVCacheEventManager.get_latest_events).
            return com.fasterxml.jackson.databind.node.JsonNodeFactory.instance.arrayNode();
        }
        return trtllmEvents.drain();
    }

    int blockSize() {
        return blockSize;
    }

    int ranks() {
        return caches.length;
    }

    /** Seq of the rank's last published event batch, -1 before the first. */
    long lastEventSeq(int rank) {
        return eventSeq[rank] - 1;
    }

    /** Blocks cached on a rank (referenced or evictable). */
    int cachedBlocks(int rank) {
        return caches[rank].size();
    }

    /**
     * Fraction of the rank's blocks held by running requests: what vLLM's {@code kv_cache_usage_perc} and SGLang's
     * {@code token_usage} report (both count evictable cached blocks as free).
     */
    double usage(int rank) {
        PrefixCache c = caches[rank];
        return (double) (c.size() - c.freeQueueLength()) / config.cacheBlocks;
    }

    /**
     * References the cached prefix of each of the generation's prompts and stores the rest, then publishes the
     * step's events. Sets the generation's leases and cached-token count.
     */
    void acquire(Generation g) {
        PrefixCache cache = caches[g.rank];
        JsonNode salt = g.req.body.get("cache_salt");
        storingSalt = salt != null && salt.isTextual() ? salt.asText() : null;
        LoraAdapters.Adapter lora = g.req.lora;
        // SGLang's page hash does not include the adapter (engine-contracts §3.2); vLLM's block hash does.
        String hashedLora = lora != null && config.dialect == Dialect.VLLM ? lora.name() : null;
        storingLoraId = lora != null ? lora.id() : 0;
        storingLoraName = hashedLora;
        boolean separateRadix = lora != null && config.dialect == Dialect.SGLANG;
        int cached = 0;
        for (int[] prompt : g.req.prompts) {
            long[] keys;
            if (fineKeysOf != null) {
                // vLLM hashes a hybrid model every gcd(group block sizes) tokens; a full block is its last fine hash.
                long[] fine = keyer.blockKeys(prompt, config.hashBlockSize(), storingSalt, hashedLora);
                keys = new long[fine.length / fineFactor];
                for (int i = 0; i < keys.length; i++) {
                    keys[i] = fine[(i + 1) * fineFactor - 1];
                }
                storingFineKeys = fine;
            } else {
                keys = keyer.blockKeys(prompt, blockSize, storingSalt, hashedLora);
            }
            if (separateRadix) {
                storingEventKeys = keys;
                keys = radixKeys(keys, lora.id());
            }
            PrefixCache.Lease lease = cache.acquire(keys, prompt, blockSize);
            g.leases.add(lease);
            cached += lease.cachedTokens;
        }
        storingEventKeys = null;
        storingFineKeys = null;
        storingSalt = null;
        storingLoraId = 0;
        storingLoraName = null;
        g.cachedTokens = cached;
        stats.inc("cache_queries");
        if (cached > 0) {
            stats.inc("cache_hit_requests");
            stats.add("cached_tokens", cached);
        }
        flushEvents(g.rank);
    }

    /**
     * SGLang keys its radix tree by (tokens, LoRA id), so an adapter's blocks never serve the base model or another
     * adapter in the engine, while the events it publishes carry the adapter-blind page hash. The simulator's cache
     * key mixes the adapter id into the page hash (splitmix64 finalizer); only the engine sees it.
     */
    private static long[] radixKeys(long[] pageHashes, int loraId) {
        long[] out = new long[pageHashes.length];
        for (int i = 0; i < out.length; i++) {
            long z = pageHashes[i] ^ (0x9E3779B97F4A7C15L * loraId);
            z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
            z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
            out[i] = z ^ (z >>> 31);
        }
        return out;
    }

    /** Gives the generation's blocks back to its rank's cache (they stay cached, now evictable). */
    void release(Generation g) {
        for (PrefixCache.Lease lease : g.leases) {
            caches[g.rank].release(lease);
        }
        g.leases.clear();
    }

    /** Publishes {@code AllBlocksCleared} on every rank (SGLang at startup; cache resets). */
    void announceCleared() {
        if (config.dialect == Dialect.TRTLLM) {
            return; // TensorRT-LLM sends no such event (its streaming sink publishes stores and removals only)
        }
        for (int r = 0; r < encoders.length; r++) {
            encoders[r].allBlocksCleared();
            flushEvents(r);
        }
    }

    /** Same process, every cache emptied, {@code AllBlocksCleared} published; sequence numbers continue. */
    void resetPrefixCache() {
        for (PrefixCache c : caches) {
            c.clear();
        }
        for (java.util.HashMap<Long, Long> m : publishedKeyOf) {
            m.clear();
        }
        announceCleared();
    }

    /** A new engine process: caches empty, sequence numbers and replay buffers start over. */
    void restart() {
        for (int r = 0; r < caches.length; r++) {
            caches[r].clear();
            publishedKeyOf.get(r).clear();
            eventSeq[r] = 0;
            if (publisher != null) {
                publisher.reset(r);
            }
        }
        if (config.dialect == Dialect.SGLANG) {
            announceCleared();
        }
        if (trtllmEvents != null) {
            keyer = BlockKeyer.forAlgo(config.effectiveHashAlgo(), config.hashSeed);
            trtllmEvents.start();
        }
    }

    /** Publishes the rank's pending events as one batch (one engine step), with the next seq. */
    private void flushEvents(int rank) {
        if (trtllmEvents != null) {
            return; // buffered until drained
        }
        KvEventEncoder enc = encoders[rank];
        if (enc.isEmpty()) {
            return;
        }
        byte[] payload = enc.finishBatch(System.currentTimeMillis() / 1000.0, rank);
        long seq = eventSeq[rank]++;
        if (batchTap != null) {
            batchTap.accept(rank, payload);
        }
        if (publisher != null) {
            publisher.offer(rank, seq, payload);
        }
    }

    /**
     * Publishes a ready payload frame as the rank's next batch ({@code --kv-flood}), through the same seq counter,
     * tap and publisher as the engine's own batches. Engine loop.
     */
    void publishBatch(int rank, byte[] payload) {
        long seq = eventSeq[rank]++;
        stats.inc("flood_batches");
        if (batchTap != null) {
            batchTap.accept(rank, payload);
        }
        if (publisher != null) {
            publisher.offer(rank, seq, payload);
        }
    }

    /** Test instrumentation: sees every published batch payload. Engine loop. */
    void tapBatches(java.util.function.BiConsumer<Integer, byte[]> tap) {
        this.batchTap = tap;
    }

    String describe() {
        StringBuilder sb = new StringBuilder();
        if (config.kvEventsEndpoint != null) {
            sb.append(", kv events ").append(config.kvEventsBind() ? "bound at " : "connecting to ")
                .append(config.kvEventsEndpoint).append(config.dpRanks > 1 ? " (+rank)" : "");
        }
        if (config.kvReplayEndpoint != null) {
            sb.append(", replay ").append(config.kvReplayEndpoint);
        }
        return sb.toString();
    }

    @Override
    public void close() {
        if (publisher != null) {
            publisher.close();
        }
    }
}
