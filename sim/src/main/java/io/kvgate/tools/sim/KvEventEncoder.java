package io.kvgate.tools.sim;

import io.kvgate.tools.sim.SimulatorConfig.EventForm;
import java.io.IOException;
import java.math.BigInteger;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/**
 * Encodes one batch of KV events exactly as the engines put it in the payload frame (engine-contracts §2.2):
 * msgpack {@code [ts float64, events, data_parallel_rank]}, each event either a tag-first positional array or a map
 * with a {@code "type"} key. vLLM keys are unsigned 64-bit (uint64 {@code 0xcf} when ≥ 2^63), SGLang keys signed.
 * Written with msgpack-core independently of the gateway's decoder. Engine-loop confined (one reusable packer).
 */
final class KvEventEncoder {
    private static final String MEDIUM = "GPU";
    private final EventForm form;
    private final boolean unsignedKeys;
    private final boolean onePagePerEvent;
    /** vLLM's map form: {@code extra_keys} and {@code group_idx} after the eight fields every engine writes. */
    private final boolean vllmExtras;
    private final MessageBufferPacker packer = MessagePack.newDefaultBufferPacker();
    private int eventCount;
    private MessageBufferPacker events = MessagePack.newDefaultBufferPacker();
    /** The KV-cache group of the next events (hybrid models; -1 = no group fields beyond the defaults). */
    private int groupIdx = -1;
    private String groupKind;

    /**
     * The KV-cache group the following events belong to, as a hybrid model's vLLM publishes them: stores carry
     * {@code group_idx} and {@code kv_cache_spec_kind}, removals {@code group_idx}. -1 = the single-group form.
     */
    void group(int idx, String kind) {
        this.groupIdx = idx;
        this.groupKind = kind;
    }

    /**
     * @param onePagePerEvent SGLang announces every page in its own BlockStored event; vLLM one event per run
     */
    KvEventEncoder(EventForm form, boolean unsignedKeys, boolean onePagePerEvent) {
        this(form, unsignedKeys, onePagePerEvent, !onePagePerEvent);
    }

    private KvEventEncoder(EventForm form, boolean unsignedKeys, boolean onePagePerEvent, boolean vllmExtras) {
        this.form = form;
        this.unsignedKeys = unsignedKeys;
        this.onePagePerEvent = onePagePerEvent;
        this.vllmExtras = vllmExtras;
    }

    /**
     * TensorRT-LLM's streaming publisher (PR #17023, {@code _torch/pyexecutor/kv_cache_events.py} and the native
     * {@code StreamingEventSink}): map events tagged {@code "type"} whatever {@code --event-form} says (its structs
     * are not array_like), BlockStored with exactly the eight fields type, block_hashes, parent_block_hash,
     * token_ids, block_size, lora_id, medium, lora_name (the rest are omitted defaults), consecutive blocks coalesced
     * into one event, signed 64-bit keys.
     */
    static KvEventEncoder trtllmStreaming() {
        return new KvEventEncoder(EventForm.MAP, false, false, false);
    }

    boolean isEmpty() {
        return eventCount == 0;
    }

    /**
     * One stored run of blocks. {@code loraId}/{@code loraName}: the adapter the request ran with (vLLM's
     * {@code lora_request.lora_int_id}/{@code lora_name}; 0/null for the base model).
     */
    void blockStored(long[] keys, int from, int to, boolean hasParent, long parent, int[] tokens, int blockSize,
                     String cacheSalt, int loraId, String loraName) {
        try {
            if (onePagePerEvent) {
                for (int b = from; b < to; b++) {
                    boolean hp = b > from || hasParent;
                    long p = b > from ? keys[b - 1] : parent;
                    storedEvent(keys, b, b + 1, hp, p, tokens, blockSize, cacheSalt, loraId, loraName);
                }
            } else {
                storedEvent(keys, from, to, hasParent, parent, tokens, blockSize, cacheSalt, loraId, loraName);
            }
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    private void storedEvent(long[] keys, int from, int to, boolean hasParent, long parent, int[] tokens,
                             int blockSize, String cacheSalt, int loraId, String loraName) throws IOException {
        eventCount++;
        MessageBufferPacker p = events;
        boolean map = form == EventForm.MAP;
        boolean grouped = groupIdx >= 0;
        if (map) {
            p.packMapHeader(grouped ? 11 : vllmExtras ? 10 : 8);
            p.packString("type");
        } else {
            p.packArrayHeader(grouped ? 11 : 8); // vLLM's positions: ..., lora_name, extra_keys, group_idx, kind
        }
        p.packString("BlockStored");
        if (map) {
            p.packString("block_hashes");
        }
        p.packArrayHeader(to - from);
        for (int i = from; i < to; i++) {
            packKey(p, keys[i]);
        }
        if (map) {
            p.packString("parent_block_hash");
        }
        if (hasParent) {
            packKey(p, parent);
        } else {
            p.packNil();
        }
        if (map) {
            p.packString("token_ids");
        }
        p.packArrayHeader((to - from) * blockSize);
        for (int i = from * blockSize; i < to * blockSize; i++) {
            p.packInt(tokens[i]);
        }
        if (map) {
            p.packString("block_size");
        }
        p.packInt(blockSize);
        if (map) {
            p.packString("lora_id");
        }
        if (loraName != null) {
            p.packInt(loraId);
        } else {
            p.packNil();
        }
        if (map) {
            p.packString("medium");
        }
        p.packString(MEDIUM);
        if (map) {
            p.packString("lora_name");
        }
        if (loraName != null) {
            p.packString(loraName);
        } else {
            p.packNil();
        }
        if (grouped) {
            if (map) {
                p.packString("extra_keys");
            }
            p.packNil();
            if (map) {
                p.packString("group_idx");
            }
            p.packInt(groupIdx);
            if (map) {
                p.packString("kv_cache_spec_kind");
            }
            p.packString(groupKind);
        } else if (map && vllmExtras) {
            // vLLM: extra_keys[i] is the exact tuple hashed into block i (cache_salt on block 0 only)
            p.packString("extra_keys");
            p.packArrayHeader(to - from);
            for (int i = from; i < to; i++) {
                boolean salted = i == 0 && cacheSalt != null;
                int extras = (loraName != null ? 1 : 0) + (salted ? 1 : 0);
                if (extras == 0) {
                    p.packNil();
                    continue;
                }
                p.packArrayHeader(extras);
                if (loraName != null) {
                    p.packString(loraName);
                }
                if (salted) {
                    p.packString(cacheSalt);
                }
            }
            p.packString("group_idx");
            p.packInt(0);
        }
    }

    void blockRemoved(long[] keys, int count) {
        try {
            eventCount++;
            MessageBufferPacker p = events;
            boolean grouped = groupIdx >= 0;
            if (form == EventForm.MAP) {
                p.packMapHeader(grouped ? 4 : 3);
                p.packString("type");
                p.packString("BlockRemoved");
                p.packString("block_hashes");
            } else {
                p.packArrayHeader(grouped ? 4 : 3);
                p.packString("BlockRemoved");
            }
            p.packArrayHeader(count);
            for (int i = 0; i < count; i++) {
                packKey(p, keys[i]);
            }
            if (form == EventForm.MAP) {
                p.packString("medium");
            }
            p.packString(MEDIUM);
            if (grouped) {
                if (form == EventForm.MAP) {
                    p.packString("group_idx");
                }
                p.packInt(groupIdx);
            }
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    void allBlocksCleared() {
        try {
            eventCount++;
            if (form == EventForm.MAP) {
                events.packMapHeader(1);
                events.packString("type");
            } else {
                events.packArrayHeader(1);
            }
            events.packString("AllBlocksCleared");
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    /** The payload frame of the pending events; resets the encoder. */
    byte[] finishBatch(double tsSeconds, int rank) {
        try {
            packer.clear();
            packer.packArrayHeader(3);
            packer.packDouble(tsSeconds);
            packer.packArrayHeader(eventCount);
            packer.writePayload(events.toByteArray());
            packer.packInt(rank);
            byte[] out = packer.toByteArray();
            events.clear();
            eventCount = 0;
            return out;
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    private void packKey(MessageBufferPacker p, long key) throws IOException {
        if (unsignedKeys && key < 0) {
            p.packBigInteger(new BigInteger(Long.toUnsignedString(key)));
        } else {
            p.packLong(key);
        }
    }
}
