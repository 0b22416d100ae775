package io.kvgate.tools.sim;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.math.BigInteger;
import java.util.ArrayDeque;

/**
 * TensorRT-LLM's KV cache events as {@code trtllm-serve} hands them out: a bounded buffer
 * ({@code event_buffer_max_size}; when full the oldest event is dropped) that {@code POST /kv_cache_events} drains —
 * each read returns the events since the previous read and removes them. Event JSON as
 * {@code tensorrt_llm._utils.KVCacheEventSerializer} writes it:
 * <pre>
 * {"event_id": N, "data": {...}, "window_size": W [, "attention_dp_rank": r]}
 * data: {"type":"created","num_blocks_per_cache_level":[gpu, host]}
 *       {"type":"stored","parent_hash": h|null,"blocks":[{"type":"stored_block","block_hash": h,
 *            "tokens":[{"type":"unique_token","token_id": t,"token_extra_id": 0}, ...],"cache_level": 0,"priority": 35}]}
 *       {"type":"removed","block_hashes":[h, ...]}
 * </pre>
 * Hashes are unsigned 64-bit ({@code size_t}); with KV cache manager V2 each event also names its {@code hash_algo},
 * and under {@code v2_sha256} every hash is a 64-digit hex string ({@code block_key.hex()} in V2's
 * {@code _normalize_block_hash}): here the key's 16 hex digits followed by 48 derived from it, so a reader that folds
 * the first 8 bytes gets the key back. Event ids count per attention-DP rank from 0 in each process, so a
 * reader sees a jump when the buffer overflowed and a reset when the engine restarted. ({@code updated} events —
 * priority or cache-level changes — are not produced: the simulator has no secondary cache level.)
 *
 * <p>Engine-loop confined.
 */
final class TrtllmKvEvents {
    /** TensorRT-LLM's default retention priority of a stored block. */
    static final int DEFAULT_PRIORITY = 35;
    private static final JsonNodeFactory JSON = JsonNodeFactory.instance;

    private final int capacity;
    private final int windowSize;
    private final int ranks;
    private final int blocksPerRank;
    private final long[] nextEventId;
    /** {@link SimulatorConfig#trtllmHashAlgo}: legacy (no hash_algo key), v1_block_key or v2_sha256 (hex strings). */
    private final String hashAlgo;
    private final boolean hexHashes;
    private final ArrayDeque<ObjectNode> buffer = new ArrayDeque<>();
    private long dropped;

    TrtllmKvEvents(int capacity, int windowSize, int ranks, int blocksPerRank, String hashAlgo) {
        this.hashAlgo = "legacy".equals(hashAlgo) ? null : hashAlgo;
        this.hexHashes = "v2_sha256".equals(hashAlgo);
        this.capacity = capacity;
        this.windowSize = windowSize;
        this.ranks = ranks;
        this.blocksPerRank = blocksPerRank;
        this.nextEventId = new long[ranks];
    }

    /** A new engine process: ids restart at 0 and each rank announces its pools. */
    void start() {
        buffer.clear();
        for (int r = 0; r < ranks; r++) {
            nextEventId[r] = 0;
            ObjectNode data = JSON.objectNode();
            data.put("type", "created");
            data.putArray("num_blocks_per_cache_level").add(blocksPerRank).add(0);
            add(r, data);
        }
    }

    void stored(int rank, long[] keys, int from, int to, boolean hasParent, long parent, int[] tokens, int blockSize) {
        ObjectNode data = JSON.objectNode();
        data.put("type", "stored");
        if (hasParent) {
            data.set("parent_hash", hash(parent));
        } else {
            data.putNull("parent_hash");
        }
        ArrayNode blocks = data.putArray("blocks");
        for (int b = from; b < to; b++) {
            ObjectNode block = blocks.addObject();
            block.put("type", "stored_block");
            block.set("block_hash", hash(keys[b]));
            ArrayNode toks = block.putArray("tokens");
            for (int i = b * blockSize; i < (b + 1) * blockSize; i++) {
                toks.addObject().put("type", "unique_token").put("token_id", tokens[i]).put("token_extra_id", 0);
            }
            block.put("cache_level", 0);
            block.put("priority", DEFAULT_PRIORITY);
        }
        add(rank, data);
    }

    void removed(int rank, long[] keys, int count) {
        ObjectNode data = JSON.objectNode();
        data.put("type", "removed");
        ArrayNode hashes = data.putArray("block_hashes");
        for (int i = 0; i < count; i++) {
            hashes.add(hash(keys[i]));
        }
        add(rank, data);
    }

    private void add(int rank, ObjectNode data) {
        if (capacity == 0) {
            nextEventId[rank]++;
            return;
        }
        ObjectNode e = JSON.objectNode();
        e.put("event_id", nextEventId[rank]++);
        e.set("data", data);
        e.put("window_size", windowSize);
        if (hashAlgo != null) {
            e.put("hash_algo", hashAlgo);
        }
        if (ranks > 1) {
            e.put("attention_dp_rank", rank);
        }
        if (buffer.size() == capacity) {
            buffer.pollFirst();
            dropped++;
        }
        buffer.addLast(e);
    }

    /** {@code POST /kv_cache_events}: everything since the previous read, removed from the buffer. */
    ArrayNode drain() {
        ArrayNode out = JSON.arrayNode(buffer.size());
        ObjectNode e;
        while ((e = buffer.pollFirst()) != null) {
            out.add(e);
        }
        return out;
    }

    /** Events lost to a full buffer since start (stats). */
    long dropped() {
        return dropped;
    }

    /** A hash as the configured form writes it: an unsigned integer, or (v2_sha256) 64 hex digits. */
    private com.fasterxml.jackson.databind.JsonNode hash(long key) {
        if (!hexHashes) {
            return JSON.numberNode(unsigned(key));
        }
        StringBuilder hex = new StringBuilder(64).append(String.format("%016x", key));
        long x = key;
        for (int i = 0; i < 3; i++) {
            x = x * 0x9E3779B97F4A7C15L + 0x632BE59BD9B4E019L; // the rest of a digest: any bytes, fixed per key
            hex.append(String.format("%016x", x));
        }
        return JSON.textNode(hex.toString());
    }

    private static BigInteger unsigned(long v) {
        return new BigInteger(Long.toUnsignedString(v));
    }
}
