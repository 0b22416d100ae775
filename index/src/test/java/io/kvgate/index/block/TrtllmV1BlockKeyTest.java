package io.kvgate.index.block;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/**
 * TensorRT-LLM's v1 block key against golden vectors printed by testkit/src/test/python/trtllm_v1_block_key.py, a
 * re-implementation of the engine's Python reference {@code hash_v1_block_key} (tensorrt_llm/runtime/kv_cache_hash.py
 * at 991de58c52acf039626cabc30e7c4f4106d222fd). Each vector is the chain of block keys of one prompt.
 */
class TrtllmV1BlockKeyTest {
    private static long[] chain(TrtllmV1BlockKey h, int[] tokens, int block) {
        long[] keys = new long[tokens.length / block];
        long parent = h.rootKey();
        for (int b = 0; b < keys.length; b++) {
            parent = h.blockKey(parent, tokens, b * block, block);
            keys[b] = parent;
        }
        return keys;
    }

    private static int[] range(int from, int to) {
        return IntStream.range(from, to).toArray();
    }

    @Test
    void plainKeysEqualThePythonReference() {
        assertArrayEquals(new long[] {924206229973855L}, chain(TrtllmV1BlockKey.PLAIN, range(1, 5), 4));
        int[] prompt = IntStream.range(0, 96).map(i -> (i * 7919 + 13) % 151936).toArray();
        assertArrayEquals(new long[] {3862795136993660333L, -6936126416497205348L, 1527226618173287550L},
            chain(TrtllmV1BlockKey.PLAIN, prompt, 32));
    }

    @Test
    void tokenIdsAreMixedAsUnsigned32BitValues() {
        // 0xFFFFFFFF is -1 in a Java int; the engine casts each token id to uint32_t
        int[] tokens = {0, 1, 0x7FFFFFFF, (int) 0xFFFFFFFFL, 65535, 65536, 151935, 2};
        assertArrayEquals(new long[] {733254774019102L, 4732767381703686880L}, chain(TrtllmV1BlockKey.PLAIN, tokens, 4));
    }

    @Test
    void loraTaskIdAndCacheSaltIdChangeTheKeysAsTheEngineDoes() {
        int[] tokens = range(100, 132);
        assertArrayEquals(new long[] {-9119423320954386162L, -6938514039037633371L},
            chain(TrtllmV1BlockKey.of(7L, null), tokens, 16), "the task id enters every block");
        assertArrayEquals(new long[] {-3751148619528251811L, 4332003471871257487L},
            chain(TrtllmV1BlockKey.of(null, 0x0123456789ABCDEFL), tokens, 16), "the salt id enters block 0 only");
        assertArrayEquals(new long[] {-823215797222015671L, 5665179435768021394L},
            chain(TrtllmV1BlockKey.of(Long.MIN_VALUE, -1L), tokens, 16), "both, at their 64-bit extremes");
        assertNotEquals(chain(TrtllmV1BlockKey.PLAIN, tokens, 16)[0], chain(TrtllmV1BlockKey.of(7L, null), tokens, 16)[0]);
        assertSame(TrtllmV1BlockKey.PLAIN, TrtllmV1BlockKey.of(null, null));
    }
}
