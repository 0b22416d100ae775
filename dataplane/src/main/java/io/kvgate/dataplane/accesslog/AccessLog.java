package io.kvgate.dataplane.accesslog;

import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import com.lmax.disruptor.BusySpinWaitStrategy;
import com.lmax.disruptor.EventPoller;
import com.lmax.disruptor.InsufficientCapacityException;
import com.lmax.disruptor.RingBuffer;
import io.kvgate.control.config.LoggingConfig;
import io.kvgate.control.log.Log;
import java.io.BufferedWriter;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;
import java.util.function.LongSupplier;

/**
 * The access log ({@code logging.access_log}): one JSON line per request ({@link AccessLogLine}), written by one
 * thread of its own, never by an I/O thread. A request's end copies its {@link AccessRecord} into a slot of a
 * bounded Disruptor ring of preallocated records ({@code logging.access_log_queue} slots, several producers: the I/O
 * threads); when the ring is full the line is dropped and counted ({@code kvgate_access_log_dropped_total}), so a
 * slow disk never slows requests. The writer polls the ring (an {@link EventPoller}: publishing signals nobody, so an
 * I/O thread pays one CAS and a copy), writes what it finds through a buffer, and flushes when the ring is empty;
 * idle, it parks {@link #IDLE_PARK_MS} ms between polls, the longest a line waits to be written.
 */
public final class AccessLog implements AutoCloseable {
    /** How long the idle writer sleeps between polls: a line is written at most this long after its request ended. */
    static final long IDLE_PARK_MS = 10;

    /** Logs nothing (the default, {@code logging.access_log: off}). */
    public static final AccessLog OFF = new AccessLog();

    private final RingBuffer<AccessRecord> ring;
    private final EventPoller<AccessRecord> poller;
    private final LongAdder dropped = new LongAdder();
    private final LongSupplier wallClock;
    private final Writer out;
    private final boolean closeOut;
    private final AccessLogLine line = new AccessLogLine();
    private char[] chars = new char[1024];
    private final EventPoller.Handler<AccessRecord> writeOne = (r, seq, end) -> {
        write(r);
        return true;
    };
    private final Thread writer;
    private volatile boolean running;
    private long writeErrors;

    private AccessLog() {
        ring = null;
        poller = null;
        wallClock = null;
        out = null;
        closeOut = false;
        writer = null;
    }

    /**
     * A log of {@code capacity} queued records (a power of two) onto {@code sink}; {@code startWriter}: a thread
     * drains it (false: the caller drains, {@link #drain}, as tests do). Public for the access-log benchmark (perf),
     * which writes to a null sink.
     */
    public AccessLog(int capacity, OutputStream sink, boolean closeSink, LongSupplier wallClock, boolean startWriter) {
        this.ring = RingBuffer.createMultiProducer(AccessRecord::new, capacity, new BusySpinWaitStrategy());
        this.poller = ring.newPoller();
        ring.addGatingSequences(poller.getSequence());
        this.wallClock = wallClock;
        this.out = new BufferedWriter(new OutputStreamWriter(sink, StandardCharsets.UTF_8), 64 << 10);
        this.closeOut = closeSink;
        this.running = true;
        if (startWriter) {
            writer = new Thread(this::run, "kvgate-access-log");
            writer.setDaemon(true);
            writer.start();
        } else {
            writer = null;
        }
    }

    /** The access log {@code cfg} asks for: {@link #OFF}, stdout, or the file (appended to, created if absent). */
    public static AccessLog open(LoggingConfig cfg) throws IOException {
        if (!cfg.accessLogOn()) {
            return OFF;
        }
        boolean stdout = LoggingConfig.ACCESS_LOG_STDOUT.equals(cfg.accessLog());
        OutputStream sink = stdout ? new FileOutputStream(FileDescriptor.out) : new FileOutputStream(cfg.accessLog(), true);
        Log.info("access log: " + (stdout ? "stdout" : cfg.accessLog()) + " (queue " + cfg.accessLogQueue() + " records)");
        return new AccessLog(cfg.accessLogQueue(), sink, !stdout, System::currentTimeMillis, true);
    }

    public boolean enabled() {
        return ring != null;
    }

    /**
     * Queues {@code r}'s line (copied: the caller reuses its record at once); when the queue is full the line is
     * dropped and counted. Any thread; allocates nothing.
     */
    public void log(AccessRecord r) {
        if (ring == null) {
            return;
        }
        long seq;
        try {
            seq = ring.tryNext();
        } catch (InsufficientCapacityException full) {
            dropped.increment();
            return;
        }
        try {
            AccessRecord slot = ring.get(seq);
            slot.copyFrom(r);
            slot.timeMillis = wallClock.getAsLong();
        } finally {
            ring.publish(seq);
        }
    }

    /** Lines dropped because the queue was full. */
    public long dropped() {
        return dropped.sum();
    }

    /** Registers {@code kvgate_access_log_dropped_total}, read from the drop counter on scrape. */
    public void register(PrometheusRegistry registry) {
        CounterWithCallback.builder().name("kvgate_access_log_dropped_total")
            .help("Access-log lines dropped because the access log's queue was full (logging.access_log_queue).")
            .callback(cb -> cb.call(dropped.sum())).register(registry);
    }

    /**
     * Writes every queued line and flushes; returns whether there was any. The writer thread's step, and the caller's
     * when the log was built without one (tests, the access-log benchmark).
     */
    public boolean drain() throws Exception {
        boolean any = false;
        while (poller.poll(writeOne) == EventPoller.PollState.PROCESSING) {
            any = true;
        }
        if (any) {
            out.flush();
        }
        return any;
    }

    private void write(AccessRecord r) throws IOException {
        StringBuilder text = line.encode(r);
        int n = text.length();
        if (chars.length < n) {
            chars = new char[Math.max(n, chars.length * 2)];
        }
        text.getChars(0, n, chars, 0);
        out.write(chars, 0, n);
        r.reset(); // the slot drops its references until it is reused
    }

    private void run() {
        while (running) {
            try {
                if (!drain()) {
                    LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(IDLE_PARK_MS));
                }
            } catch (Exception e) {
                // A full disk or a closed stdout: say so once in a while, keep draining (the queue must not fill).
                if (writeErrors++ % 10_000 == 0) {
                    Log.error("access log: write failed: " + e);
                }
            }
        }
    }

    /** Stops the writer after it wrote every line queued so far, and closes the file. */
    @Override
    public void close() {
        if (ring == null || !running) {
            return;
        }
        running = false;
        if (writer != null) {
            LockSupport.unpark(writer);
            try {
                writer.join(TimeUnit.SECONDS.toMillis(5));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        try {
            drain();
            out.flush();
            if (closeOut) {
                out.close();
            }
        } catch (Exception e) {
            Log.error("access log: final write failed: " + e);
        }
    }
}
