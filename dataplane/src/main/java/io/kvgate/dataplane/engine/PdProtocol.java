package io.kvgate.dataplane.engine;

/**
 * The prefill/decode protocols the gateway speaks ({@code ../shared/docs/engine-contracts.md} §4). A profile names
 * its protocol; {@code pd.PdDialect} holds the code of each (the dialects sit above this package, so the profile
 * names the protocol rather than holding the dialect object). Two engines speaking one protocol share its dialect.
 */
public enum PdProtocol {
    /** No disaggregation (llama.cpp). */
    NONE,
    /** vLLM: sequential legs, the prefill answer's {@code kv_transfer_params} handed to decode. */
    KV_TRANSFER_PARAMS,
    /** TensorRT-LLM: sequential context and generation legs, {@code disaggregated_params} handed on. */
    DISAGGREGATED_PARAMS,
    /** SGLang: concurrent, coupled legs meeting at the prefill server's bootstrap port with a shared room. */
    BOOTSTRAP_ROOM
}
