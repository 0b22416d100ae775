package io.kvgate.index.hash;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class BlockHashSpecTest {
    private static void assertRejected(String field, String value, Runnable r) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, r::run);
        assertTrue(e.getMessage().startsWith(field + "="), e.getMessage());
        assertTrue(e.getMessage().contains(value), e.getMessage());
        assertTrue(e.getMessage().contains("must"), e.getMessage());
    }

    @Test
    void rejectsBadFieldsNamingFieldValueAndRule() {
        assertRejected("algo", "null", () -> new BlockHashSpec(null, 16, "0", null));
        assertRejected("blockSize", "0", () -> new BlockHashSpec(HashAlgo.SHA256_CBOR, 0, "0", null));
        assertRejected("blockSize", "-3", () -> BlockHashSpec.sglang(-3));
        assertRejected("blockSize", "65537", () -> new BlockHashSpec(HashAlgo.SHA256_CBOR, 65_537, "0", null));
        assertRejected("seed", "null", () -> new BlockHashSpec(HashAlgo.SHA256_CBOR, 16, null, null));
        assertRejected("seed", "'O'", () -> new BlockHashSpec(HashAlgo.XXHASH_CBOR, 16, "O", null));
        assertRejected("loraName", "''", () -> new BlockHashSpec(HashAlgo.SHA256_CBOR, 16, "0", ""));
        assertRejected("loraName", "unpaired", () -> new BlockHashSpec(HashAlgo.SHA256_CBOR, 16, "0", "x\uD800"));
    }

    @Test
    void sglangIgnoresSeedAndLora() {
        BlockHashSpec s = BlockHashSpec.sglang(1);
        assertNull(s.seed());
        new BlockHashSpec(HashAlgo.SHA256_SGLANG, 16, "anything", "lora");
        new BlockHashSpec(HashAlgo.SHA256_CBOR, 65_536, "0", "my-lora");
    }

    @Test
    void acceptsVllmDefaultSeedOnlyWhereVllmHashesIt() {
        // sha256_cbor without PYTHONHASHSEED: vLLM seeds NONE_HASH with "vllm-none-hash" (PR #51875).
        assertTrue(new BlockHashSpec(HashAlgo.SHA256_CBOR, 16, "vllm-none-hash", null).seed().equals("vllm-none-hash"));
        // xxhash_cbor without PYTHONHASHSEED draws os.urandom; Python refuses "vllm-none-hash" as a PYTHONHASHSEED.
        assertRejected("seed", "'vllm-none-hash'", () -> new BlockHashSpec(HashAlgo.XXHASH_CBOR, 16, "vllm-none-hash", null));
        assertFalse(BlockHashSpec.isAcceptedPythonHashSeed("vllm-none-hash"));
    }

    @Test
    void seedFollowsPythonHashSeedRules() {
        // Python starts with these (strtoul base 10, whole string, <= 2^32-1; "random"; empty = unset).
        for (String ok : new String[] {"0", "42", "4294967295", "random", "", " 7", "\t\n+5", "+12", "-0", "007",
            "0".repeat(300)}) {
            assertTrue(BlockHashSpec.isAcceptedPythonHashSeed(ok), ok);
        }
        // Python refuses to start with these.
        for (String bad : new String[] {"4294967296", "-1", "7 ", "0x10", "1e3", " ", "+", "-", "Random", "O",
            "99999999999999999999", "1.0"}) {
            assertFalse(BlockHashSpec.isAcceptedPythonHashSeed(bad), bad);
        }
    }
}
