package io.kvgate.tools.bench;

import io.kvgate.control.clock.NanoClock;
import io.netty.channel.EventLoop;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Runs a benchmark: each target in turn (compare mode runs the same seeded workload against each, one after the
 * other, never at the same time), on one Netty event loop thread (epoll when available, else NIO), then builds the
 * {@link BenchReport} and writes its files when {@code out} is set.
 *
 * <p>One I/O thread is deliberate: all state is single-writer, nothing is shared, and one thread sustains well over
 * 20k requests/s (see perf/results/bench-overhead-*.md); the generator's own shortfalls are measured and reported,
 * not hidden.
 *
 * <p>Threading: {@link #run} blocks the calling thread until the run is over; safe to call from any thread.
 */
public final class BenchRunner {
    private BenchRunner() {}

    /** Runs the benchmark with the system clock, progress on stderr. */
    public static BenchReport run(BenchConfig config) {
        return run(config, NanoClock.SYSTEM, System.err);
    }

    /** Runs the benchmark; {@code log} receives progress lines and warnings. */
    public static BenchReport run(BenchConfig config, NanoClock clock, PrintStream log) {
        boolean epoll = switch (config.transport()) {
            case EPOLL -> {
                if (!Epoll.isAvailable()) {
                    throw new IllegalStateException("--transport epoll: epoll is not available: " + Epoll.unavailabilityCause());
                }
                yield true;
            }
            case NIO -> false;
            case AUTO -> Epoll.isAvailable();
        };
        IoHandlerFactory factory = epoll ? EpollIoHandler.newFactory() : NioIoHandler.newFactory();
        Class<? extends SocketChannel> channelClass = epoll ? EpollSocketChannel.class : NioSocketChannel.class;
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, factory);
        try {
            if (config.compare() && config.warmupS() == 0) {
                log.println("bench WARNING: compare mode without --warmup: the first target also pays the generator's "
                    + "JVM warm-up (class loading, JIT), which biases the ratios; use --warmup 5 or more");
            }
            List<TargetReport> results = new ArrayList<>();
            List<EngineShares> engines = new ArrayList<>();
            List<GatewayAccounting> accounting = new ArrayList<>();
            long boundS = (long) Math.ceil(config.warmupS() + config.durationS() + config.drainS()) + 30;
            for (BenchTarget target : config.targets()) {
                EventLoop loop = group.next();
                BenchDriver driver = new BenchDriver(config, target, loop, channelClass, clock, log);
                List<EngineShares.Counters> before = null;
                if (!config.engineMetrics().isEmpty()) {
                    // Before the run: without a warm-up these are the window's starting counts (exact); with one, the
                    // HTTP client is at least warm when the window opens, and an unreachable engine shows at once.
                    before = EngineShares.snapshot(config.engineMetrics());
                    for (EngineShares.Counters c : before) {
                        if (c.error() != null) {
                            log.println("bench WARNING: --engine-metrics: " + c.error());
                        }
                    }
                }
                GatewayAccounting accountedBefore = config.gatewayMetrics().isEmpty() ? null
                    : GatewayAccounting.snapshot(config.gatewayMetrics());
                if (!config.gatewayMetrics().isEmpty() && accountedBefore == null) {
                    log.println("bench WARNING: --gateway-metrics: no kvgate_prompt_tokens_total on "
                        + config.gatewayMetrics() + " (not a kvgate, or unreachable)");
                }
                try {
                    var done = driver.start();
                    if (before != null && config.warmupS() > 0) {
                        // Read on this thread, never the generator's event loop: the engines' counters when the
                        // measured window opens (the run may end first if it fails early). Warm-up requests still in
                        // flight then are counted by the engines as well.
                        java.util.concurrent.CompletableFuture.anyOf(driver.measureStarted(), done).get(boundS, TimeUnit.SECONDS);
                        before = EngineShares.snapshot(config.engineMetrics());
                    }
                    if (accountedBefore != null && config.warmupS() > 0) {
                        java.util.concurrent.CompletableFuture.anyOf(driver.measureStarted(), done).get(boundS, TimeUnit.SECONDS);
                        accountedBefore = GatewayAccounting.snapshot(config.gatewayMetrics()); // the window's start
                    }
                    results.add(done.get(boundS, TimeUnit.SECONDS));
                    accounting.add(accountedBefore == null ? null
                        : GatewayAccounting.between(accountedBefore, GatewayAccounting.snapshot(config.gatewayMetrics())));
                    engines.add(before == null ? null
                        : EngineShares.between(config.engineMetrics(), before, EngineShares.settled(config.engineMetrics(), 2_000)));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IllegalStateException("interrupted while benchmarking " + target.url(), e);
                } catch (ExecutionException e) {
                    throw new IllegalStateException("benchmark of " + target.url() + " failed: " + e.getCause(), e.getCause());
                } catch (TimeoutException e) {
                    throw new IllegalStateException("benchmark of " + target.url() + " did not end within " + boundS + " s", e);
                }
            }
            BenchReport report = new BenchReport(config, results, engines).withAccounting(accounting);
            if (config.out() != null) {
                try {
                    report.write(config.out());
                } catch (IOException e) {
                    throw new UncheckedIOException("cannot write the report to " + config.out(), e);
                }
            }
            return report;
        } finally {
            group.shutdownGracefully(0, 2, TimeUnit.SECONDS).awaitUninterruptibly(10, TimeUnit.SECONDS);
        }
    }
}
