package io.kvgate.perf.tokenize;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import io.kvgate.index.tokenize.HfTokenizer;
import io.kvgate.index.tokenize.TokenizerCorpus;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.infra.Blackhole;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.zip.GZIPInputStream;

/**
 * A growing multi-turn conversation: a 16-turn ChatML transcript (long system prompt, ~120 words per turn) where
 * every request re-sends all earlier turns. One op encodes every prefix once, as a gateway does turn after turn;
 * {@code tokens} (a rate) counts ids produced. With the segment cache, text between special tokens that was seen
 * before (system prompt, earlier turns) costs a hash and a compare instead of BPE.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(2)
public class ChatTokenizerBench {
    @Param({"qwen3"})
    public String model;

    private HuggingFaceTokenizer djl;
    private HfTokenizer segments;
    private HfTokenizer chunksOnly;
    private String[] chat;
    private Path tmp;

    @Setup(Level.Trial)
    public void setUp() throws IOException {
        Path dir = TokenizerBench.repoRoot().resolve("deploy/models").resolve(model);
        tmp = Files.createTempDirectory("kvgate-bench-chat");
        Path json = tmp.resolve("tokenizer.json");
        try (InputStream in = new GZIPInputStream(Files.newInputStream(dir.resolve("tokenizer.json.gz")))) {
            Files.copy(in, json, StandardCopyOption.REPLACE_EXISTING);
        }
        djl = HuggingFaceTokenizer.newInstance(json, Map.of("addSpecialTokens", "false", "truncation", "false",
                "padding", "false", "modelMaxLength", "100000000"));
        segments = HfTokenizer.load(dir);
        HfTokenizer.Caches d = HfTokenizer.Caches.DEFAULT;
        chunksOnly = HfTokenizer.load(dir, new HfTokenizer.Caches(d.chunkSlots(), d.chunkMaxChars(), 0, 0, 0));
        chat = new TokenizerCorpus(7L).chatPrefixes(16, 120).toArray(new String[0]);
        for (String s : chat) {
            int[] expected = Arrays.stream(djl.encode(s, false, false).getIds()).mapToInt(Math::toIntExact).toArray();
            if (!Arrays.equals(expected, segments.encode(s, false)) || !Arrays.equals(expected, chunksOnly.encode(s, false))) {
                throw new IllegalStateException("ids differ from the Rust library");
            }
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() throws IOException {
        djl.close();
        Files.deleteIfExists(tmp.resolve("tokenizer.json"));
        Files.deleteIfExists(tmp);
    }

    @Benchmark
    public void chatDjl(TokenizerBench.Tokens t, Blackhole bh) {
        for (String s : chat) {
            long[] ids = djl.encode(s, false, false).getIds();
            t.tokens += ids.length;
            bh.consume(ids);
        }
    }

    @Benchmark
    public void chatOursChunkCacheOnly(TokenizerBench.Tokens t, Blackhole bh) {
        run(chunksOnly, t, bh);
    }

    @Benchmark
    public void chatOursSegmentCache(TokenizerBench.Tokens t, Blackhole bh) {
        run(segments, t, bh);
    }

    private void run(HfTokenizer tok, TokenizerBench.Tokens t, Blackhole bh) {
        for (String s : chat) {
            int[] ids = tok.encode(s, false);
            t.tokens += ids.length;
            bh.consume(ids);
        }
    }
}
