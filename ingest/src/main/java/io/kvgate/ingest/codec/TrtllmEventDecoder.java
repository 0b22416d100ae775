package io.kvgate.ingest.codec;

import java.io.IOException;
import java.math.BigInteger;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;

/**
 * Decodes one response body of TensorRT-LLM's draining {@code POST /kv_cache_events} (a JSON array of events, as
 * {@code tensorrt_llm._utils.KVCacheEventSerializer} writes them) and delivers the events to a
 * {@link KvEventHandler}, each announced first to a {@link EventListener} with its id and attention-DP rank.
 *
 * <p>Shapes (checked against TensorRT-LLM's serializer; fixtures in the tests):
 * <pre>
 * {"event_id": N, "data": {...}, "window_size": W [, "attention_dp_rank": r]}
 * created: {"type":"created","num_blocks_per_cache_level":[primary, secondary]}
 * stored:  {"type":"stored","parent_hash": h|null,"blocks":[{"type":"stored_block","block_hash": h,
 *            "tokens":[{"type":"unique_token","token_id": t,"token_extra_id": x}, ...],"cache_level": c,"priority": p}]}
 * removed: {"type":"removed","block_hashes":[h, ...]}
 * updated: {"type":"updated","block_hash": h,"cache_level":{"type":"event_diff","new_value": n,"old_value": o},
 *           "priority":{"type":"event_diff", ...}}
 * </pre>
 * Hashes are the engine's {@code size_t}: unsigned 64-bit, kept as the same 64-bit pattern. Keys may come in any
 * order ({@code data} usually precedes {@code attention_dp_rank}), so each event is parsed whole before anything is
 * delivered; unknown keys and unknown data types are skipped (the latter counted).
 *
 * <p>Mapping to the handler: {@code created} (a new engine process announcing its pools) is an
 * {@link KvEventHandler#onAllBlocksCleared()} of its rank; each stored block is one
 * {@link KvEventHandler#onBlockStored} of one block whose parent is the previous block of the event (the first
 * one's is {@code parent_hash}), its block size the block's own token count; {@code cache_level} 0 is the GPU pool,
 * 1 the host pool ({@link Medium#GPU}, {@link Medium#CPU}); {@code removed} is one
 * {@link KvEventHandler#onBlockRemoved} without a medium; an {@code updated} whose {@code cache_level} changed is an
 * {@link KvEventHandler#onBlockMoved} (offload to / onboard from host memory), priority-only updates carry nothing
 * the router uses. A block whose tokens carry a non-zero {@code token_extra_id} (multimodal content the gateway's
 * token ids do not identify) is not delivered, nor are the blocks after it in the same event (their chain runs
 * through it): a cold window, never a wrong hit ({@link #droppedExtraIdBlocks()}).
 *
 * <p><b>Malformed input</b> never escapes: {@link #decode} returns {@link #MALFORMED} after the complete events
 * before the break were delivered; the caller treats it like a gap (a drained body is gone, and its lost part may
 * have held removals). The body is bounded by the caller ({@code ingest.max_frame_bytes}), and so are the growable
 * per-event buffers.
 *
 * <p><b>Threading contract:</b> one decoder per ingest thread; not thread-safe.
 */
public final class TrtllmEventDecoder {
    public static final int MALFORMED = -1;

    /** Called before each event's handler callbacks. */
    public interface EventListener {
        /**
         * @param eventId    the event's {@code event_id}
         * @param dpRank     its {@code attention_dp_rank}, 0 when absent
         * @param windowSize its {@code window_size}, -1 when absent
         * @return false to skip the event (its callbacks are not made)
         */
        boolean onEvent(long eventId, int dpRank, long windowSize);
    }

    /** TensorRT-LLM's cache levels: 0 = primary (GPU) pool, 1 = secondary (host) pool. */
    static int mediumOfCacheLevel(long level) {
        return level == 0 ? Medium.GPU : level == 1 ? Medium.CPU : Medium.OTHER;
    }

    private static final BigInteger TWO_64 = BigInteger.ONE.shiftLeft(64);
    private static final BigInteger MIN_LONG = BigInteger.valueOf(Long.MIN_VALUE);

    private static final int T_UNKNOWN = 0;
    private static final int T_CREATED = 1;
    private static final int T_STORED = 2;
    private static final int T_REMOVED = 3;
    private static final int T_UPDATED = 4;

    private final JsonFactory json;
    private final KvEventHandler handler;
    private final EventListener listener;
    private final BlockStoredEvent stored = new BlockStoredEvent(new long[1], new int[16]);
    private final BlockRemovedEvent removed = new BlockRemovedEvent(new long[16]);

    // The event being parsed.
    private long eventId;
    private boolean hasEventId;
    private int dpRank;
    private long windowSize;
    private int type;
    private boolean hasData;
    private boolean hasParent;
    private long parentHash;
    private long[] blockHashes = new long[16];
    private int[] blockTokenEnd = new int[16];
    private int[] blockMedium = new int[16];
    private boolean[] blockExtra = new boolean[16];
    private int blocks;
    private int[] tokens = new int[256];
    private int tokenCount;
    private long[] removedHashes = new long[16];
    private int removedCount;
    private long updatedHash;
    private boolean hasUpdatedHash;
    private long newLevel;
    private long oldLevel;
    private boolean levelChanged;

    private int lastEventCount;
    private long malformedBodies;
    private long unknownTypes;
    private long droppedExtraIdBlocks;

    public TrtllmEventDecoder(KvEventHandler handler, EventListener listener) {
        this.handler = handler;
        this.listener = listener;
        this.json = JsonFactory.builder()
            .streamReadConstraints(StreamReadConstraints.builder().maxNestingDepth(8).maxNumberLength(32).build())
            .build();
    }

    /**
     * Decodes {@code buf[off, off+len)}: a JSON array of events. Returns the number of events delivered (skipped
     * ones included), or {@link #MALFORMED}.
     */
    public int decode(byte[] buf, int off, int len) {
        lastEventCount = 0;
        try (JsonParser p = json.createParser(buf, off, len)) {
            if (p.nextToken() != JsonToken.START_ARRAY) {
                return malformed();
            }
            JsonToken t;
            while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
                if (t != JsonToken.START_OBJECT || !parseEvent(p)) {
                    return malformed();
                }
                deliver();
                lastEventCount++;
            }
            if (p.nextToken() != null) {
                return malformed(); // trailing content after the array
            }
            return lastEventCount;
        } catch (IOException | RuntimeException e) {
            return malformed();
        }
    }

    private int malformed() {
        malformedBodies++;
        return MALFORMED;
    }

    /** Events decoded by the last {@link #decode} call (also when it returned {@link #MALFORMED}). */
    public int lastEventCount() {
        return lastEventCount;
    }

    public long malformedBodies() {
        return malformedBodies;
    }

    /** Events whose {@code data.type} this decoder does not know (skipped). */
    public long unknownTypes() {
        return unknownTypes;
    }

    /** Stored blocks not delivered because they (or a block before them in the event) carry token_extra_ids. */
    public long droppedExtraIdBlocks() {
        return droppedExtraIdBlocks;
    }

    private void resetEvent() {
        hasEventId = false;
        dpRank = 0;
        windowSize = -1;
        type = T_UNKNOWN;
        hasData = false;
        hasParent = false;
        blocks = 0;
        tokenCount = 0;
        removedCount = 0;
        hasUpdatedHash = false;
        levelChanged = false;
    }

    /** Parses one event object (the parser is after its START_OBJECT); false when it is not a valid event. */
    private boolean parseEvent(JsonParser p) throws IOException {
        resetEvent();
        while (p.nextToken() == JsonToken.FIELD_NAME) {
            String name = p.currentName();
            JsonToken v = p.nextToken();
            switch (name) {
                case "event_id" -> {
                    if (v != JsonToken.VALUE_NUMBER_INT) {
                        return false;
                    }
                    eventId = p.getLongValue();
                    hasEventId = true;
                }
                case "window_size" -> {
                    if (v == JsonToken.VALUE_NUMBER_INT) {
                        windowSize = p.getLongValue();
                    } else if (v != JsonToken.VALUE_NULL) {
                        return false;
                    }
                }
                case "attention_dp_rank" -> {
                    if (v == JsonToken.VALUE_NUMBER_INT) {
                        long r = p.getLongValue();
                        if (r < 0 || r > Integer.MAX_VALUE) {
                            return false;
                        }
                        dpRank = (int) r;
                    } else if (v != JsonToken.VALUE_NULL) {
                        return false;
                    }
                }
                case "data" -> {
                    if (v != JsonToken.START_OBJECT || !parseData(p)) {
                        return false;
                    }
                    hasData = true;
                }
                default -> p.skipChildren();
            }
        }
        return p.currentToken() == JsonToken.END_OBJECT && hasEventId && hasData && complete();
    }

    /** The fields each type needs are there. */
    private boolean complete() {
        return switch (type) {
            case T_UPDATED -> hasUpdatedHash;
            default -> true;
        };
    }

    private boolean parseData(JsonParser p) throws IOException {
        String typeName = null;
        while (p.nextToken() == JsonToken.FIELD_NAME) {
            String name = p.currentName();
            JsonToken v = p.nextToken();
            switch (name) {
                case "type" -> {
                    if (v != JsonToken.VALUE_STRING) {
                        return false;
                    }
                    typeName = p.getText();
                }
                case "parent_hash" -> {
                    if (v == JsonToken.VALUE_NULL) {
                        hasParent = false;
                    } else {
                        parentHash = hash(p, v);
                        hasParent = true;
                    }
                }
                case "blocks" -> {
                    if (v != JsonToken.START_ARRAY || !parseBlocks(p)) {
                        return false;
                    }
                }
                case "block_hashes" -> {
                    if (v != JsonToken.START_ARRAY) {
                        return false;
                    }
                    JsonToken t;
                    while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
                        if (removedCount == removedHashes.length) {
                            removedHashes = java.util.Arrays.copyOf(removedHashes, removedCount * 2);
                        }
                        removedHashes[removedCount++] = hash(p, t);
                    }
                }
                case "block_hash" -> {
                    updatedHash = hash(p, v);
                    hasUpdatedHash = true;
                }
                case "cache_level" -> {
                    if (v == JsonToken.START_OBJECT) {
                        if (!parseLevelDiff(p)) {
                            return false;
                        }
                    } else {
                        p.skipChildren();
                    }
                }
                default -> p.skipChildren();
            }
        }
        if (typeName == null) {
            return false;
        }
        type = switch (typeName) {
            case "created" -> T_CREATED;
            case "stored" -> T_STORED;
            case "removed" -> T_REMOVED;
            case "updated" -> T_UPDATED;
            default -> T_UNKNOWN;
        };
        return true;
    }

    /** {@code {"type":"event_diff","new_value": n,"old_value": o}} of an updated event's cache level. */
    private boolean parseLevelDiff(JsonParser p) throws IOException {
        boolean hasNew = false;
        boolean hasOld = false;
        while (p.nextToken() == JsonToken.FIELD_NAME) {
            String name = p.currentName();
            JsonToken v = p.nextToken();
            if ("new_value".equals(name) || "old_value".equals(name)) {
                if (v != JsonToken.VALUE_NUMBER_INT) {
                    return false;
                }
                if ("new_value".equals(name)) {
                    newLevel = p.getLongValue();
                    hasNew = true;
                } else {
                    oldLevel = p.getLongValue();
                    hasOld = true;
                }
            } else {
                p.skipChildren();
            }
        }
        levelChanged = hasNew && hasOld && newLevel != oldLevel;
        return true;
    }

    private boolean parseBlocks(JsonParser p) throws IOException {
        JsonToken t;
        while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
            if (t != JsonToken.START_OBJECT) {
                return false;
            }
            if (blocks == blockHashes.length) {
                int n = blocks * 2;
                blockHashes = java.util.Arrays.copyOf(blockHashes, n);
                blockTokenEnd = java.util.Arrays.copyOf(blockTokenEnd, n);
                blockMedium = java.util.Arrays.copyOf(blockMedium, n);
                blockExtra = java.util.Arrays.copyOf(blockExtra, n);
            }
            boolean hasHash = false;
            boolean extra = false;
            int medium = Medium.GPU;
            while (p.nextToken() == JsonToken.FIELD_NAME) {
                String name = p.currentName();
                JsonToken v = p.nextToken();
                switch (name) {
                    case "block_hash" -> {
                        blockHashes[blocks] = hash(p, v);
                        hasHash = true;
                    }
                    case "tokens" -> {
                        if (v != JsonToken.START_ARRAY) {
                            return false;
                        }
                        int r = parseTokens(p);
                        if (r < 0) {
                            return false;
                        }
                        extra |= r == 1;
                    }
                    case "cache_level" -> {
                        if (v != JsonToken.VALUE_NUMBER_INT) {
                            return false;
                        }
                        medium = mediumOfCacheLevel(p.getLongValue());
                    }
                    default -> p.skipChildren();
                }
            }
            if (!hasHash || tokenCount == (blocks == 0 ? 0 : blockTokenEnd[blocks - 1])) {
                return false; // a stored block names its hash and its tokens
            }
            blockTokenEnd[blocks] = tokenCount;
            blockMedium[blocks] = medium;
            blockExtra[blocks] = extra;
            blocks++;
        }
        return true;
    }

    /** Appends a block's token ids; returns -1 when malformed, 1 when a token has a non-zero extra id, else 0. */
    private int parseTokens(JsonParser p) throws IOException {
        int result = 0;
        JsonToken t;
        while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
            if (t != JsonToken.START_OBJECT) {
                return -1;
            }
            boolean hasId = false;
            while (p.nextToken() == JsonToken.FIELD_NAME) {
                String name = p.currentName();
                JsonToken v = p.nextToken();
                if ("token_id".equals(name)) {
                    if (v != JsonToken.VALUE_NUMBER_INT) {
                        return -1;
                    }
                    long id = p.getLongValue();
                    if (id < Integer.MIN_VALUE || id > 0xFFFF_FFFFL) {
                        return -1;
                    }
                    if (tokenCount == tokens.length) {
                        tokens = java.util.Arrays.copyOf(tokens, tokenCount * 2);
                    }
                    tokens[tokenCount++] = (int) id;
                    hasId = true;
                } else if ("token_extra_id".equals(name)) {
                    if (v == JsonToken.VALUE_NUMBER_INT) {
                        if (p.getLongValue() != 0) {
                            result = 1;
                        }
                    } else if (v != JsonToken.VALUE_NULL) {
                        return -1;
                    }
                } else {
                    p.skipChildren();
                }
            }
            if (!hasId) {
                return -1;
            }
        }
        return result;
    }

    /** An unsigned 64-bit hash (also accepted: a negative long, the same pattern printed signed). */
    private static long hash(JsonParser p, JsonToken v) throws IOException {
        if (v != JsonToken.VALUE_NUMBER_INT) {
            throw new IOException("hash is not an integer: " + v);
        }
        if (p.getNumberType() != JsonParser.NumberType.BIG_INTEGER) {
            return p.getLongValue();
        }
        BigInteger b = p.getBigIntegerValue();
        if (b.signum() < 0 ? b.compareTo(MIN_LONG) < 0 : b.compareTo(TWO_64) >= 0) {
            throw new IOException("hash out of 64-bit range: " + b);
        }
        return b.longValue();
    }

    private void deliver() {
        if (type == T_UNKNOWN) {
            unknownTypes++;
            return;
        }
        if (!listener.onEvent(eventId, dpRank, windowSize)) {
            return;
        }
        switch (type) {
            case T_CREATED -> handler.onAllBlocksCleared();
            case T_STORED -> deliverStored();
            case T_REMOVED -> deliverRemoved();
            default -> {
                if (levelChanged) {
                    handler.onBlockMoved(updatedHash, mediumOfCacheLevel(oldLevel), mediumOfCacheLevel(newLevel));
                }
            }
        }
    }

    private void deliverStored() {
        boolean parent = hasParent;
        long parentKey = parentHash;
        int from = 0;
        for (int b = 0; b < blocks; b++) {
            int to = blockTokenEnd[b];
            if (blockExtra[b]) {
                droppedExtraIdBlocks += blocks - b;
                return;
            }
            BlockStoredEvent e = stored;
            e.reset();
            e.blockKeys[0] = blockHashes[b];
            e.blockCount = 1;
            e.hasParent = parent;
            e.parentKey = parentKey;
            if (e.tokens.length < to - from) {
                e.tokens = new int[Math.max(to - from, e.tokens.length * 2)];
            }
            System.arraycopy(tokens, from, e.tokens, 0, to - from);
            e.tokenInts = to - from;
            e.intsPerCell = 1;
            e.blockSize = to - from;
            e.medium = blockMedium[b];
            handler.onBlockStored(e);
            parent = true;
            parentKey = blockHashes[b];
            from = to;
        }
    }

    private void deliverRemoved() {
        BlockRemovedEvent e = removed;
        e.reset();
        if (e.blockKeys.length < removedCount) {
            e.blockKeys = new long[Math.max(removedCount, e.blockKeys.length * 2)];
        }
        System.arraycopy(removedHashes, 0, e.blockKeys, 0, removedCount);
        e.blockCount = removedCount;
        handler.onBlockRemoved(e);
    }
}
