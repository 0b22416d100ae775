package io.kvgate.index.hash;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class HashAlgoTest {
    @Test
    void parsesEveryConfigName() {
        for (HashAlgo algo : HashAlgo.values()) {
            assertEquals(algo, HashAlgo.parse(algo.configName()));
        }
        assertEquals("sha256_cbor", HashAlgo.SHA256_CBOR.configName());
        assertEquals("xxhash_cbor", HashAlgo.XXHASH_CBOR.configName());
        assertEquals("sha256_sglang", HashAlgo.SHA256_SGLANG.configName());
        assertEquals("v2_sha256_64", HashAlgo.V2_SHA256_64.configName());
    }

    @Test
    void unknownNameListsAcceptedNames() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> HashAlgo.parse("sha256"));
        assertTrue(e.getMessage().contains("'sha256'"), e.getMessage());
        assertTrue(e.getMessage().contains("sha256_cbor, xxhash_cbor, sha256_sglang, v2_sha256_64"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> HashAlgo.parse(null));
        assertThrows(IllegalArgumentException.class, () -> HashAlgo.parse("SHA256_CBOR"));
    }

    @Test
    void engineCompatibilityAndDefaults() {
        assertTrue(HashAlgo.engineSupports("vllm", HashAlgo.SHA256_CBOR));
        assertTrue(HashAlgo.engineSupports("vllm", HashAlgo.XXHASH_CBOR));
        assertFalse(HashAlgo.engineSupports("vllm", HashAlgo.SHA256_SGLANG));
        assertTrue(HashAlgo.engineSupports("sglang", HashAlgo.SHA256_SGLANG));
        assertFalse(HashAlgo.engineSupports("sglang", HashAlgo.SHA256_CBOR));
        assertFalse(HashAlgo.engineSupports("sglang", HashAlgo.XXHASH_CBOR));
        assertEquals(HashAlgo.SHA256_CBOR, HashAlgo.defaultFor("vllm"));
        assertEquals(HashAlgo.SHA256_SGLANG, HashAlgo.defaultFor("sglang"));
        assertEquals(HashAlgo.V2_SHA256_64, HashAlgo.defaultFor("trtllm"));
        assertTrue(HashAlgo.engineSupports("trtllm", HashAlgo.V2_SHA256_64));
        assertFalse(HashAlgo.engineSupports("trtllm", HashAlgo.SHA256_SGLANG));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
            () -> HashAlgo.defaultFor("llamacpp"));
        assertTrue(e.getMessage().contains("'llamacpp'") && e.getMessage().contains("vllm, sglang, trtllm"), e.getMessage());
        IllegalArgumentException mismatch = assertThrows(IllegalArgumentException.class,
            () -> HashAlgo.requireCompatible("sglang", HashAlgo.SHA256_CBOR));
        assertTrue(mismatch.getMessage().contains("'sha256_cbor'") && mismatch.getMessage().contains("'sglang'"));
        HashAlgo.requireCompatible("vllm", HashAlgo.XXHASH_CBOR);
    }

    @Test
    void digestSizes() {
        assertEquals(32, HashAlgo.SHA256_CBOR.digestBytes());
        assertEquals(16, HashAlgo.XXHASH_CBOR.digestBytes());
        assertEquals(32, HashAlgo.SHA256_SGLANG.digestBytes());
        assertEquals("vllm", HashAlgo.XXHASH_CBOR.engineName());
        assertEquals("sglang", HashAlgo.SHA256_SGLANG.engineName());
        assertEquals(32, HashAlgo.V2_SHA256_64.digestBytes());
        assertEquals("trtllm", HashAlgo.V2_SHA256_64.engineName());
    }
}
