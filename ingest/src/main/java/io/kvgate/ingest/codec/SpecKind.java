package io.kvgate.ingest.codec;

import java.nio.charset.StandardCharsets;

/**
 * Codes for a vLLM BlockStored's {@code kv_cache_spec_kind} (vLLM's {@code KVCacheSpecKind} values, sent since hybrid
 * models publish one event stream per KV-cache group with {@code group_idx}). Only the full-attention kinds keep
 * every block of a prefix, so only their blocks say "this prefix is cached": a sliding-window group drops blocks
 * outside its window and a Mamba group keeps one state, whatever their events announce.
 */
public final class SpecKind {
    /** Field absent or nil (engines before hybrid-group events, SGLang, TensorRT-LLM's vLLM-compatible stream). */
    public static final int NONE = 0;
    public static final int FULL_ATTENTION = 1;
    public static final int MLA_ATTENTION = 2;
    public static final int SINK_FULL_ATTENTION = 3;
    public static final int SLIDING_WINDOW = 4;
    public static final int SLIDING_WINDOW_MLA = 5;
    public static final int MAMBA = 6;
    public static final int CHUNKED_LOCAL_ATTENTION = 7;
    public static final int ENCODER_ONLY_ATTENTION = 8;
    public static final int CROSS_ATTENTION = 9;
    /** vLLM's own "unknown", or a string this decoder does not know. */
    public static final int OTHER = 10;

    static final byte[][] NAMES = {
        null,
        ascii("full_attention"),
        ascii("mla_attention"),
        ascii("sink_full_attention"),
        ascii("sliding_window"),
        ascii("sliding_window_mla"),
        ascii("mamba"),
        ascii("chunked_local_attention"),
        ascii("encoder_only_attention"),
        ascii("cross_attention"),
    };

    private SpecKind() {
    }

    /**
     * Whether blocks of this kind are a prefix cache in the gateway's sense (every block of the prefix kept): the
     * full-attention kinds, and events without a kind (single-group engines, where the one group is the model's).
     */
    public static boolean holdsWholePrefix(int code) {
        return code == NONE || code == FULL_ATTENTION || code == MLA_ATTENTION || code == SINK_FULL_ATTENTION;
    }

    public static String name(int code) {
        if (code > NONE && code < NAMES.length) {
            return new String(NAMES[code], StandardCharsets.US_ASCII);
        }
        return code == NONE ? "none" : "other";
    }

    private static byte[] ascii(String s) {
        return s.getBytes(StandardCharsets.US_ASCII);
    }
}
