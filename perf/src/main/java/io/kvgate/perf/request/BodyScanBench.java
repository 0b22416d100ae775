package io.kvgate.perf.request;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.async.ByteArrayFeeder;
import com.fasterxml.jackson.core.async.ByteBufferFeeder;
import io.kvgate.dataplane.request.RequestFieldExtractor;
import io.kvgate.dataplane.request.RequestFields;
import java.io.IOException;
import java.nio.ByteBuffer;
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
import org.openjdk.jmh.annotations.Warmup;

/**
 * The body stage's JSON scan of a chat request (the front door's 1 KiB and 16 KiB benchmark bodies, ASCII content or
 * Chinese text), as the gateway runs it — {@link RequestFieldExtractor} on its own lexer ({@code JsonLexer}) over the
 * pooled direct buffer the body is buffered in, scanned in place — beside the bare Jackson non-blocking parsers
 * (ByteBuffer and byte[] input) draining the same tokens, which is what the extractor ran on before: what the scan
 * costs per body, old core against new. The extractor runs with each text-prefix bound the front door can pass
 * ({@link Prefix}).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class BodyScanBench {
    private static final JsonFactory FACTORY = JsonFactory.builder().build();

    @Param({"1024", "16384"})
    public int bytes;

    /** The chat content: {@code ascii} ("aaa...") or {@code chinese} (3-byte UTF-8 characters). */
    @Param({"ascii", "chinese"})
    public String text;

    private ByteBuffer direct;
    private io.netty.buffer.ByteBuf body;
    private byte[] array;
    private final RequestFields fields = new RequestFields();
    private final byte[] copyScratch = new byte[65536];

    @Setup
    public void setUp() {
        String pre = "{\"model\":\"bench\",\"messages\":[{\"role\":\"user\",\"content\":\"";
        String post = "\"}],\"max_tokens\":1}";
        int room = bytes - pre.length() - post.length();
        String content = text.equals("chinese") ? "模型推理网关".repeat(room / 18 + 1).substring(0, room / 3) + "a".repeat(room % 3)
            : "a".repeat(room);
        array = (pre + content + post).getBytes(StandardCharsets.UTF_8);
        direct = ByteBuffer.allocateDirect(array.length).put(array).flip();
        body = io.netty.buffer.PooledByteBufAllocator.DEFAULT.directBuffer(array.length).writeBytes(array);
    }

    @org.openjdk.jmh.annotations.TearDown
    public void tearDown() {
        body.release();
    }

    /**
     * How much request text the extractor keeps for the prefix key: what the front door passes is its routing
     * table's largest {@code chwbl.prefix_chars} — 0 without a chwbl rule (the front-door benchmark's
     * configuration), 1024 with a default chwbl rule, 16384 the most a rule may ask (and what every body decoded
     * before the bound followed the table).
     */
    @State(Scope.Thread)
    public static class Prefix {
        @Param({"0", "1024", "16384"})
        public int prefixChars;
    }

    /** What the front door runs: the extractor over the body buffer, scanned whole in place. */
    @Benchmark
    public Object extractorDirectBuffer(Prefix prefix) {
        RequestFieldExtractor x = new RequestFieldExtractor(fields).textPrefixChars(prefix.prefixChars);
        x.body(body);
        return x.finish();
    }

    @Benchmark
    public int jacksonDirectBuffer() throws IOException {
        JsonParser p = FACTORY.createNonBlockingByteBufferParser();
        ((ByteBufferFeeder) p.getNonBlockingInputFeeder()).feedInput(direct.duplicate());
        ((ByteBufferFeeder) p.getNonBlockingInputFeeder()).endOfInput();
        return drain(p);
    }

    @Benchmark
    public int jacksonByteArray() throws IOException {
        JsonParser p = FACTORY.createNonBlockingByteArrayParser();
        ((ByteArrayFeeder) p.getNonBlockingInputFeeder()).feedInput(array, 0, array.length);
        ((ByteArrayFeeder) p.getNonBlockingInputFeeder()).endOfInput();
        return drain(p);
    }

    @Benchmark
    public int jacksonByteArrayAfterCopy() throws IOException {
        byte[] scratch = copyScratch; // the copy out of the direct buffer is part of the measured work
        direct.duplicate().get(scratch, 0, array.length);
        JsonParser p = FACTORY.createNonBlockingByteArrayParser();
        ((ByteArrayFeeder) p.getNonBlockingInputFeeder()).feedInput(scratch, 0, array.length);
        ((ByteArrayFeeder) p.getNonBlockingInputFeeder()).endOfInput();
        return drain(p);
    }

    private static int drain(JsonParser p) throws IOException {
        int n = 0;
        JsonToken t;
        while ((t = p.nextToken()) != null && t != JsonToken.NOT_AVAILABLE) {
            n++;
        }
        p.close();
        return n;
    }
}
