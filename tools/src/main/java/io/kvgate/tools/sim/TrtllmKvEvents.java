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
 * Hashes are unsigned 64-bit ({@code size_t}). Event ids count per attention-DP rank from 0 in each process, so a
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
    private final ArrayDeque<ObjectNode> buffer = new ArrayDeque<>();
    private long dropped;

    TrtllmKvEvents(int capacity, int windowSize, int ranks, int blocksPerRank) {
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
            data.put("parent_hash", unsigned(parent));
        } else {
            data.putNull("parent_hash");
        }
        ArrayNode blocks = data.putArray("blocks");
        for (int b = from; b < to; b++) {
            ObjectNode block = blocks.addObject();
            block.put("type", "stored_block");
            block.put("block_hash", unsigned(keys[b]));
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
            hashes.add(unsigned(keys[i]));
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

    private static BigInteger unsigned(long v) {
        return new BigInteger(Long.toUnsignedString(v));
    }
}
