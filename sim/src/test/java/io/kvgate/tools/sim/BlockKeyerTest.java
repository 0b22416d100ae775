package io.kvgate.tools.sim;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.HexFormat;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/** The simulator's keys against the vectors in engine-contracts §3.3 (recomputed from the engines' code). */
class BlockKeyerTest {
    static int[] range(int from, int to, int step) {
        return IntStream.iterate(from, i -> i <= to, i -> i + step).toArray();
    }

    @Test
    void noneHashForSeed0() {
        var k = new BlockKeyer.VllmCbor(false, "0");
        assertEquals("4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e",
            HexFormat.of().formatHex(k.noneHash()));
        var x = new BlockKeyer.VllmCbor(true, "0");
        assertEquals("1ebe36576dcb573f26b99533a20aaeca", HexFormat.of().formatHex(x.noneHash()));
    }

    @Test
    void vllmSha256AndXxhashChains() {
        int[] tokens = range(101, 3232, 101);
        assertEquals(32, tokens.length);
        assertArrayEquals(new long[] {7876691182959014722L, Long.parseUnsignedLong("8769878286166771163")},
            BlockKeyer.forAlgo("sha256_cbor", "0").blockKeys(tokens, 16, null));
        assertArrayEquals(new long[] {Long.parseUnsignedLong("11066090714971094433"), 8162514883595054550L},
            BlockKeyer.forAlgo("xxhash_cbor", "0").blockKeys(tokens, 16, null));
    }

    @Test
    void vllmCacheSaltOnBlockZeroOnly() {
        int[] tokens = range(1, 32, 1);
        assertArrayEquals(new long[] {3236607068019569386L, 2758186210834249151L},
            BlockKeyer.forAlgo("sha256_cbor", "0").blockKeys(tokens, 16, null));
        assertArrayEquals(new long[] {Long.parseUnsignedLong("14196867505284063976"),
            Long.parseUnsignedLong("17764566542762686944")},
            BlockKeyer.forAlgo("sha256_cbor", "0").blockKeys(tokens, 16, "salt-1"));
        assertEquals(1, BlockKeyer.forAlgo("sha256_cbor", "0").blockKeys(range(1, 31, 1), 16, null).length,
            "only full blocks get keys");
    }

    @Test
    void sglangPages() {
        BlockKeyer s = BlockKeyer.forAlgo("sha256_sglang", "ignored");
        assertArrayEquals(new long[] {8635429971592222890L, 1256577331724852459L, 5689809685380680247L},
            s.blockKeys(range(1, 48, 1), 16, null));
        assertArrayEquals(new long[] {-2360060374177730597L}, s.blockKeys(new int[] {0}, 1, null));
        assertArrayEquals(new long[] {7470307888890966271L, -1634645291211865391L, 7325169757385981536L},
            s.blockKeys(new int[] {1, 2, 3}, 1, null));
        assertArrayEquals(new long[] {3451139630862032982L, -5034188771989179167L},
            s.blockKeys(range(1, 32, 1), 16, "tenant-a"));
    }
}
