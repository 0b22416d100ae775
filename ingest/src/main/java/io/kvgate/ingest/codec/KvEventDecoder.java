package io.kvgate.ingest.codec;

import java.nio.charset.StandardCharsets;

/**
 * Decodes one KV-event payload (the msgpack third frame of a live message) and delivers its events to a
 * {@link KvEventHandler}, allocation-free.
 *
 * <p>Accepted forms (engine-contracts §2.2, every version a fleet may run, mixed freely within one batch):
 * <ul>
 *   <li>payload {@code [ts, events]} or {@code [ts, events, dp_rank|nil]}, further trailing elements skipped; or
 *       the map {@code {ts, events, data_parallel_rank}} (msgspec without {@code array_like}), keys in any order,
 *       unknown keys skipped;</li>
 *   <li>events as tag-first arrays {@code ["BlockStored", ...]} decoded by position with any number of trailing
 *       fields, or as maps with a {@code "type"} key (in any position) decoded by name, unknown keys skipped;</li>
 *   <li>BlockStored: {@code block_hashes, parent_block_hash|nil, token_ids, block_size, lora_id|nil}, then
 *       optionally {@code medium, lora_name, extra_keys, group_idx, kv_cache_spec_kind,
 *       kv_cache_spec_sliding_window, locality} (positions 5-11 after the tag, vLLM's {@code BlockStored} declaration
 *       order, {@code locality} appended by vLLM #48281; {@code group_idx}, the kind and the locality are read, see
 *       {@link SpecKind}, {@link Medium}); a field of an unexpected type after {@code lora_id} is skipped, which is
 *       how SGLang's trailing {@code {"cache_salt": ...}} metadata map in the medium+1 slot is tolerated;</li>
 *   <li>BlockRemoved: {@code block_hashes}, then optionally {@code medium, group_idx, locality};
 *       AllBlocksCleared: no fields; unknown tags are skipped and counted;</li>
 *   <li>hashes: any msgpack integer width, kept as the same 64-bit pattern; {@code bin} digests folded to their
 *       LAST 8 bytes big-endian (vLLM {@code VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0});</li>
 *   <li>token cells: an integer, or a 2-element array (SGLang EAGLE bigram), see {@link BlockStoredEvent}.</li>
 * </ul>
 *
 * <p><b>Malformed input</b> never escapes: {@link #decode} returns {@link #MALFORMED} and counts it. Each event
 * is parsed completely before its callback, so a frame broken in its n-th event delivers the n-1 complete events
 * before it and drops the rest; the caller treats a malformed frame like a sequence gap (see ingest), because the
 * dropped part may have held removals.
 *
 * <p><b>Per-event limits</b> ({@code maxBlocksPerEvent}, {@code maxTokenIntsPerEvent}, the preallocated buffers)
 * cost one event, never the frame or the inventory: a BlockStored beyond either limit is skipped whole and counted
 * ({@link #droppedTooManyBlocks()}, {@link #droppedTooManyTokens()}; a cold window, not a phantom), and a
 * BlockRemoved beyond the block limit is delivered in consecutive chunks of at most {@code maxBlocksPerEvent} keys
 * (dropping a removal would leave phantom blocks).
 *
 * <p><b>Threading contract:</b> one decoder per ingest thread; not thread-safe. Counters are plain fields read by
 * the owning thread (the subscriber publishes them).
 */
public final class KvEventDecoder {
    public static final int MALFORMED = -1;

    static final byte[] BLOCK_STORED = ascii("BlockStored");
    static final byte[] BLOCK_REMOVED = ascii("BlockRemoved");
    static final byte[] ALL_CLEARED = ascii("AllBlocksCleared");
    static final byte[] TYPE = ascii("type");
    static final byte[] K_BLOCK_HASHES = ascii("block_hashes");
    static final byte[] K_PARENT = ascii("parent_block_hash");
    static final byte[] K_TOKEN_IDS = ascii("token_ids");
    static final byte[] K_BLOCK_SIZE = ascii("block_size");
    static final byte[] K_LORA_ID = ascii("lora_id");
    static final byte[] K_MEDIUM = ascii("medium");
    static final byte[] K_LOCALITY = ascii("locality");
    static final byte[] K_GROUP_IDX = ascii("group_idx");
    static final byte[] K_SPEC_KIND = ascii("kv_cache_spec_kind");
    static final byte[] K_TS = ascii("ts");
    static final byte[] K_EVENTS = ascii("events");
    static final byte[] K_DP_RANK = ascii("data_parallel_rank");

    private static final int TAG_UNKNOWN = 0;
    private static final int TAG_STORED = 1;
    private static final int TAG_REMOVED = 2;
    private static final int TAG_CLEARED = 3;

    private final MsgpackReader in = new MsgpackReader();
    private final KvEventHandler handler;
    private final BlockStoredEvent stored;
    private final BlockRemovedEvent removed;
    private final long[] keys;
    private final int[] tokens;

    private double lastTimestamp;
    private int lastDpRank;
    private int lastEventCount;

    private long frames;
    private long malformedFrames;
    private long oversizeEvents;
    private long droppedTooManyBlocks;
    private long droppedTooManyTokens;
    /** The BlockStored being parsed exceeded a limit: parse to its end, deliver nothing. */
    private int storedDropReason;
    /** The BlockRemoved being parsed was already delivered in chunks. */
    private boolean removedChunked;
    private static final int DROP_NONE = 0;
    private static final int DROP_BLOCKS = 1;
    private static final int DROP_TOKENS = 2;
    private long unknownEvents;
    private long handlerErrors;
    private long storedEvents;
    private long removedEvents;
    private long clearedEvents;
    private String lastError = "";

    public KvEventDecoder(KvEventHandler handler, int maxBlocksPerEvent, int maxTokenIntsPerEvent) {
        if (maxBlocksPerEvent < 1 || maxTokenIntsPerEvent < 1) {
            throw new IllegalArgumentException("maxBlocksPerEvent=" + maxBlocksPerEvent + " maxTokenIntsPerEvent="
                + maxTokenIntsPerEvent + " must be >= 1");
        }
        this.handler = handler;
        this.keys = new long[maxBlocksPerEvent];
        this.tokens = new int[maxTokenIntsPerEvent];
        this.stored = new BlockStoredEvent(keys, tokens);
        this.removed = new BlockRemovedEvent(keys);
    }

    /** Defaults sized for a 128 k-token prompt at block size 16 in bigram mode. */
    public KvEventDecoder(KvEventHandler handler) {
        this(handler, 1 << 16, 1 << 19);
    }

    /**
     * Decodes one payload and delivers its events.
     *
     * @return the number of events delivered, or {@link #MALFORMED}
     */
    public int decode(byte[] buf, int offset, int length) {
        frames++;
        lastEventCount = 0;
        lastDpRank = -1;
        in.wrap(buf, offset, length);
        try {
            if (MsgpackReader.isMap(in.peekFormat())) {
                decodeMapBatch();
            } else {
                decodeArrayBatch();
            }
            return lastEventCount;
        } catch (MsgpackFormatException e) {
            malformedFrames++;
            lastError = in.errorReason();
            return MALFORMED;
        } catch (RuntimeException e) {
            // A handler bug must not kill the subscriber; it is counted and the frame abandoned.
            handlerErrors++;
            malformedFrames++;
            lastError = "handler: " + e.getClass().getSimpleName();
            return MALFORMED;
        }
    }

    private void decodeArrayBatch() {
        int n = in.readArrayHeader();
        if (n < 2) {
            throw in.fail("batch has fewer than 2 elements");
        }
        lastTimestamp = in.readNumber();
        int events = in.readArrayHeader();
        // Events are delivered as they are parsed, so dp_rank (after the events) is read afterwards.
        for (int i = 0; i < events; i++) {
            decodeEvent();
        }
        if (n >= 3) {
            readDpRank();
            for (int i = 3; i < n; i++) {
                in.skipValue();
            }
        }
    }

    /**
     * The outer batch as a map: vLLM's {@code EventBatch} at commit 0181ea31 ({@code vllm/distributed/kv_events.py})
     * is declared {@code msgspec.Struct, omit_defaults=True, gc=False} without {@code array_like=True}, so msgspec
     * encodes it as {@code {"ts": float, "events": [...], "data_parallel_rank": int}} (the rank key omitted while
     * it is None). Keys are matched by name in any order and unknown keys skipped, like map-shaped events; a batch
     * without {@code events} is malformed (it is a required field of the struct), without {@code ts} it is not.
     */
    private void decodeMapBatch() {
        int n = in.readMapHeader();
        boolean eventsSeen = false;
        lastTimestamp = 0;
        for (int i = 0; i < n; i++) {
            int keyLen = in.readStringHeaderOrMinus1();
            if (keyLen < 0) {
                in.skipValue();
                in.skipValue();
                continue;
            }
            int at = in.position();
            in.skipBytes(keyLen);
            if (matches(at, keyLen, K_TS)) {
                lastTimestamp = in.readNumber();
            } else if (matches(at, keyLen, K_EVENTS) && !eventsSeen) {
                int events = in.readArrayHeader();
                for (int e = 0; e < events; e++) {
                    decodeEvent();
                }
                eventsSeen = true;
            } else if (matches(at, keyLen, K_DP_RANK)) {
                readDpRank();
            } else {
                in.skipValue();
            }
        }
        if (!eventsSeen) {
            throw in.fail("map batch has no events");
        }
    }

    /** {@code data_parallel_rank}: an integer, nil, or (tolerated, skipped) anything else. */
    private void readDpRank() {
        if (!in.tryReadNil()) {
            if (MsgpackReader.isInt(in.peekFormat())) {
                lastDpRank = (int) in.readLong();
            } else {
                in.skipValue();
            }
        }
    }

    private void decodeEvent() {
        int f = in.peekFormat();
        if (MsgpackReader.isArray(f)) {
            decodeArrayEvent();
        } else if (MsgpackReader.isMap(f)) {
            decodeMapEvent();
        } else {
            throw in.fail("event is neither array nor map");
        }
    }

    private int readTag() {
        int len = in.readStringHeader();
        int at = in.position();
        int tag = TAG_UNKNOWN;
        if (len == BLOCK_STORED.length && in.regionEquals(at, BLOCK_STORED)) {
            tag = TAG_STORED;
        } else if (len == BLOCK_REMOVED.length && in.regionEquals(at, BLOCK_REMOVED)) {
            tag = TAG_REMOVED;
        } else if (len == ALL_CLEARED.length && in.regionEquals(at, ALL_CLEARED)) {
            tag = TAG_CLEARED;
        }
        in.skipBytes(len);
        return tag;
    }

    private void decodeArrayEvent() {
        int n = in.readArrayHeader();
        if (n == 0) {
            throw in.fail("empty event array");
        }
        if (!MsgpackReader.isString(in.peekFormat())) {
            unknownEvents++;
            skip(n);
            return;
        }
        int tag = readTag();
        int fields = n - 1;
        switch (tag) {
            case TAG_STORED -> {
                if (fields < 4) {
                    throw in.fail("BlockStored with fewer than 4 fields");
                }
                stored.reset();
                storedDropReason = DROP_NONE;
                readHashes(stored);
                readParent();
                readTokens();
                stored.blockSize = readBlockSize();
                int i = 4;
                if (i < fields) {
                    readLoraId();
                    i++;
                }
                if (i < fields) {
                    stored.medium = readMediumLenient();
                    i++;
                }
                // lora_name, extra_keys: not needed for indexing (the hash already covers them)
                for (; i < fields && i < 8; i++) {
                    in.skipValue();
                }
                if (i < fields) {
                    stored.groupIdx = readIntLenient();
                    i++;
                }
                if (i < fields) {
                    stored.specKind = readSpecKindLenient();
                    i++;
                }
                if (i < fields) {
                    in.skipValue(); // kv_cache_spec_sliding_window
                    i++;
                }
                if (i < fields) {
                    stored.locality = readLocalityLenient();
                    i++;
                }
                skip(fields - i);
                deliverStored();
            }
            case TAG_REMOVED -> {
                if (fields < 1) {
                    throw in.fail("BlockRemoved without block_hashes");
                }
                removed.reset();
                removedChunked = false;
                readHashes(null);
                int i = 1;
                if (i < fields) {
                    removed.medium = readMediumLenient();
                    i++;
                }
                if (i < fields) {
                    removed.groupIdx = readIntLenient();
                    i++;
                }
                if (i < fields) {
                    removed.locality = readLocalityLenient();
                    i++;
                }
                skip(fields - i);
                deliverRemoved();
            }
            case TAG_CLEARED -> {
                skip(fields);
                deliverCleared();
            }
            default -> {
                unknownEvents++;
                skip(fields);
            }
        }
    }

    private void decodeMapEvent() {
        int start = in.position();
        int n = in.readMapHeader();
        int tag = -1;
        for (int i = 0; i < n; i++) {
            if (isKey(TYPE)) {
                if (!MsgpackReader.isString(in.peekFormat())) {
                    throw in.fail("event type is not a string");
                }
                tag = readTag();
            } else {
                in.skipValue();
            }
        }
        int end = in.position();
        if (tag == TAG_UNKNOWN || tag < 0) {
            unknownEvents++;
            return;
        }
        in.position(start);
        in.readMapHeader();
        boolean hashes = false;
        boolean tokensSeen = false;
        boolean blockSizeSeen = false;
        if (tag == TAG_STORED) {
            stored.reset();
            storedDropReason = DROP_NONE;
        } else if (tag == TAG_REMOVED) {
            removed.reset();
            removedChunked = false;
        }
        for (int i = 0; i < n; i++) {
            if (tag == TAG_CLEARED) {
                in.skipValue();
                in.skipValue();
                continue;
            }
            int keyLen = in.readStringHeaderOrMinus1();
            if (keyLen < 0) {
                in.skipValue();
                in.skipValue();
                continue;
            }
            int at = in.position();
            in.skipBytes(keyLen);
            if (matches(at, keyLen, K_BLOCK_HASHES)) {
                readHashes(tag == TAG_STORED ? stored : null);
                hashes = true;
            } else if (tag == TAG_STORED && matches(at, keyLen, K_PARENT)) {
                readParent();
            } else if (tag == TAG_STORED && matches(at, keyLen, K_TOKEN_IDS)) {
                readTokens();
                tokensSeen = true;
            } else if (tag == TAG_STORED && matches(at, keyLen, K_BLOCK_SIZE)) {
                stored.blockSize = readBlockSize();
                blockSizeSeen = true;
            } else if (tag == TAG_STORED && matches(at, keyLen, K_LORA_ID)) {
                readLoraId();
            } else if (matches(at, keyLen, K_MEDIUM)) {
                int m = readMediumLenient();
                if (tag == TAG_STORED) {
                    stored.medium = m;
                } else {
                    removed.medium = m;
                }
            } else if (matches(at, keyLen, K_LOCALITY)) {
                int l = readLocalityLenient();
                if (tag == TAG_STORED) {
                    stored.locality = l;
                } else {
                    removed.locality = l;
                }
            } else if (tag == TAG_STORED && matches(at, keyLen, K_SPEC_KIND)) {
                stored.specKind = readSpecKindLenient();
            } else if (matches(at, keyLen, K_GROUP_IDX)) {
                int g = readIntLenient();
                if (tag == TAG_STORED) {
                    stored.groupIdx = g;
                } else {
                    removed.groupIdx = g;
                }
            } else {
                in.skipValue();
            }
        }
        in.position(end);
        switch (tag) {
            case TAG_STORED -> {
                if (!hashes || !tokensSeen || !blockSizeSeen) {
                    throw in.fail("BlockStored map without block_hashes, token_ids or block_size");
                }
                deliverStored();
            }
            case TAG_REMOVED -> {
                if (!hashes) {
                    throw in.fail("BlockRemoved map without block_hashes");
                }
                deliverRemoved();
            }
            default -> deliverCleared();
        }
    }

    private boolean isKey(byte[] key) {
        int keyLen = in.readStringHeaderOrMinus1();
        if (keyLen < 0) {
            in.skipValue();
            return false;
        }
        boolean eq = matches(in.position(), keyLen, key);
        in.skipBytes(keyLen);
        return eq;
    }

    private boolean matches(int at, int len, byte[] key) {
        return len == key.length && in.regionEquals(at, key);
    }

    private void deliverStored() {
        if (storedDropReason != DROP_NONE) {
            oversizeEvents++;
            if (storedDropReason == DROP_BLOCKS) {
                droppedTooManyBlocks++;
            } else {
                droppedTooManyTokens++;
            }
            return;
        }
        storedEvents++;
        lastEventCount++;
        handler.onBlockStored(stored);
    }

    private void deliverRemoved() {
        if (!removedChunked && removed.blockCount() == 0) {
            // An empty block_hashes list removes nothing: not an event, so a handler always sees at least one block
            // and the count returned equals the events delivered (found by the fuzz tier).
            return;
        }
        removedEvents++;
        lastEventCount++;
        if (!removedChunked) {
            handler.onBlockRemoved(removed);
        }
    }

    private void deliverCleared() {
        clearedEvents++;
        lastEventCount++;
        handler.onAllBlocksCleared();
    }

    private void skip(int values) {
        for (int i = 0; i < values; i++) {
            in.skipValue();
        }
    }

    /** Reads block_hashes into the shared key buffer; {@code target} null means the removed view. */
    private void readHashes(BlockStoredEvent target) {
        int n = in.readArrayHeader();
        if (n > keys.length) {
            if (target != null) {
                storedDropReason = DROP_BLOCKS;
                skip(n);
                target.blockCount = 0;
                return;
            }
            // A removal too large for one buffer: deliver it in chunks (its medium, if any, follows the hashes and
            // is unknown here: NONE means "any tier" to the sink).
            oversizeEvents++;
            for (int done = 0; done < n; ) {
                int chunk = Math.min(keys.length, n - done);
                for (int i = 0; i < chunk; i++) {
                    keys[i] = readHash();
                }
                removed.blockCount = chunk;
                handler.onBlockRemoved(removed);
                done += chunk;
            }
            removedChunked = true;
            return;
        }
        for (int i = 0; i < n; i++) {
            keys[i] = readHash();
        }
        if (target != null) {
            target.blockCount = n;
        } else {
            removed.blockCount = n;
        }
    }

    private long readHash() {
        int f = in.peekFormat();
        if (MsgpackReader.isInt(f)) {
            return in.readLong();
        }
        if (MsgpackReader.isBin(f)) {
            int len = in.readBinHeader();
            int at = in.position();
            in.skipBytes(len);
            return in.foldLast8(at, len);
        }
        throw in.fail("block hash is neither integer nor bin");
    }

    private void readParent() {
        if (in.tryReadNil()) {
            stored.hasParent = false;
            return;
        }
        stored.parentKey = readHash();
        stored.hasParent = true;
    }

    private void readTokens() {
        int n = in.readArrayHeader();
        int ints = 0;
        int perCell = 0;
        for (int i = 0; i < n; i++) {
            int f = in.peekFormat();
            int cell;
            if (MsgpackReader.isInt(f)) {
                cell = 1;
                long t = in.readLong();
                if (ints >= tokens.length) {
                    storedDropReason = storedDropReason == DROP_NONE ? DROP_TOKENS : storedDropReason;
                } else {
                    tokens[ints++] = (int) t;
                }
            } else if (MsgpackReader.isArray(f)) {
                cell = 2;
                if (in.readArrayHeader() != 2) {
                    throw in.fail("token cell array is not a pair");
                }
                long t0 = in.readLong();
                long t1 = in.readLong();
                if (ints + 2 > tokens.length) {
                    storedDropReason = storedDropReason == DROP_NONE ? DROP_TOKENS : storedDropReason;
                } else {
                    tokens[ints++] = (int) t0;
                    tokens[ints++] = (int) t1;
                }
            } else {
                throw in.fail("token cell is neither integer nor pair");
            }
            if (perCell == 0) {
                perCell = cell;
            } else if (perCell != cell) {
                throw in.fail("token cells mix integers and pairs");
            }
        }
        stored.tokenInts = ints;
        stored.intsPerCell = perCell == 0 ? 1 : perCell;
    }

    private int readBlockSize() {
        long bs = in.readLong();
        if (bs < 1 || bs > 1 << 20) {
            throw in.fail("block_size out of range 1..1048576");
        }
        return (int) bs;
    }

    private void readLoraId() {
        if (in.tryReadNil()) {
            return;
        }
        if (MsgpackReader.isInt(in.peekFormat())) {
            stored.loraId = in.readLong();
            stored.hasLoraId = true;
        } else {
            in.skipValue();
        }
    }

    private int readMediumLenient() {
        int f = in.peekFormat();
        if (!MsgpackReader.isString(f)) {
            in.skipValue(); // nil, or SGLang's metadata map in this slot
            return Medium.NONE;
        }
        int len = in.readStringHeader();
        int at = in.position();
        in.skipBytes(len);
        for (int code = 1; code < Medium.NAMES.length; code++) {
            if (Medium.NAMES[code] != null && matches(at, len, Medium.NAMES[code])) {
                return code;
            }
        }
        return Medium.OTHER;
    }

    /** {@code locality}: LOCAL, REMOTE, or unspecified (nil, absent, another value). */
    private int readLocalityLenient() {
        if (!MsgpackReader.isString(in.peekFormat())) {
            in.skipValue();
            return Medium.LOCALITY_UNSPECIFIED;
        }
        int len = in.readStringHeader();
        int at = in.position();
        in.skipBytes(len);
        return matches(at, len, Medium.REMOTE) ? Medium.LOCALITY_REMOTE
            : matches(at, len, Medium.LOCAL) ? Medium.LOCALITY_LOCAL : Medium.LOCALITY_UNSPECIFIED;
    }

    /** {@code kv_cache_spec_kind}: a {@link SpecKind} code; nil or a non-string is {@link SpecKind#NONE}. */
    private int readSpecKindLenient() {
        if (!MsgpackReader.isString(in.peekFormat())) {
            in.skipValue();
            return SpecKind.NONE;
        }
        int len = in.readStringHeader();
        int at = in.position();
        in.skipBytes(len);
        for (int code = 1; code < SpecKind.NAMES.length; code++) {
            if (matches(at, len, SpecKind.NAMES[code])) {
                return code;
            }
        }
        return SpecKind.OTHER;
    }

    private int readIntLenient() {
        if (MsgpackReader.isInt(in.peekFormat())) {
            return (int) in.readLong();
        }
        in.skipValue();
        return -1;
    }

    private static byte[] ascii(String s) {
        return s.getBytes(StandardCharsets.US_ASCII);
    }

    // ------------------------------------------------------------------ last frame and counters

    public double lastTimestamp() {
        return lastTimestamp;
    }

    /** dp_rank of the last frame, -1 when absent or nil. */
    public int lastDpRank() {
        return lastDpRank;
    }

    /** Events delivered from the last frame (also when it turned out malformed). */
    public int lastEventCount() {
        return lastEventCount;
    }

    public String lastError() {
        return lastError;
    }

    public long frames() {
        return frames;
    }

    public long malformedFrames() {
        return malformedFrames;
    }

    public long oversizeEvents() {
        return oversizeEvents;
    }

    /** BlockStored events skipped whole for more than {@code maxBlocksPerEvent} hashes. */
    public long droppedTooManyBlocks() {
        return droppedTooManyBlocks;
    }

    /** BlockStored events skipped whole for more than {@code maxTokenIntsPerEvent} token ints. */
    public long droppedTooManyTokens() {
        return droppedTooManyTokens;
    }

    public long unknownEvents() {
        return unknownEvents;
    }

    public long handlerErrors() {
        return handlerErrors;
    }

    public long storedEvents() {
        return storedEvents;
    }

    public long removedEvents() {
        return removedEvents;
    }

    public long clearedEvents() {
        return clearedEvents;
    }
}
