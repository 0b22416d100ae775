package io.kvgate.perf.tokenize;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import io.kvgate.index.tokenize.HfTokenizer;
import io.kvgate.index.tokenize.TokenizerCorpus;
import org.openjdk.jmh.annotations.AuxCounters;
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
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.zip.GZIPInputStream;

/**
 * Tokens per second of our {@link HfTokenizer} against the Rust HF tokenizers library (DJL binding, the ground
 * truth) on the same text, in one run. One benchmark op encodes a whole batch of strings; the {@code tokens}
 * counter (reported as a rate) is the number of ids produced, so {@code tokens} ops/s is tokens/s.
 *
 * <ul>
 *   <li>{@code corpus=fuzz}: the parity-test fuzz corpus (prose, code, numbers, white space, CJK, Arabic,
 *       emoji, combining marks, special-token text); {@code corpus=prose}: chat-like English with numbers.</li>
 *   <li>{@code djl}: Rust via JNI ({@code encode(text, false, false)}).</li>
 *   <li>{@code oursNoCache}: no caches at all (pure BPE speed).</li>
 *   <li>{@code oursColdCache}: caches cleared before every op (a batch fills them as it goes).</li>
 *   <li>{@code oursWarmChunkCacheOnly}: pre-token cache kept across ops, no segment cache: novel text made of
 *       recurring words.</li>
 *   <li>{@code oursWarmCache}: both caches kept across ops: the same texts again (re-sent prompts).</li>
 *   <li>{@code oursWarmCacheInto}: as warm, through the allocation-free {@code encodeInto}.</li>
 * </ul>
 * The first op of each benchmark also checks ids against DJL, so the numbers are for identical output.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(2)
public class TokenizerBench {
    @Param({"qwen3", "llama3_1"})
    public String model;

    @Param({"fuzz", "prose"})
    public String corpus;

    private HuggingFaceTokenizer djl;
    private HfTokenizer warm;
    private HfTokenizer cold;
    private HfTokenizer none;
    private HfTokenizer chunksOnly;
    private String[] texts;
    private Path tmp;

    /** Per-thread tokens counter, reported by JMH as a rate. */
    @State(Scope.Thread)
    @AuxCounters(AuxCounters.Type.OPERATIONS)
    public static class Tokens {
        public long tokens;

        @Setup(Level.Iteration)
        public void reset() {
            tokens = 0;
        }
    }

    public static Path repoRoot() {
        String home = System.getProperty("kvgate.home");
        if (home != null && !home.isBlank()) {
            return Path.of(home);
        }
        Path d = Path.of("").toAbsolutePath();
        while (d != null && !Files.exists(d.resolve("mvnw"))) {
            d = d.getParent();
        }
        if (d == null) {
            throw new IllegalStateException("set -Dkvgate.home to the repository root");
        }
        return d;
    }

    @Setup(Level.Trial)
    public void setUp() throws IOException {
        Path dir = repoRoot().resolve("deploy/models").resolve(model);
        tmp = Files.createTempDirectory("kvgate-bench-tok");
        Path json = tmp.resolve("tokenizer.json");
        try (InputStream in = new GZIPInputStream(Files.newInputStream(dir.resolve("tokenizer.json.gz")))) {
            Files.copy(in, json, StandardCopyOption.REPLACE_EXISTING);
        }
        djl = HuggingFaceTokenizer.newInstance(json, Map.of("addSpecialTokens", "false", "truncation", "false",
                "padding", "false", "modelMaxLength", "100000000"));
        warm = HfTokenizer.load(dir);
        cold = HfTokenizer.load(dir);
        none = HfTokenizer.load(dir, HfTokenizer.Caches.NONE);
        HfTokenizer.Caches d = HfTokenizer.Caches.DEFAULT;
        chunksOnly = HfTokenizer.load(dir, new HfTokenizer.Caches(d.chunkSlots(), d.chunkMaxChars(), 0, 0, 0));
        TokenizerCorpus gen = new TokenizerCorpus(20261130L);
        List<String> list = corpus.equals("fuzz") ? gen.strings(400, 24) : prose(gen);
        texts = list.toArray(new String[0]);
        for (String s : texts) {
            verify(s);
        }
    }

    void verify(String s) {
        long[] r = djl.encode(s, false, false).getIds();
        int[] expected = Arrays.stream(r).mapToInt(Math::toIntExact).toArray();
        for (HfTokenizer t : new HfTokenizer[] {warm, none, chunksOnly}) {
            if (!Arrays.equals(expected, t.encode(s, false))) {
                throw new IllegalStateException("ids differ from the Rust library for " + s);
            }
        }
    }

    /** English chat-like paragraphs: what most prompts are. */
    private static List<String> prose(TokenizerCorpus gen) {
        List<String> paras = new java.util.ArrayList<>();
        for (String p : gen.chatPrefixes(40, 60)) {
            int cut = p.lastIndexOf("<|im_start|>user\n");
            if (cut < 0) {
                cut = p.lastIndexOf("<|im_start|>assistant\n", p.length() - 30);
            }
            paras.add(p.substring(Math.max(0, cut)).replace("<|im_start|>", "").replace("<|im_end|>", "\n"));
        }
        return paras.subList(paras.size() - 30, paras.size());
    }

    @TearDown(Level.Trial)
    public void tearDown() throws IOException {
        djl.close();
        try (var files = Files.list(tmp)) {
            for (Path p : files.toList()) {
                Files.deleteIfExists(p);
            }
        }
        Files.deleteIfExists(tmp);
    }

    @Setup(Level.Invocation)
    public void clearCold() {
        cold.clearCaches();
    }

    @Benchmark
    public void djl(Tokens t, Blackhole bh) {
        for (String s : texts) {
            long[] ids = djl.encode(s, false, false).getIds();
            t.tokens += ids.length;
            bh.consume(ids);
        }
    }

    @Benchmark
    public void oursNoCache(Tokens t, Blackhole bh) {
        run(none, texts, t, bh);
    }

    @Benchmark
    public void oursColdCache(Tokens t, Blackhole bh) {
        run(cold, texts, t, bh);
    }

    /** Warm pre-token cache only: the steady state for text never seen before made of recurring words. */
    @Benchmark
    public void oursWarmChunkCacheOnly(Tokens t, Blackhole bh) {
        run(chunksOnly, texts, t, bh);
    }

    /** Warm pre-token and segment caches: the same texts again (re-sent prompts). */
    @Benchmark
    public void oursWarmCache(Tokens t, Blackhole bh) {
        run(warm, texts, t, bh);
    }

    /** Allocation-free path: ids go to a sink instead of a new array (compare gc.alloc.rate.norm). */
    @Benchmark
    public void oursWarmCacheInto(Tokens t, Blackhole bh) {
        for (String s : texts) {
            t.tokens += warm.encodeInto(s, false, sink);
        }
        bh.consume(sink.last);
    }

    /** A non-capturing sink kept in a field so the benchmark itself allocates nothing. */
    static final class Sink implements java.util.function.IntConsumer {
        int last;

        @Override
        public void accept(int id) {
            last ^= id;
        }
    }

    private final Sink sink = new Sink();

    private static void run(HfTokenizer tok, String[] in, Tokens t, Blackhole bh) {
        for (String s : in) {
            int[] ids = tok.encode(s, false);
            t.tokens += ids.length;
            bh.consume(ids);
        }
    }
}
