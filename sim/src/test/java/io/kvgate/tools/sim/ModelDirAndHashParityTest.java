package io.kvgate.tools.sim;

import static io.kvgate.tools.sim.SimHttp.json;
import static io.kvgate.tools.sim.SimHttp.post;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.index.hash.BlockHashSpec;
import io.kvgate.index.hash.BlockHasher;
import io.kvgate.index.hash.HashAlgo;
import io.kvgate.index.prompt.PromptRenderer;
import io.kvgate.index.tokenize.HfTokenizer;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The simulator's independent block keys agree with the gateway's {@link BlockHasher} on random prompts (two
 * implementations of one contract, each also pinned to the spec vectors), and {@code --model-dir} makes the
 * simulator count and key the real tokenizer's ids.
 */
class ModelDirAndHashParityTest {

    static Path repoRoot() {
        String prop = System.getProperty("kvgate.repo.root");
        if (prop != null && Files.isRegularFile(Path.of(prop, "mvnw"))) {
            return Path.of(prop);
        }
        Path p = Path.of("").toAbsolutePath();
        while (p != null && !Files.isRegularFile(p.resolve("mvnw"))) {
            p = p.getParent();
        }
        return p;
    }

    @Test
    void simulatorKeysEqualTheGatewayHasherOnRandomPrompts() {
        SplittableRandom rnd = new SplittableRandom(7);
        for (int round = 0; round < 200; round++) {
            int[] tokens = rnd.ints(rnd.nextInt(1, 200), 0, 200_000).toArray();
            String salt = rnd.nextInt(4) == 0 ? "salt-" + rnd.nextInt(100) : null;
            String seed = rnd.nextBoolean() ? "0" : Integer.toString(rnd.nextInt(1000));
            int bs = new int[] {1, 4, 16, 32}[rnd.nextInt(4)];
            for (HashAlgo algo : HashAlgo.values()) {
                BlockHashSpec spec = algo.isVllm() ? BlockHashSpec.vllm(algo, bs, seed, null)
                    : algo.isTrtllm() ? BlockHashSpec.trtllmV2(bs) : BlockHashSpec.sglang(bs);
                long[] expected = new long[tokens.length / bs];
                int n = new BlockHasher(spec).hash(tokens, tokens.length, salt, expected);
                if (algo.isTrtllm() && salt != null) {
                    // TensorRT-LLM's salt id is BLAKE3: the gateway computes no salted keys (routed without KV scores).
                    assertEquals(BlockHasher.ERR_BAD_CACHE_SALT, n);
                    continue;
                }
                assertEquals(expected.length, n);
                long[] ours = BlockKeyer.forAlgo(algo.configName(), seed).blockKeys(tokens, bs, salt);
                assertArrayEquals(expected, ours, algo + " bs=" + bs + " seed=" + seed + " salt=" + salt);
            }
        }
    }

    @Test
    @Tag("system")
    @Timeout(60)
    void modelDirUsesTheRealTokenizerAndChatTemplate() throws Exception {
        Path qwen = repoRoot().resolve("deploy/models/qwen3");
        HfTokenizer tok = HfTokenizer.load(qwen);
        PromptRenderer renderer = new PromptRenderer(tok::encode, tok.config().chatTemplate(), tok.config().bosToken(),
            tok.config().eosToken());
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.VLLM).modelDir(qwen))) {
            String chat = SimHttp.chat("m", "What is the capital of France? Answer in one word.", "\"max_tokens\":1");
            JsonNode r = json(post(sim, "/v1/chat/completions", chat));
            int[] expected = renderer.renderChat(SimHttp.MAPPER.readTree(chat)).tokenIds();
            assertEquals(expected.length, r.at("/usage/prompt_tokens").asInt());
            assertTrue(Arrays.stream(expected).anyMatch(t -> t == 151644), "<|im_start|> is one special id");
            JsonNode c = json(post(sim, "/v1/completions", "{\"model\":\"m\",\"prompt\":\"Hello world, hello KV cache.\",\"max_tokens\":1}"));
            assertEquals(tok.encode("Hello world, hello KV cache.", true).length, c.at("/usage/prompt_tokens").asInt());
        }
    }
}
