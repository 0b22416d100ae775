package io.kvgate.perf.request;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.async.ByteArrayFeeder;
import com.fasterxml.jackson.core.async.ByteBufferFeeder;
import io.kvgate.dataplane.request.JsonLexer;
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
 * ({@link Prefix}), and with each of the lexer's string skips ({@link Scan}: the Vector API or SWAR); the lexer
 * alone ({@link #lexerDirectBuffer}) is the string skip with the few tokens around it.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(2)
public class BodyScanBench {
    private static final JsonFactory FACTORY = JsonFactory.builder().build();

    @Param({"1024", "16384"})
    public int bytes;

    /**
     * The chat content: {@code ascii} ("aaa..."), {@code lines} (ASCII prose with a {@code \n} escape every 72
     * bytes, as chat text with line breaks has) or {@code chinese} (3-byte UTF-8 characters).
     */
    @Param({"ascii", "lines", "chinese"})
    public String text;

    private ByteBuffer direct;
    private io.netty.buffer.ByteBuf body;
    private ByteBuffer bodyNio;
    private ByteBuffer[] views;
    private int turn;
    private byte[] array;
    private final RequestFields fields = new RequestFields();
    private final byte[] copyScratch = new byte[65536];

    @Setup
    public void setUp() {
        String pre = "{\"model\":\"bench\",\"messages\":[{\"role\":\"user\",\"content\":\"";
        String post = "\"}],\"max_tokens\":1}";
        int room = bytes - pre.length() - post.length();
        String content = switch (text) {
            case "chinese" -> "模型推理网关".repeat(room / 18 + 1).substring(0, room / 3) + "a".repeat(room % 3);
            case "lines" -> ("The quick brown fox jumps over the lazy dog, then the next line of text.\\n")
                .repeat(room / 74 + 1).substring(0, room);
            default -> "a".repeat(room);
        };
        if (content.endsWith("\\")) { // a cut escape
            content = content.substring(0, content.length() - 1) + "a";
        }
        array = (pre + content + post).getBytes(StandardCharsets.UTF_8);
        direct = ByteBuffer.allocateDirect(array.length).put(array).flip();
        body = io.netty.buffer.PooledByteBufAllocator.DEFAULT.directBuffer(array.length).writeBytes(array);
        bodyNio = body.internalNioBuffer(0, array.length);
        views = new ByteBuffer[] {bodyNio.duplicate(), bodyNio.duplicate()};
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

    /**
     * How the lexer skips string content: {@code vector} (the Vector API, {@code jdk.incubator.vector}, what
     * {@code deploy/jvm.options} runs) or {@code swar} (8-byte words, what runs without the module), set through
     * {@code -Dkvgate.json.vector} before the lexer's class is initialized in the fork (each parameter value runs in
     * a fork of its own), and checked.
     */
    @State(Scope.Thread)
    public static class Scan {
        @Param({"vector", "swar"})
        public String path;

        @Setup
        public void setUp() {
            System.setProperty("kvgate.json.vector", String.valueOf(path.equals("vector")));
            String scan = JsonLexer.stringScan();
            if (!scan.startsWith(path)) {
                throw new IllegalStateException("asked for the " + path + " string skip, the lexer runs " + scan
                    + " (is jdk.incubator.vector in deploy/jvm.options?)");
            }
        }
    }

    /** What the front door runs: the extractor over the body buffer, scanned whole in place. */
    @Benchmark
    public Object extractorDirectBuffer(Prefix prefix, Scan scan) {
        RequestFieldExtractor x = new RequestFieldExtractor(fields).textPrefixChars(prefix.prefixChars);
        x.body(body);
        return x.finish();
    }

    /**
     * {@link #lexerDirectBuffer} with each body in another {@link ByteBuffer} object than the one before (two views
     * of the same memory, in turn): what the lexer pays when the front door's body buffers are not the same objects
     * from one body to the next (its vector view of the buffer is then made anew for every body).
     */
    @Benchmark
    public int lexerAnotherBufferEachBody(Scan scan) throws IOException {
        ByteBuffer b = views[turn ^= 1];
        JsonLexer lexer = JsonLexer.forThisThread();
        lexer.start(b);
        int n = 0;
        while (lexer.nextToken() != null) {
            n++;
        }
        lexer.clear();
        return n;
    }

    /** The lexer alone over the body buffer: every token, no field extraction (the string skip is most of it). */
    @Benchmark
    public int lexerDirectBuffer(Scan scan) throws IOException {
        JsonLexer lexer = JsonLexer.forThisThread();
        lexer.start(bodyNio);
        int n = 0;
        while (lexer.nextToken() != null) {
            n++;
        }
        lexer.clear();
        return n;
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
