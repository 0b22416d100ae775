package io.kvgate.ingest.zmq;

/** How an endpoint's events are keyed in the index. */
public enum KeyMode {
    /** The engine's own block hashes (the gateway reproduces them: vLLM sha256_cbor/xxhash_cbor, SGLang). */
    ENGINE,
    /**
     * The gateway's own chained hash of the events' token_ids, for engines whose hashes cannot be reproduced
     * (PYTHONHASHSEED unset, vLLM's pickle-based {@code sha256}); engine keys are mapped to own keys for removals.
     */
    LEARNED
}
