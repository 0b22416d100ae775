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
 *            "tokens":[{"type":"unique_token","token_id": t,"token_extra_id": x}, ...],"cache_level": c,"priority": p
 *            [, "cache_salt": s|null][, "lora_id": n|null]}]}
 * removed: {"type":"removed","block_hashes":[h, ...]}
 * updated: {"type":"updated","block_hash": h,"cache_level":{"type":"event_diff","new_value": n,"old_value": o},
 *           "priority":{"type":"event_diff", ...}}
 * </pre>
 * Hashes are the engine's {@code size_t}: unsigned 64-bit, kept as the same 64-bit pattern. TensorRT-LLM's KV cache
 * manager V2 types them {@code EventBlockHash = int | str}: with {@code hash_algo} {@code v2_sha256} a hash is
 * {@code block_key.hex()}, a JSON string ({@code _normalize_block_hash} in
 * {@code tensorrt_llm/runtime/kv_cache_manager_v2/_event_manager.py}). A hex string is folded to 64 bits by
 * {@link #foldHexHash} — the same fold for stored, parent, removed and updated hashes, so the learned-key mapping
 * of engine hashes to the gateway's keys holds. V2 also writes a multimodal token as {@code UniqueToken(token.hex())}
 * (a string {@code token_id}, {@code token_extra_id} 0): handled like a non-zero {@code token_extra_id}. The event's
 * {@code hash_algo} ({@code KVCacheEvent.hash_algo}, absent before V2) is read per event ({@link #currentHashAlgo}).
 * Keys may come in any order ({@code data} usually precedes {@code attention_dp_rank}), so each event is parsed
 * whole before anything is delivered; unknown keys and unknown data types are skipped (the latter counted).
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
 * <p><b>A bad value costs its event, never the body.</b> An event whose JSON is well formed but holds a value the
 * decoder cannot use (a hash that is neither a 64-bit integer nor hex, a missing field, a wrong type) is skipped
 * alone ({@link #badEvents()}): when its {@code event_id} and rank are readable the listener still sees it, so the
 * id sequence stays continuous and the next event is not taken for a gap; a skipped {@code removed} event then
 * clears its rank ({@link KvEventHandler#onAllBlocksCleared()}), because a removal that cannot be applied would
 * leave a block the engine no longer holds scoring as a hit. Only a body that is not well-formed JSON (truncated,
 * not an array, trailing content, nested too deep) is {@link #MALFORMED}, after the complete events before the
 * break were delivered; the caller treats that like a gap. The body is bounded by the caller
 * ({@code ingest.max_frame_bytes}), and so are the growable per-event buffers.
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
    /** Per block: the learned-key namespace of its {@code cache_salt} and {@code lora_id} (0: neither). */
    private long[] blockNamespace = new long[16];
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
    /** The event holds a value the decoder cannot use: it is skipped (see the class comment). */
    private boolean bad;
    /** Its {@code attention_dp_rank} was unreadable: the listener cannot be told which rank's sequence it belongs to. */
    private boolean badRank;
    private String hashAlgo;
    private String lastHashAlgo;

    private int lastEventCount;
    private long malformedBodies;
    private long unknownTypes;
    private long droppedExtraIdBlocks;
    private long badEvents;
    private long stringHashes;

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
                if (t != JsonToken.START_OBJECT) {
                    return malformed();
                }
                parseEvent(p);
                if (bad) {
                    skipBadEvent();
                } else {
                    deliver();
                }
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

    /** Events skipped for a value the decoder cannot use (each cost itself alone, see the class comment). */
    public long badEvents() {
        return badEvents;
    }

    /** Hashes that arrived as hex strings and were folded ({@code hash_algo: v2_sha256}). */
    public long stringHashes() {
        return stringHashes;
    }

    /**
     * The {@code hash_algo} of the event being delivered (valid inside the listener's and handler's callbacks), null
     * when the event names none (engines before KV cache manager V2).
     */
    public String currentHashAlgo() {
        return hashAlgo;
    }

    /** The last {@code hash_algo} any event named, or null: what the engine says its hashes are. */
    public String lastHashAlgo() {
        return lastHashAlgo;
    }

    /**
     * Folds a hex hash string to a stable 64-bit key: its first 16 hex digits (8 bytes, big-endian), or the whole
     * value when shorter. Any fold would do in learned-key mode as long as every event uses the same one; the first 8
     * bytes also equal the key a {@code v2_sha256_64} engine derives from the same digest prefix.
     *
     * @return the key, or {@code null} when {@code s} is empty, longer than 128 digits or not hex
     */
    static Long foldHexHash(String s) {
        int n = s.length();
        if (n == 0 || n > 128) {
            return null;
        }
        long v = 0;
        for (int i = 0; i < n; i++) {
            int d = Character.digit(s.charAt(i), 16);
            if (d < 0) {
                return null;
            }
            if (i < 16) {
                v = (v << 4) | d;
            }
        }
        return v;
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
        bad = false;
        badRank = false;
        hashAlgo = null;
    }

    /** Marks the event bad and skips the value the parser is at (a scalar, or a whole object or array). */
    private void badValue(JsonParser p) throws IOException {
        bad = true;
        p.skipChildren();
    }

    /**
     * Parses one event object (the parser is after its START_OBJECT) to its END_OBJECT; {@link #bad} when a value is
     * unusable. Only malformed JSON throws.
     */
    private void parseEvent(JsonParser p) throws IOException {
        resetEvent();
        while (p.nextToken() == JsonToken.FIELD_NAME) {
            String name = p.currentName();
            JsonToken v = p.nextToken();
            switch (name) {
                case "event_id" -> {
                    if (v != JsonToken.VALUE_NUMBER_INT || p.getNumberType() == JsonParser.NumberType.BIG_INTEGER) {
                        badValue(p);
                    } else {
                        eventId = p.getLongValue();
                        hasEventId = true;
                    }
                }
                case "window_size" -> {
                    if (v == JsonToken.VALUE_NUMBER_INT && p.getNumberType() != JsonParser.NumberType.BIG_INTEGER) {
                        windowSize = p.getLongValue();
                    } else if (v != JsonToken.VALUE_NULL) {
                        badValue(p);
                    }
                }
                case "attention_dp_rank" -> {
                    long r = v == JsonToken.VALUE_NUMBER_INT && p.getNumberType() != JsonParser.NumberType.BIG_INTEGER
                        ? p.getLongValue() : -1;
                    if (r >= 0 && r <= Integer.MAX_VALUE) {
                        dpRank = (int) r;
                    } else if (v != JsonToken.VALUE_NULL) {
                        badRank = true;
                        badValue(p);
                    }
                }
                case "hash_algo" -> {
                    if (v == JsonToken.VALUE_STRING) {
                        hashAlgo = p.getText();
                    } else if (v != JsonToken.VALUE_NULL) {
                        badValue(p);
                    }
                }
                case "data" -> {
                    if (v != JsonToken.START_OBJECT) {
                        badValue(p);
                    } else {
                        parseData(p);
                        hasData = true;
                    }
                }
                default -> p.skipChildren();
            }
        }
        if (p.currentToken() != JsonToken.END_OBJECT) {
            throw new IOException("event object not closed");
        }
        if (!hasEventId || !hasData || !complete()) {
            bad = true;
        }
    }

    /**
     * A bad event: counted, and, when its id and rank are readable, announced to the listener so the rank's id
     * sequence stays continuous; a bad {@code removed} event then clears its rank (its removal cannot be applied).
     */
    private void skipBadEvent() {
        badEvents++;
        if (!hasEventId || badRank) {
            return; // the next event of the rank will look like a gap, and be treated as one
        }
        if (hashAlgo != null) {
            lastHashAlgo = hashAlgo;
        }
        if (listener.onEvent(eventId, dpRank, windowSize) && type == T_REMOVED) {
            handler.onAllBlocksCleared();
        }
    }

    /** The fields each type needs are there. */
    private boolean complete() {
        return switch (type) {
            case T_UPDATED -> hasUpdatedHash;
            default -> true;
        };
    }

    private void parseData(JsonParser p) throws IOException {
        String typeName = null;
        while (p.nextToken() == JsonToken.FIELD_NAME) {
            String name = p.currentName();
            JsonToken v = p.nextToken();
            switch (name) {
                case "type" -> {
                    if (v != JsonToken.VALUE_STRING) {
                        badValue(p);
                    } else {
                        typeName = p.getText();
                    }
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
                    if (v != JsonToken.START_ARRAY) {
                        badValue(p);
                    } else {
                        parseBlocks(p);
                    }
                }
                case "block_hashes" -> {
                    if (v != JsonToken.START_ARRAY) {
                        badValue(p);
                        break;
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
                        parseLevelDiff(p);
                    } else {
                        p.skipChildren();
                    }
                }
                default -> p.skipChildren();
            }
        }
        if (typeName == null) {
            bad = true;
            return;
        }
        type = switch (typeName) {
            case "created" -> T_CREATED;
            case "stored" -> T_STORED;
            case "removed" -> T_REMOVED;
            case "updated" -> T_UPDATED;
            default -> T_UNKNOWN;
        };
    }

    /** {@code {"type":"event_diff","new_value": n,"old_value": o}} of an updated event's cache level. */
    private void parseLevelDiff(JsonParser p) throws IOException {
        boolean hasNew = false;
        boolean hasOld = false;
        while (p.nextToken() == JsonToken.FIELD_NAME) {
            String name = p.currentName();
            JsonToken v = p.nextToken();
            if ("new_value".equals(name) || "old_value".equals(name)) {
                if (v != JsonToken.VALUE_NUMBER_INT) {
                    badValue(p);
                    continue;
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
    }

    private void parseBlocks(JsonParser p) throws IOException {
        JsonToken t;
        while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
            if (t != JsonToken.START_OBJECT) {
                badValue(p);
                continue;
            }
            if (blocks == blockHashes.length) {
                int n = blocks * 2;
                blockHashes = java.util.Arrays.copyOf(blockHashes, n);
                blockTokenEnd = java.util.Arrays.copyOf(blockTokenEnd, n);
                blockMedium = java.util.Arrays.copyOf(blockMedium, n);
                blockExtra = java.util.Arrays.copyOf(blockExtra, n);
                blockNamespace = java.util.Arrays.copyOf(blockNamespace, n);
            }
            boolean hasHash = false;
            boolean extra = false;
            int medium = Medium.GPU;
            long saltNamespace = io.kvgate.index.block.LearnedNamespace.NONE;
            long loraNamespace = io.kvgate.index.block.LearnedNamespace.NONE;
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
                            badValue(p);
                        } else {
                            extra |= parseTokens(p);
                        }
                    }
                    case "cache_level" -> {
                        if (v != JsonToken.VALUE_NUMBER_INT) {
                            badValue(p);
                        } else {
                            medium = mediumOfCacheLevel(p.getLongValue());
                        }
                    }
                    // Newer serializers name the block's salt and adapter (null: none); they key it apart.
                    case "cache_salt" -> {
                        if (v == JsonToken.VALUE_STRING) {
                            saltNamespace = io.kvgate.index.block.LearnedNamespace.ofSalt(p.getText());
                        } else if (v != JsonToken.VALUE_NULL) {
                            badValue(p);
                        }
                    }
                    case "lora_id" -> {
                        if (v == JsonToken.VALUE_NUMBER_INT) {
                            loraNamespace = io.kvgate.index.block.LearnedNamespace.ofLora(p.getLongValue());
                        } else if (v != JsonToken.VALUE_NULL) {
                            badValue(p);
                        }
                    }
                    default -> p.skipChildren();
                }
            }
            if (!hasHash || tokenCount == (blocks == 0 ? 0 : blockTokenEnd[blocks - 1])) {
                bad = true; // a stored block names its hash and its tokens
                continue;
            }
            blockTokenEnd[blocks] = tokenCount;
            blockMedium[blocks] = medium;
            blockExtra[blocks] = extra;
            blockNamespace[blocks] = io.kvgate.index.block.LearnedNamespace.combine(saltNamespace, loraNamespace);
            blocks++;
        }
    }

    /**
     * Appends a block's token ids; true when a token is not a plain vocabulary id: a non-zero {@code token_extra_id},
     * or a string {@code token_id} (V2's multimodal {@code UniqueToken(token.hex())}), whose place in the block gets a
     * placeholder id since the block is never delivered.
     */
    private boolean parseTokens(JsonParser p) throws IOException {
        boolean extra = false;
        JsonToken t;
        while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
            if (t != JsonToken.START_OBJECT) {
                badValue(p);
                continue;
            }
            boolean hasId = false;
            while (p.nextToken() == JsonToken.FIELD_NAME) {
                String name = p.currentName();
                JsonToken v = p.nextToken();
                if ("token_id".equals(name)) {
                    long id;
                    if (v == JsonToken.VALUE_STRING) {
                        extra = true;
                        id = 0;
                    } else if (v == JsonToken.VALUE_NUMBER_INT && p.getNumberType() != JsonParser.NumberType.BIG_INTEGER) {
                        id = p.getLongValue();
                    } else {
                        badValue(p);
                        continue;
                    }
                    if (id < Integer.MIN_VALUE || id > 0xFFFF_FFFFL) {
                        bad = true;
                        continue;
                    }
                    if (tokenCount == tokens.length) {
                        tokens = java.util.Arrays.copyOf(tokens, tokenCount * 2);
                    }
                    tokens[tokenCount++] = (int) id;
                    hasId = true;
                } else if ("token_extra_id".equals(name)) {
                    if (v == JsonToken.VALUE_NUMBER_INT) {
                        if (p.getNumberType() == JsonParser.NumberType.BIG_INTEGER || p.getLongValue() != 0) {
                            extra = true;
                        }
                    } else if (v != JsonToken.VALUE_NULL) {
                        badValue(p);
                    }
                } else {
                    p.skipChildren();
                }
            }
            if (!hasId) {
                bad = true;
            }
        }
        return extra;
    }

    /**
     * An unsigned 64-bit hash (also accepted: a negative long, the same pattern printed signed), or a hex string
     * folded by {@link #foldHexHash}; anything else marks the event bad (and returns 0, never used).
     */
    private long hash(JsonParser p, JsonToken v) throws IOException {
        if (v == JsonToken.VALUE_STRING) {
            Long folded = foldHexHash(p.getText());
            if (folded == null) {
                bad = true;
                return 0;
            }
            stringHashes++;
            return folded;
        }
        if (v != JsonToken.VALUE_NUMBER_INT) {
            badValue(p);
            return 0;
        }
        if (p.getNumberType() != JsonParser.NumberType.BIG_INTEGER) {
            return p.getLongValue();
        }
        BigInteger b = p.getBigIntegerValue();
        if (b.signum() < 0 ? b.compareTo(MIN_LONG) < 0 : b.compareTo(TWO_64) >= 0) {
            bad = true;
            return 0;
        }
        return b.longValue();
    }

    private void deliver() {
        if (hashAlgo != null) {
            lastHashAlgo = hashAlgo;
        }
        if (type == T_UNKNOWN) {
            unknownTypes++;
            // Announced without callbacks: its id is part of the rank's sequence, and skipping it would make the
            // next event look like a gap (which clears the rank) for an event the engine added, not lost.
            listener.onEvent(eventId, dpRank, windowSize);
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
            e.namespace = blockNamespace[b];
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
