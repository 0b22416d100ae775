package io.kvgate.tools.sim;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** Pure pieces: tokenizer scheme, text generator, latency model, config parsing and validation. */
class SimulatorUnitTest {

    @Test
    void wordTokenizerScheme() {
        WordTokenizer t = new WordTokenizer();
        assertEquals(4, t.encodeText("Hello, world!").length, "Hello | , | ' world' | !");
        assertEquals(3, t.encodeText("<|im_start|>user\n").length - 0);
        int[] a = t.encodeText("the quick brown fox");
        int[] b = t.encodeText("the quick brown fox jumps");
        assertArrayEquals(a, java.util.Arrays.copyOf(b, a.length), "shared text prefix => shared token prefix");
        assertEquals(WordTokenizer.IM_START, t.encodeText("<|im_start|>")[0]);
        assertEquals(1, t.encodeText("   ").length, "trailing whitespace is one token");
        for (int id : t.encodeText("über naïve 数据 x")) {
            assertTrue(id >= 0 && id < WordTokenizer.VOCAB);
        }
    }

    @Test
    void chatRenderingIsChatMl() {
        var req = SimHttp.MAPPER.createObjectNode();
        req.putArray("messages").addObject().put("role", "user").put("content", "hi");
        assertEquals("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", WordTokenizer.renderChatMl(req));
    }

    @Test
    void generatorIsDeterministicPerSeedAndChoice() {
        long s0 = TextGenerator.sequenceSeed(1, 0, 42, 0);
        assertEquals(s0, TextGenerator.sequenceSeed(1, 0, 42, 0));
        assertNotEquals(s0, TextGenerator.sequenceSeed(1, 0, 42, 1));
        assertNotEquals(s0, TextGenerator.sequenceSeed(2, 0, 42, 0));
        assertEquals(TextGenerator.token(s0, 3), TextGenerator.token(s0, 3));
        assertTrue(TextGenerator.token(s0, 1).startsWith(" "));
        assertTrue(!TextGenerator.token(s0, 0).startsWith(" "));
        int n = TextGenerator.naturalLength(s0, 8, 48);
        assertTrue(n >= 8 && n <= 48);
    }

    @Test
    void latencyChargesOnlyUncachedTokens() {
        LatencyModel m = new LatencyModel(20, 10, 50);
        assertEquals(20_000_000L, m.firstTokenDelayNs(0));
        assertEquals(20_000_000L + 1000 * 50_000L, m.firstTokenDelayNs(1000));
        assertEquals(m.firstTokenDelayNs(200), m.firstTokenDelayNs(200));
        assertTrue(m.firstTokenDelayNs(1000 - 800) < m.firstTokenDelayNs(1000), "a cache hit shortens TTFT");
        assertEquals(10_000_000L, m.interTokenDelayNs());
    }

    @Test
    void parsesFlags() {
        SimulatorConfig c = SimulatorConfig.parse(new String[] {"--dialect", "sglang", "--port", "0", "--model", "q",
            "--ttft-ms", "5", "--itl-ms", "1.5", "--error-shape", "openai", "--enable-metrics", "--queue", "3"});
        c.validate();
        assertEquals(SimulatorConfig.Dialect.SGLANG, c.dialect);
        assertEquals(1.5, c.itlMs);
        assertEquals(SimulatorConfig.ErrorShape.OPENAI, c.effectiveErrorShape());
        assertTrue(c.metricsMounted());
        assertEquals(1, c.effectiveBlockSize(), "SGLang default page size");
    }

    @Test
    void badFlagsNameFieldValueAndRule() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
            () -> SimulatorConfig.parse(new String[] {"--dialect", "trt"}));
        assertEquals("--dialect=trt: must be one of vllm|sglang|trtllm|llamacpp", e.getMessage());
        IllegalArgumentException v = assertThrows(IllegalArgumentException.class,
            () -> new SimulatorConfig().maxConcurrency(0).dpRanks(9).validate());
        assertTrue(v.getMessage().contains("max-concurrency=0: must be in 1..1000000"), v.getMessage());
        assertTrue(v.getMessage().contains("dp-ranks=9: must be in 1..8"), v.getMessage());
        assertThrows(IllegalArgumentException.class, () -> new SimulatorConfig().hashAlgo("sha256_sglang").validate());
        assertThrows(IllegalArgumentException.class, () -> SimulatorConfig.parse(new String[] {"--port"}));
    }
}
