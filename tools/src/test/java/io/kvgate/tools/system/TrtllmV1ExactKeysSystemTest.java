package io.kvgate.tools.system;

import org.junit.jupiter.api.Tag;

/**
 * {@link TrtllmKvExactSystemTest} with {@code kv_key_mode: exact} and {@code hash_algo: v1_block_key} (issue #36 item
 * 10, review T5): the gateway indexes the blocks under the hashes of the engines' own drained events and keys
 * requests with TensorRT-LLM's v1 block key, so the same families land where they are cached and removals apply
 * directly, without a learned-key map. The simulator computes the v1 keys with its own implementation.
 */
@Tag("system")
class TrtllmV1ExactKeysSystemTest extends TrtllmKvExactSystemTest {
    @Override
    protected String keySettings() {
        return "    kv_key_mode: exact\n    hash_algo: v1_block_key\n";
    }
}
