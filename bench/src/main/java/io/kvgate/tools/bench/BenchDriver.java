package io.kvgate.tools.bench;

import io.kvgate.control.clock.NanoClock;
import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoop;
import io.netty.channel.socket.SocketChannel;
import io.netty.handler.codec.http.HttpDecoderConfig;
import io.netty.handler.codec.http.HttpResponseDecoder;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * Drives one target for one run: the open-loop timeline ({@link ArrivalScheduler}) or the closed loop, a pool of
 * keep-alive connections that grows on demand up to {@code --concurrency-limit}, a bounded backlog of arrivals
 * waiting for a connection, per-request timeouts, the progress line, and the end of the run.
 *
 * <p>Open loop: every arrival is sent on an idle connection, or on a new one (opened on demand), or waits in the
 * backlog when the connection limit is reached; its latency counts from the INTENDED start, so waiting is part of
 * it. Sends later than {@code --lag-threshold-ms} behind schedule and arrivals that had to wait for the connection
 * limit are counted (and warned about): they mean the offered rate was not delivered as scheduled. Arrivals that
 * find the backlog full are dropped and counted as unsent.
 *
 * <p>Threading: everything here and in its {@link BenchConnection}s runs on ONE event loop (single writer, no locks);
 * {@link #start()} and the returned future are the only cross-thread points.
 */
final class BenchDriver {
    private static final int MAX_ARRIVALS_PER_TICK = 1024;
    private static final long PROGRESS_INTERVAL_NS = TimeUnit.SECONDS.toNanos(1);
    private static final long CLOSED_LOOP_CONNECT_BACKOFF_NS = TimeUnit.MILLISECONDS.toNanos(10);
    private static final int INITIAL_BACKLOG = 1024;

    final BenchConfig config;
    final BenchTarget target;
    final NanoClock clock;
    final BenchStats stats = new BenchStats();
    private final EventLoop loop;
    private final PromptWorkload workload;
    private final Bootstrap bootstrap;
    private final PrintStream log;
    private final byte[] headPrefix;
    private final boolean wantsReply;
    private final long timeoutNs;
    private final long lagThresholdNs;
    private final CompletableFuture<TargetReport> result = new CompletableFuture<>();
    /** Completed on the event loop when the measured window starts (after the warm-up). */
    private final CompletableFuture<Void> measureStarted = new CompletableFuture<>();

    private final ArrayDeque<BenchConnection> idle = new ArrayDeque<>();
    private final List<BenchConnection> connections = new ArrayList<>();
    private int connecting;
    private int inFlight;

    // Backlog of arrivals waiting for a connection: (seq, intendedNs) pairs in a growable ring, FIFO.
    private long[] backlogSeq = new long[INITIAL_BACKLOG];
    private long[] backlogIntended = new long[INITIAL_BACKLOG];
    private long backlogHead;
    private long backlogTail;
    private long limitCountedUpTo;
    private long conversationCountedUpTo;

    private ArrivalScheduler scheduler;
    private long startNs;
    private long measureStartNs;
    private long endNs;
    private long deadlineNs;
    private long closedLoopSeq;
    private boolean finished;
    private boolean warnedLate;
    private boolean warnedLimit;
    private boolean warnedBacklog;
    private long lastProgressNs;
    private long lastProgressSent;
    private long lastProgressOk;
    private final Runnable tickTask = this::tick;
    private final ArrivalScheduler.Sink arrivalSink = this::onArrival;
    private BenchRequest lastReusable;

    BenchDriver(BenchConfig config, BenchTarget target, EventLoop loop, Class<? extends SocketChannel> channelClass,
                NanoClock clock, PrintStream log) {
        this.config = config;
        this.target = target;
        this.loop = loop;
        this.clock = clock;
        this.log = log;
        this.workload = PromptWorkload.create(config);
        this.wantsReply = workload.wantsReply();
        this.timeoutNs = (long) (config.timeoutS() * 1e9);
        this.lagThresholdNs = (long) (config.lagThresholdMs() * 1e6);
        this.headPrefix = headPrefix(config, target);
        InetSocketAddress address = new InetSocketAddress(target.host(), target.port());
        this.bootstrap = new Bootstrap()
            .group(loop)
            .channel(channelClass)
            .remoteAddress(address)
            .option(ChannelOption.TCP_NODELAY, true)
            .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, (int) Math.min(30_000, Math.max(1, config.timeoutS() * 1000)));
    }

    static byte[] headPrefix(BenchConfig config, BenchTarget target) {
        StringBuilder sb = new StringBuilder(256);
        sb.append("POST ").append(target.path(config.route())).append(" HTTP/1.1\r\n");
        sb.append("Host: ").append(target.hostHeader()).append("\r\n");
        sb.append("User-Agent: kvgate-bench\r\n");
        sb.append("Content-Type: application/json\r\n");
        sb.append("Accept: ").append(config.stream() ? "text/event-stream" : "application/json").append("\r\n");
        if (config.apiKey() != null) {
            sb.append("Authorization: Bearer ").append(config.apiKey()).append("\r\n");
        }
        for (String[] h : config.headers()) {
            sb.append(h[0]).append(": ").append(h[1]).append("\r\n");
        }
        sb.append("Content-Length: ");
        return sb.toString().getBytes(StandardCharsets.UTF_8);
    }

    private ByteBuf encode(ByteBufAllocator alloc, byte[] body, boolean unpooled) {
        byte[] length = Integer.toString(body.length).getBytes(StandardCharsets.US_ASCII);
        int size = headPrefix.length + length.length + 4 + body.length;
        ByteBuf buf = unpooled ? Unpooled.directBuffer(size) : alloc.directBuffer(size);
        buf.writeBytes(headPrefix).writeBytes(length).writeByte('\r').writeByte('\n').writeByte('\r').writeByte('\n')
            .writeBytes(body);
        return buf;
    }

    /** Starts the run on the event loop; the future completes with the report when it is over. */
    CompletableFuture<TargetReport> start() {
        loop.execute(this::begin);
        return result;
    }

    private void begin() {
        long now = clock.nanoTime();
        // A few ms of slack so the first arrivals are not late because of the setup itself.
        startNs = now + TimeUnit.MILLISECONDS.toNanos(5);
        measureStartNs = startNs + (long) (config.warmupS() * 1e9);
        endNs = measureStartNs + (long) (config.durationS() * 1e9);
        deadlineNs = endNs + (long) (config.drainS() * 1e9);
        lastProgressNs = startNs;
        loop.schedule(this::onMeasureStart, measureStartNs - now, TimeUnit.NANOSECONDS);
        if (config.closedLoop()) {
            for (int i = 0; i < config.connections(); i++) {
                openConnection();
            }
        } else {
            scheduler = new ArrivalScheduler(config.arrival(), config.ratePerS(), config.seed(), startNs, endNs);
            loop.schedule(tickTask, startNs - now, TimeUnit.NANOSECONDS);
        }
        loop.schedule(this::housekeeping, Math.min(timeoutNs, TimeUnit.MILLISECONDS.toNanos(100)), TimeUnit.NANOSECONDS);
    }

    /** Snapshots the generator's own CPU use so the report can say whether the generator was the bottleneck. */
    private void onMeasureStart() {
        stats.cpuStartThreadNs = GeneratorCpu.threadCpuNs();
        stats.cpuStartProcessNs = GeneratorCpu.processCpuNs();
        stats.cpuStartWallNs = clock.nanoTime();
        stats.sentAtMeasureStart = stats.sentAll;
        measureStarted.complete(null);
    }

    /** Completes when the measured window starts (the runner then reads the engines' counters). */
    CompletableFuture<Void> measureStarted() {
        return measureStarted;
    }

    // ---------------------------------------------------------------- open loop

    private void tick() {
        if (finished) {
            return;
        }
        long now = clock.nanoTime();
        int n = scheduler.poll(now, MAX_ARRIVALS_PER_TICK, arrivalSink);
        dispatch(now);
        if (n == MAX_ARRIVALS_PER_TICK) {
            loop.execute(tickTask); // far behind: let I/O run between batches
        } else if (!scheduler.finished()) {
            loop.schedule(tickTask, Math.max(0, scheduler.nextDueNs() - now), TimeUnit.NANOSECONDS);
        } else {
            maybeFinish();
        }
    }

    private void onArrival(long seq, long intendedNs) {
        boolean measured = intendedNs >= measureStartNs;
        if (measured) {
            stats.scheduled++;
        }
        int size = (int) (backlogTail - backlogHead);
        if (size >= config.maxBacklog()) {
            if (measured) {
                stats.unsent++;
            }
            if (!warnedBacklog) {
                warnedBacklog = true;
                warn("backlog full (" + config.maxBacklog() + " arrivals waiting for a connection): new arrivals are "
                    + "dropped and counted as unsent; the offered rate is not being delivered");
            }
            return;
        }
        if (size == backlogSeq.length) {
            growBacklog();
        }
        int i = (int) (backlogTail % backlogSeq.length);
        backlogSeq[i] = seq;
        backlogIntended[i] = intendedNs;
        backlogTail++;
        stats.maxBacklog = Math.max(stats.maxBacklog, (int) (backlogTail - backlogHead));
    }

    private void growBacklog() {
        int size = (int) (backlogTail - backlogHead);
        int capacity = (int) Math.min((long) config.maxBacklog(), (long) backlogSeq.length * 2);
        long[] seqs = new long[capacity];
        long[] intended = new long[capacity];
        for (int k = 0; k < size; k++) {
            int from = (int) ((backlogHead + k) % backlogSeq.length);
            seqs[k] = backlogSeq[from];
            intended[k] = backlogIntended[from];
        }
        backlogSeq = seqs;
        backlogIntended = intended;
        // Re-base absolute positions so that position % capacity indexes the new arrays.
        long shift = backlogHead;
        backlogHead = 0;
        backlogTail = size;
        limitCountedUpTo = Math.max(0, limitCountedUpTo - shift);
        conversationCountedUpTo = Math.max(0, conversationCountedUpTo - shift);
    }

    private void dispatch(long now) {
        while (backlogTail > backlogHead) {
            BenchConnection c = idle.pollLast(); // LIFO: keep the warmest connections busy
            if (c == null) {
                int open = connections.size();
                int wanted = (int) Math.min(backlogTail - backlogHead, Integer.MAX_VALUE);
                while (connecting < wanted && open < config.concurrencyLimit()) {
                    openConnection();
                    open++;
                }
                if (open >= config.concurrencyLimit()) {
                    countWaits(true);
                }
                return;
            }
            int i = (int) (backlogHead % backlogSeq.length);
            long seq = backlogSeq[i];
            BenchRequest request = workload.next(seq);
            if (request == null) {
                idle.addLast(c);
                countWaits(false);
                return;
            }
            backlogHead++;
            send(c, request, seq, backlogIntended[i], now);
        }
    }

    /** Counts, once per arrival, the measured arrivals left waiting for the connection limit or a conversation. */
    private void countWaits(boolean limit) {
        long from = Math.max(backlogHead, limit ? limitCountedUpTo : conversationCountedUpTo);
        long n = 0;
        for (long p = from; p < backlogTail; p++) {
            if (backlogIntended[(int) (p % backlogSeq.length)] >= measureStartNs) {
                n++;
            }
        }
        if (limit) {
            limitCountedUpTo = backlogTail;
            stats.connectionLimitWaits += n;
            if (n > 0 && !warnedLimit) {
                warnedLimit = true;
                warn("connection limit reached (" + config.concurrencyLimit() + " connections busy): arrivals wait; "
                    + "their latency still counts from the intended start (raise --concurrency-limit if the server "
                    + "should see more concurrency)");
            }
        } else {
            conversationCountedUpTo = backlogTail;
            stats.conversationWaits += n;
        }
    }

    // ---------------------------------------------------------------- connections

    private void openConnection() {
        connecting++;
        stats.connectionsOpened++;
        BenchConnection c = new BenchConnection(this);
        connections.add(c);
        // A bootstrap per connect (connects are rare): the initializer needs this connection's handler.
        ChannelFuture f = bootstrap.clone().handler(new ChannelInitializer<SocketChannel>() {
            @Override
            protected void initChannel(SocketChannel ch) {
                ch.pipeline().addLast(new HttpResponseDecoder(new HttpDecoderConfig()
                    .setMaxInitialLineLength(8192).setMaxHeaderSize(65536).setMaxChunkSize(1 << 20)));
                ch.pipeline().addLast(c);
            }
        }).connect();
        c.channel = f.channel();
        f.addListener(future -> {
            if (!future.isSuccess()) {
                connecting--;
                connections.remove(c); // never active, so channelInactive will not run
                onConnectFailed();
            }
        });
    }

    void onConnected(BenchConnection c) {
        connecting--;
        stats.maxOpenConnections = Math.max(stats.maxOpenConnections, connections.size());
        idle.addLast(c);
        if (config.closedLoop()) {
            closedLoopDispatch();
        } else {
            dispatch(clock.nanoTime());
        }
    }

    private void onConnectFailed() {
        if (finished) {
            return;
        }
        long now = clock.nanoTime();
        if (config.closedLoop()) {
            if (now < endNs) {
                if (now >= measureStartNs) {
                    stats.recordError(ErrorClass.CONNECT, now);
                }
                loop.schedule(this::openConnection, CLOSED_LOOP_CONNECT_BACKOFF_NS, TimeUnit.NANOSECONDS);
            }
            maybeFinish();
            return;
        }
        // The arrival this connection was opened for fails as a connect error.
        if (backlogTail > backlogHead) {
            int i = (int) (backlogHead % backlogSeq.length);
            long intended = backlogIntended[i];
            backlogHead++;
            if (intended >= measureStartNs) {
                stats.recordError(ErrorClass.CONNECT, now);
            }
        }
        dispatch(now);
        maybeFinish();
    }

    void onClosed(BenchConnection c) {
        connections.remove(c);
        idle.remove(c);
        if (!finished) {
            if (config.closedLoop()) {
                if (clock.nanoTime() < endNs) {
                    openConnection(); // keep C connections in saturation mode
                }
            } else {
                dispatch(clock.nanoTime());
            }
            maybeFinish();
        }
    }

    private void send(BenchConnection c, BenchRequest request, long seq, long intendedNs, long now) {
        boolean measured = intendedNs >= measureStartNs;
        if (measured) {
            stats.sent++;
            if (!config.closedLoop()) {
                long lag = now - intendedNs;
                stats.recordLag(lag, lagThresholdNs);
                if (lag > lagThresholdNs && !warnedLate) {
                    warnedLate = true;
                    warn(String.format(Locale.ROOT, "sending %.1f ms behind schedule (threshold %s ms): the offered "
                        + "rate is not delivered on time; latencies include the delay", lag / 1e6,
                        config.lagThresholdMs()));
                }
            }
        }
        inFlight++;
        stats.sentAll++;
        c.start(request, seq, intendedNs, now, measured, config.stream(), wantsReply);
        ByteBuf wire;
        if (workload.reusesRequests()) {
            // Same body every time: encode once (outside the pool, released at the end) and send duplicates.
            if (request.wire == null) {
                request.wire = encode(c.channel.alloc(), request.body, true);
                lastReusable = request;
            }
            wire = request.wire.retainedDuplicate();
        } else {
            wire = encode(c.channel.alloc(), request.body, false);
        }
        c.channel.writeAndFlush(wire, c.channel.voidPromise());
    }

    /** Called by a connection when its request ended (success or failure). */
    void onRequestDone(BenchConnection c) {
        inFlight--;
        long now = clock.nanoTime();
        ErrorClass error = c.error;
        if (error == null) {
            stats.okAll++;
        }
        if (c.measured) {
            if (error != null) {
                stats.recordError(error, now);
            } else {
                recordSuccess(c, now);
            }
        }
        workload.onComplete(c.request, error == null, wantsReply ? c.reply : null);
        if (c.reusable() && !finished) {
            idle.addLast(c);
        } else if (c.active) {
            c.channel.close();
        }
        if (!finished) {
            if (config.closedLoop()) {
                closedLoopDispatch();
            } else {
                dispatch(now);
            }
            maybeFinish();
        }
    }

    private void recordSuccess(BenchConnection c, long now) {
        stats.ok++;
        stats.lastCompletionNs = Math.max(stats.lastCompletionNs, now);
        BenchStats.record(stats.latencyUs, now - c.intendedNs);
        long ttftAt = config.stream() ? c.firstContentNs : c.firstByteNs;
        if (ttftAt != 0) {
            BenchStats.record(stats.ttftUs, ttftAt - c.intendedNs);
        }
        long tokens;
        if (c.completionTokens >= 0) {
            tokens = c.completionTokens;
        } else {
            tokens = config.stream() ? c.contentFrames : 0;
        }
        stats.outputTokens += tokens;
        if (c.promptTokens >= 0) {
            stats.usageResponses++;
            stats.promptTokens += c.promptTokens;
            stats.completionTokens += Math.max(0, c.completionTokens);
            if (c.cachedTokens >= 0) {
                stats.cachedReportingResponses++;
                stats.cachedTokens += c.cachedTokens;
            }
        }
        long e2eNs = now - c.sendNs;
        if (tokens > 0 && e2eNs > 0) {
            stats.requestTokensPerS.recordValue(Math.min(1e8, tokens * 1e9 / e2eNs));
        }
    }

    // ---------------------------------------------------------------- closed loop

    private void closedLoopDispatch() {
        long now = clock.nanoTime();
        while (now < endNs && !idle.isEmpty()) {
            BenchRequest request = workload.next(closedLoopSeq);
            if (request == null) {
                stats.conversationWaits++;
                return;
            }
            BenchConnection c = idle.pollLast();
            boolean measured = now >= measureStartNs;
            if (measured) {
                stats.scheduled++;
            }
            send(c, request, closedLoopSeq++, now, now);
        }
    }

    // ---------------------------------------------------------------- housekeeping and the end

    private void housekeeping() {
        if (finished) {
            return;
        }
        long now = clock.nanoTime();
        // Timeout sweep over the bounded connection set; cheaper than one timer per request.
        for (int i = connections.size() - 1; i >= 0; i--) {
            BenchConnection c = connections.get(i);
            if (c.busy && now - c.sendNs > timeoutNs) {
                c.onTimeout();
            }
        }
        if (config.progress() && now - lastProgressNs >= PROGRESS_INTERVAL_NS) {
            progress(now);
        }
        if (config.closedLoop() && now >= endNs) {
            // Closed connections are replaced only while the window is open; idle ones are done.
            maybeFinish();
        }
        if (now >= deadlineNs) {
            forceFinish(now);
            return;
        }
        loop.schedule(this::housekeeping, Math.min(timeoutNs, TimeUnit.MILLISECONDS.toNanos(100)), TimeUnit.NANOSECONDS);
    }

    private void progress(long now) {
        double dt = Math.max(1e-3, (now - lastProgressNs) / 1e9);
        // Warmup included: the line shows what is on the wire right now.
        long sentDelta = stats.sentAll - lastProgressSent;
        long okDelta = stats.okAll - lastProgressOk;
        lastProgressNs = now;
        lastProgressSent = stats.sentAll;
        lastProgressOk = stats.okAll;
        StringBuilder sb = new StringBuilder(200);
        double t = (now - measureStartNs) / 1e9;
        sb.append(String.format(Locale.ROOT, "bench %s %s %5.0fs  sent %7.0f/s  ok %7.0f/s  err %d",
            target.label(), t < 0 ? "warmup" : "", t, sentDelta / dt, okDelta / dt, stats.errorTotal()));
        if (!config.closedLoop()) {
            sb.append(String.format(Locale.ROOT, "  late %d  waiting %d", stats.lateSends, backlogTail - backlogHead));
        }
        sb.append(String.format(Locale.ROOT, "  conns %d", connections.size()));
        if (stats.latencyUs.getTotalCount() > 0) {
            sb.append(String.format(Locale.ROOT, "  latency p50 %.2f p99 %.2f ms",
                stats.latencyUs.getValueAtPercentile(50) / 1e3, stats.latencyUs.getValueAtPercentile(99) / 1e3));
        }
        if (config.stream() && stats.ttftUs.getTotalCount() > 0) {
            sb.append(String.format(Locale.ROOT, "  ttft p50 %.2f p99 %.2f ms",
                stats.ttftUs.getValueAtPercentile(50) / 1e3, stats.ttftUs.getValueAtPercentile(99) / 1e3));
        }
        log.println(sb);
    }

    private void warn(String message) {
        log.println("bench " + target.label() + " WARNING: " + message);
    }

    private void maybeFinish() {
        if (finished) {
            return;
        }
        boolean over = config.closedLoop()
            ? clock.nanoTime() >= endNs && inFlight == 0
            : scheduler != null && scheduler.finished() && backlogTail == backlogHead && inFlight == 0;
        if (over) {
            finish(clock.nanoTime());
        }
    }

    private void forceFinish(long now) {
        for (long p = backlogHead; p < backlogTail; p++) {
            if (backlogIntended[(int) (p % backlogSeq.length)] >= measureStartNs) {
                stats.unsent++;
            }
        }
        backlogHead = backlogTail;
        for (BenchConnection c : connections) {
            if (c.busy && c.measured) {
                stats.unfinished++;
            }
        }
        if (stats.unsent > 0 || stats.unfinished > 0) {
            warn("drain time over: " + stats.unfinished + " requests still in flight and " + stats.unsent
                + " arrivals never sent are left out of the latencies (see unsent/unfinished in the report)");
        }
        finish(now);
    }

    private void finish(long now) {
        finished = true;
        if (stats.cpuStartWallNs != 0) {
            stats.cpuThreadNs = GeneratorCpu.threadCpuNs() - stats.cpuStartThreadNs;
            stats.cpuProcessNs = GeneratorCpu.processCpuNs() - stats.cpuStartProcessNs;
            stats.cpuWallNs = now - stats.cpuStartWallNs;
            stats.cpuRequests = stats.sentAll - stats.sentAtMeasureStart;
            if (stats.cpuWallNs > 0 && stats.cpuThreadNs > 0.8 * stats.cpuWallNs) {
                warn(String.format(Locale.ROOT, "the generator's I/O thread was %.0f%% busy: it may be the bottleneck "
                    + "(see generator in the report)", 100.0 * stats.cpuThreadNs / stats.cpuWallNs));
            }
        }
        for (BenchConnection c : new ArrayList<>(connections)) {
            c.busy = false;
            c.channel.close();
        }
        if (lastReusable != null && lastReusable.wire != null) {
            lastReusable.wire.release();
            lastReusable.wire = null;
        }
        if (config.progress()) {
            progress(now);
        }
        try {
            result.complete(TargetReport.of(config, target, stats, measureStartNs, endNs));
        } catch (RuntimeException e) {
            result.completeExceptionally(e);
        }
    }
}
