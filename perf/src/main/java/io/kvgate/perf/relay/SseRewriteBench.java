package io.kvgate.perf.relay;

import io.kvgate.dataplane.relay.ByteMatcher;
import io.kvgate.dataplane.relay.ClientResponse;
import io.kvgate.dataplane.relay.EngineStreamCheck;
import io.kvgate.dataplane.relay.SseFramer;
import io.kvgate.dataplane.relay.SseRewriter;
import io.kvgate.dataplane.relay.UsageScanner;
import io.kvgate.dataplane.request.AnswerRewrite;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.buffer.Unpooled;
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
 * The relay's per-stream cost of the answer rewrites (issue #13 items 2, 4, 5). One op = one whole vLLM-style chat
 * stream ({@code tokens} content chunks + finish + usage chunk + [DONE], ~190 bytes a chunk) arriving in 512-byte
 * network reads, through what {@link ClientResponse} runs on each read: {@link SseFramer} → {@link EngineStreamCheck}
 * → either the byte-for-byte path's usage scan ({@code relay}) or an {@link SseRewriter} ({@code stripUsage}: forced
 * usage only, the common rewrite; {@code alias}; {@code aliasReplicate4}: greedy n=4). {@code nettyIndexOf} and
 * {@code byteMatcher} compare the byte search the stream check used before with the one it uses now, on one read.
 * Run with {@code -prof gc} for the allocation per stream.
 *
 * <p>Reaches the relay's classes through the public constructors and methods they keep for it (perf classes stay out
 * of product packages: {@code LayeringTest.perfClassesLiveInPerfPackages}).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(2)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
public class SseRewriteBench {
    @Param({"16", "256"})
    public int tokens;

    private static final ByteBufAllocator ALLOC = PooledByteBufAllocator.DEFAULT;
    private static final String HEAD = "\"id\":\"chatcmpl-4f1c2b7a9e\",\"object\":\"chat.completion.chunk\",\"created\":1733000000,"
        + "\"model\":\"Qwen/Qwen3-8B\"";
    private ByteBuf[] reads;
    private ByteBuf oneRead;
    private final ByteBuf errorNeedle = Unpooled.copiedBuffer("\"error\"", StandardCharsets.US_ASCII);
    private final ByteMatcher matcher = new ByteMatcher("\"error\"".getBytes(StandardCharsets.US_ASCII));
    private final AnswerRewrite strip = new AnswerRewrite(null, 1, true);
    private final AnswerRewrite alias = new AnswerRewrite("gpt-4o-mini", 1, true);
    private final AnswerRewrite replicate = new AnswerRewrite("gpt-4o-mini", 4, true);

    @Setup
    public void setUp() {
        StringBuilder s = new StringBuilder();
        s.append("data: {").append(HEAD).append(",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
            + "\"logprobs\":null,\"finish_reason\":null}]}\n\n");
        for (int i = 0; i < tokens; i++) {
            s.append("data: {").append(HEAD).append(",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" word").append(i % 97)
                .append("\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n");
        }
        s.append("data: {").append(HEAD).append(",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"logprobs\":null,"
            + "\"finish_reason\":\"length\",\"stop_reason\":null}]}\n\n");
        s.append("data: {").append(HEAD).append(",\"choices\":[],\"usage\":{\"prompt_tokens\":812,\"total_tokens\":")
            .append(812 + tokens).append(",\"completion_tokens\":").append(tokens)
            .append(",\"prompt_tokens_details\":{\"cached_tokens\":768}}}\n\ndata: [DONE]\n\n");
        byte[] b = s.toString().getBytes(StandardCharsets.UTF_8);
        int n = (b.length + 511) / 512;
        reads = new ByteBuf[n];
        for (int i = 0; i < n; i++) {
            int from = i * 512;
            ByteBuf r = ALLOC.directBuffer(512);
            r.writeBytes(b, from, Math.min(512, b.length - from));
            reads[i] = r;
        }
        oneRead = reads[0];
    }

    @TearDown
    public void tearDown() {
        for (ByteBuf r : reads) {
            r.release();
        }
        errorNeedle.release();
    }

    /** One stream through the relay; {@code rw} null is the byte-for-byte path. Returns the tokens it counted. */
    private long stream(AnswerRewrite rw) {
        SseFramer framer = new SseFramer();
        EngineStreamCheck check = new EngineStreamCheck(true);
        SseRewriter rewriter = rw == null ? null : new SseRewriter(rw);
        UsageScanner usage = new UsageScanner();
        long bytes = 0;
        for (int i = 0; i < reads.length; i++) {
            ByteBuf in = reads[i].retainedDuplicate();
            ByteBuf out = i + 1 < reads.length ? framer.next(ALLOC, in) : framer.finish(ALLOC, in);
            out = check.check(ALLOC, out);
            if (rewriter != null) {
                out = rewriter.rewrite(ALLOC, out, usage);
            } else {
                usage.scanUsage(out);
            }
            bytes += out.readableBytes();
            out.release();
        }
        return bytes + usage.completionTokens();
    }

    @Benchmark
    public long relay() {
        return stream(null);
    }

    @Benchmark
    public long stripUsage() {
        return stream(strip);
    }

    @Benchmark
    public long alias() {
        return stream(alias);
    }

    @Benchmark
    public long aliasReplicate4() {
        return stream(replicate);
    }

    @Benchmark
    public int nettyIndexOf() {
        return ByteBufUtil.indexOf(errorNeedle, oneRead);
    }

    @Benchmark
    public int byteMatcher() {
        return matcher.find(oneRead);
    }
}
