package io.kvgate.perf.relay;

import io.kvgate.dataplane.relay.ClientResponse;
import io.kvgate.dataplane.relay.UsageScanner;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The relay's token-usage scan of one engine answer ({@link UsageScanner}, which {@link ClientResponse} runs on every
 * successful answer's bytes), against the scanner it replaced ({@link UsageScannerBaseline}: a Netty {@code indexOf}
 * per quote and a {@code forEachByte} walk from it). One op = one whole answer, in pooled direct buffers as Netty
 * delivers them:
 * <ul>
 *   <li>{@code chat250}: the front-door benchmark's origin answer, a 250-byte chat completion (~50 quotes), one buffer;</li>
 *   <li>{@code chat4k}: a 4 KiB chat completion, mostly the content text (few quotes), one buffer;</li>
 *   <li>{@code logprobs4k}: a 4 KiB chat completion with logprobs (a quote every ~6 bytes), one buffer;</li>
 *   <li>{@code sse20}: a stream of 20 content chunks each with {@code "usage":null} (SGLang's shape) and a final usage
 *       chunk then {@code [DONE]}, one buffer per event as the relay scans them.</li>
 * </ul>
 * One scanner per thread across ops (an answer leaves it looking for the next {@code "usage"}), so an op allocates
 * nothing of its own: run with {@code -prof gc} for the bytes per answer. The JMH thread is not a Netty event-loop
 * thread, so the new scanner's per-thread scratch is found through {@code FastThreadLocal}'s slower fallback here.
 *
 * <p>Reaches the scanner through its public {@code scanUsage(ByteBuf)} (perf classes stay out of product packages:
 * {@code LayeringTest.perfClassesLiveInPerfPackages}).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(2)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
public class UsageScanBench {
    @Param({"chat250", "chat4k", "logprobs4k", "sse20"})
    public String answer;

    private static final String USAGE = "\"usage\":{\"prompt_tokens\":812,\"completion_tokens\":20,\"total_tokens\":832,"
        + "\"prompt_tokens_details\":{\"cached_tokens\":768}}";
    private ByteBuf[] pieces;
    private final UsageScanner scanner = new UsageScanner();
    private final UsageScannerBaseline baseline = new UsageScannerBaseline();

    @Setup
    public void setUp() {
        String[] texts = switch (answer) {
            case "chat250" -> new String[] {"{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion\",\"created\":1764460800,"
                + "\"model\":\"bench\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"ok\"},"
                + "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,\"total_tokens\":2}}"};
            case "chat4k" -> new String[] {completion(content(4096))};
            case "logprobs4k" -> new String[] {completion(logprobs(4096))};
            case "sse20" -> stream();
            default -> throw new IllegalArgumentException(answer);
        };
        pieces = new ByteBuf[texts.length];
        for (int i = 0; i < texts.length; i++) {
            byte[] b = texts[i].getBytes(StandardCharsets.UTF_8);
            pieces[i] = PooledByteBufAllocator.DEFAULT.directBuffer(b.length).writeBytes(b);
        }
        // both read the same usage, and again on the next op from the state the answer left them in
        for (int round = 0; round < 2; round++) {
            long n = scanner();
            long b = baseline();
            if (n != b || n == 0) {
                throw new IllegalStateException("new " + n + " vs baseline " + b + " on " + answer);
            }
        }
    }

    @TearDown
    public void tearDown() {
        for (ByteBuf p : pieces) {
            p.release();
        }
    }

    private static String completion(String choiceTail) {
        return "{\"id\":\"chatcmpl-4f1c2b7a9e\",\"object\":\"chat.completion\",\"created\":1764460800,\"model\":\"Qwen/Qwen3-8B\","
            + "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":" + choiceTail
            + ",\"finish_reason\":\"stop\"}]," + USAGE + "}";
    }

    /** A content string padded so that the whole answer is {@code total} bytes. */
    private static String content(int total) {
        int room = total - completion("\"\"},\"logprobs\":null").length();
        String sentence = "The gateway routes each request to the engine that already holds its prefix.\\n";
        StringBuilder s = new StringBuilder("\"");
        while (s.length() + sentence.length() <= room) {
            s.append(sentence);
        }
        s.append("x".repeat(room - s.length())).append("\"},\"logprobs\":null");
        return s.toString();
    }

    /** A short content with per-token logprobs, padded to {@code total} bytes of answer. */
    private static String logprobs(int total) {
        StringBuilder s = new StringBuilder("\"ok\"},\"logprobs\":{\"content\":[");
        int room = total - completion("").length() - 2;
        for (int t = 0; ; t++) {
            String entry = (t == 0 ? "" : ",") + "{\"token\":\"w" + t % 97 + "\",\"logprob\":-0.25,\"bytes\":[119],\"top_logprobs\":[]}";
            if (s.length() + entry.length() > room) {
                break;
            }
            s.append(entry);
        }
        return s.append("]}").toString();
    }

    private static String[] stream() {
        String head = "data: {\"id\":\"chatcmpl-4f1c2b7a9e\",\"object\":\"chat.completion.chunk\",\"created\":1764460800,"
            + "\"model\":\"Qwen/Qwen3-8B\",\"choices\":";
        String[] events = new String[21];
        for (int i = 0; i < 20; i++) {
            events[i] = head + "[{\"index\":0,\"delta\":{\"content\":\" word" + i + "\"},\"logprobs\":null,\"finish_reason\":"
                + (i == 19 ? "\"stop\"" : "null") + "}],\"usage\":null}\n\n";
        }
        events[20] = head + "[]," + USAGE + "}\n\ndata: [DONE]\n\n";
        return events;
    }

    @Benchmark
    public long scanner() {
        for (ByteBuf p : pieces) {
            scanner.scanUsage(p);
        }
        return scanner.promptTokens() + scanner.completionTokens() + scanner.cachedTokens();
    }

    @Benchmark
    public long baseline() {
        for (ByteBuf p : pieces) {
            baseline.scanUsage(p);
        }
        return baseline.promptTokens() + baseline.completionTokens() + baseline.cachedTokens();
    }
}
