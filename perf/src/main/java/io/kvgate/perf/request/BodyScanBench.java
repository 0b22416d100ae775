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
 * The body stage's JSON scan of a chat request (the front door's 1 KiB and 16 KiB benchmark bodies), as the gateway
 * runs it — {@link RequestFieldExtractor} fed the direct buffer a socket read fills — beside the bare Jackson
 * non-blocking parsers (ByteBuffer and byte[] input) draining the same tokens: what the scan costs per body and how
 * much of it is the parser's input form.
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

    private ByteBuffer direct;
    private byte[] array;
    private final RequestFields fields = new RequestFields();
    private final byte[] copyScratch = new byte[65536];

    @Setup
    public void setUp() {
        String pre = "{\"model\":\"bench\",\"messages\":[{\"role\":\"user\",\"content\":\"";
        String post = "\"}],\"max_tokens\":1}";
        array = (pre + "a".repeat(bytes - pre.length() - post.length()) + post).getBytes(StandardCharsets.US_ASCII);
        direct = ByteBuffer.allocateDirect(array.length).put(array).flip();
    }

    @Benchmark
    public Object extractorDirectBuffer() {
        RequestFieldExtractor x = new RequestFieldExtractor(fields);
        x.feed(direct.duplicate());
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
