package io.kvgate.perf.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.tools.bench.CompletionJson;
import io.kvgate.tools.bench.SseDecoder;
import io.netty.buffer.ByteBuf;
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
 * The load generator's per-response work on a streamed chat completion (one op = one whole stream of
 * {@code tokens} content frames + a usage frame + [DONE], arriving in 512-byte network reads): the incremental
 * {@link SseDecoder} + streaming {@link CompletionJson} used by {@code kvgate bench}, against the naive baseline
 * (aggregate the body into a String, split on blank lines, parse each frame into a Jackson tree).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(2)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
public class SseDecodeBenchmark {
    @Param({"16", "256"})
    public int tokens;

    private ByteBuf[] reads;
    private byte[] whole;
    private final SseDecoder decoder = new SseDecoder(1 << 20);
    private final CompletionJson.Result result = new CompletionJson.Result();
    private final ObjectMapper mapper = new ObjectMapper();
    private long contentFrames;

    private final SseDecoder.Listener listener = new SseDecoder.Listener() {
        @Override
        public void onData(byte[] data, int length) {
            if (length == 6 && data[0] == '[') {
                return;
            }
            if (CompletionJson.inspect(data, 0, length, result) && result.contentChars > 0) {
                contentFrames++;
            }
        }
    };

    @Setup
    public void setUp() {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < tokens; i++) {
            sb.append("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\","
                + "\"choices\":[{\"index\":0,\"delta\":{\"content\":\" tok").append(i).append("\"},\"logprobs\":null,"
                + "\"finish_reason\":null}]}\n\n");
        }
        sb.append("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":"
            + "{\"prompt_tokens\":1000,\"completion_tokens\":").append(tokens)
            .append(",\"prompt_tokens_details\":{\"cached_tokens\":512}}}\n\ndata: [DONE]\n\n");
        whole = sb.toString().getBytes(StandardCharsets.UTF_8);
        int n = (whole.length + 511) / 512;
        reads = new ByteBuf[n];
        for (int i = 0; i < n; i++) {
            int off = i * 512;
            int len = Math.min(512, whole.length - off);
            reads[i] = Unpooled.directBuffer(len).writeBytes(whole, off, len);
        }
    }

    @TearDown
    public void tearDown() {
        for (ByteBuf b : reads) {
            b.release();
        }
    }

    @Benchmark
    public long incremental() {
        contentFrames = 0;
        decoder.reset();
        for (ByteBuf b : reads) {
            decoder.feed(b, listener);
        }
        return contentFrames;
    }

    @Benchmark
    public long baselineAggregateSplitTree() throws Exception {
        // What a simple client does: collect the body, then split and parse each frame into a tree.
        StringBuilder body = new StringBuilder();
        for (ByteBuf b : reads) {
            body.append(b.toString(b.readerIndex(), b.readableBytes(), StandardCharsets.UTF_8));
        }
        long frames = 0;
        for (String event : body.toString().split("\n\n")) {
            if (!event.startsWith("data: ")) {
                continue;
            }
            String data = event.substring(6);
            if (data.equals("[DONE]")) {
                continue;
            }
            JsonNode node = mapper.readTree(data);
            JsonNode choices = node.get("choices");
            if (choices != null && !choices.isEmpty() && choices.get(0).path("delta").path("content").asText("").length() > 0) {
                frames++;
            }
        }
        return frames;
    }
}
