package io.kvgate.perf.accesslog;

import io.kvgate.dataplane.accesslog.AccessLog;
import io.kvgate.dataplane.accesslog.AccessRecord;
import java.io.OutputStream;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * What one access-log line costs and allocates ({@code -prof gc}), on one thread so nothing is dropped and every
 * byte is counted: {@code fill} completes the connection's record as an exchange does (the baseline);
 * {@code fillLogAndWrite} also queues it (the I/O thread's part: one copy into a preallocated Disruptor slot) and then
 * does the writer thread's part here (poll, JSON encoding, write through the buffer to a null stream, flush).
 * Run: {@code perf/jmh.sh AccessLogBench -prof gc}.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(2)
public class AccessLogBench {
    private AccessLog log;
    private final AccessRecord record = new AccessRecord();
    private final String requestId = "2bfcd5c3fd9171d05150c0a87c2927e2";
    private long n;

    @Setup(Level.Trial)
    public void open() {
        log = new AccessLog(1 << 14, OutputStream.nullOutputStream(), false, System::currentTimeMillis, false);
    }

    @TearDown(Level.Trial)
    public void close() {
        if (log.dropped() != 0) {
            throw new IllegalStateException(log.dropped() + " lines dropped: the benchmark must write every line");
        }
        log.close();
    }

    private AccessRecord filled() {
        AccessRecord a = record;
        a.reset();
        a.requestId = requestId;
        a.rule = "chat";
        a.model = "qwen3";
        a.endpoint = "127.0.0.1:9001";
        a.status = 200;
        a.bytesIn = 1024;
        a.bytesOut = 247 + (n++ & 7);
        a.promptTokens = 300;
        a.cachedTokens = 256;
        a.ttftNs = 12_345_678;
        a.durationNs = 23_456_789;
        return a;
    }

    @Benchmark
    public AccessRecord fill() {
        return filled();
    }

    @Benchmark
    public boolean fillLogAndWrite() throws Exception {
        log.log(filled());
        return log.drain();
    }
}
