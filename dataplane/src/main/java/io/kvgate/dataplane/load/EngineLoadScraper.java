package io.kvgate.dataplane.load;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.EngineReading;
import io.kvgate.dataplane.route.Rule;
import io.netty.bootstrap.Bootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoop;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.handler.codec.TooLongFrameException;
import io.netty.handler.codec.http.DefaultFullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpClientCodec;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.util.concurrent.ScheduledFuture;
import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.function.Supplier;

/**
 * Scrapes every endpoint's Prometheus page ({@code load.path}, unset: the engine's own, {@code /metrics} or
 * TensorRT-LLM's {@code /prometheus/metrics}) every
 * {@code load.scrape_interval_ms} and publishes what the engine says about its load ({@link MetricsPage}) to the
 * endpoint's state, where the routing stage takes it up at its next batch ({@link io.kvgate.dataplane.route.LoadEstimate#publishReading}: one
 * volatile write, no lock on the routing thread).
 *
 * <p>Everything runs on one event loop of its own, never an I/O thread nor the routing thread: one non-blocking
 * client for all endpoints, one kept-alive connection per endpoint, at most one scrape in flight per endpoint (an
 * endpoint whose last scrape has not finished is skipped that round), each bounded by {@code load.timeout_ms}
 * (connect included) and its body by {@code load.max_body_bytes}. The page is parsed on this loop too. A failed
 * scrape (connection refused, timeout, a 404 because the engine serves no metrics, an oversized page, a page without
 * any load family) publishes nothing: the last reading ages until the routing stage treats it as unknown
 * ({@code load.stale_ms}) and the endpoint is routed on this gateway's own in-flight count again. Each scrape's
 * outcome is counted ({@code kvgate_engine_load_scrapes_total{endpoint,result}}).
 *
 * <p>Which endpoints: every endpoint of the current rule set whose engine profile names load families
 * ({@link io.kvgate.dataplane.engine.EngineProfile#loadMetrics}). A page that states the engine's block size
 * (TensorRT-LLM's {@code trtllm_kv_cache_tokens_per_block}) is compared with the rule's {@code block_size}: a
 * difference is logged once per endpoint and shown by {@code ctl doctor} (learned keys would never match). A reload that changes the rule set or the {@code load}
 * settings takes effect at the next round; {@code load.enabled: false} withdraws every reading.
 */
public final class EngineLoadScraper implements AutoCloseable {
    /** How one scrape ended: the {@code result} label. */
    public enum Result {
        OK, NO_METRICS, NOT_FOUND, HTTP_ERROR, CONNECT_ERROR, TIMEOUT, TOO_LARGE, ERROR;

        public final String label = name().toLowerCase(Locale.ROOT);
    }

    /**
     * Runs the next round after {@code delayMs} on the scraper's loop. The gateway's schedules it on that loop; a test
     * holds each round until it steps it, so "nothing is scraped while scraping is off" is asserted over rounds that
     * ran, not over a stretch of wall-clock time that a stalled host can outlast.
     */
    @FunctionalInterface
    interface RoundTimer {
        void schedule(Runnable round, long delayMs);
    }

    private final EventLoopGroup group;
    private final EventLoop loop;
    private final Class<? extends SocketChannel> channelClass;
    private final Supplier<Iterable<Rule>> rules;
    private final Supplier<GatewayConfig.Load> config;
    private final NanoClock clock;
    private final RoundTimer roundTimer;
    // Loop-confined.
    private final Map<String, Target> targets = new HashMap<>();
    /** This round's rule of each wanted endpoint (the first rule naming it): its page path and block size. */
    private Map<String, Rule> ruleOf = Map.of();
    /** Scrapes sent (or connecting) so far, over all targets. */
    private final AtomicLong started = new AtomicLong();
    /** The targets, for metrics readers on other threads. */
    private volatile Target[] view = new Target[0];
    private volatile boolean closed;
    private final io.kvgate.dataplane.tls.UpstreamTls tls;

    /**
     * @param group  the scraper's own event loop group (one thread; closed with the scraper)
     * @param rules  the current rule set (read on every round)
     * @param config the current {@code load} settings (read on every round)
     */
    public EngineLoadScraper(EventLoopGroup group, Class<? extends SocketChannel> channelClass, Supplier<Iterable<Rule>> rules,
                             Supplier<GatewayConfig.Load> config, NanoClock clock) {
        this(group, channelClass, rules, config, clock, new io.kvgate.dataplane.tls.UpstreamTls());
    }

    /** @param tls how {@code https://} endpoints are scraped (a failed handshake is a {@code connect_error}) */
    public EngineLoadScraper(EventLoopGroup group, Class<? extends SocketChannel> channelClass, Supplier<Iterable<Rule>> rules,
                             Supplier<GatewayConfig.Load> config, NanoClock clock, io.kvgate.dataplane.tls.UpstreamTls tls) {
        this(group, channelClass, rules, config, clock, tls, null);
    }

    /** @param roundTimer when the next round runs; null: on the scraper's loop after {@code load.scrape_interval_ms} */
    EngineLoadScraper(EventLoopGroup group, Class<? extends SocketChannel> channelClass, Supplier<Iterable<Rule>> rules,
                      Supplier<GatewayConfig.Load> config, NanoClock clock, io.kvgate.dataplane.tls.UpstreamTls tls,
                      RoundTimer roundTimer) {
        this.tls = tls;
        this.group = group;
        this.loop = group.next();
        this.roundTimer = roundTimer != null ? roundTimer
            : (round, delayMs) -> loop.schedule(round, delayMs, TimeUnit.MILLISECONDS);
        this.channelClass = channelClass;
        this.rules = rules;
        this.config = config;
        this.clock = clock;
    }

    public void start() {
        loop.execute(this::round);
    }

    /** Scrapes every endpoint that has no scrape in flight, then schedules the next round. */
    private void round() {
        if (closed) {
            return;
        }
        GatewayConfig.Load cfg = config.get();
        try {
            if (!cfg.enabled()) {
                retainOnly(Map.of());
            } else {
                Map<String, EndpointState> wanted = new HashMap<>();
                Map<String, Rule> ruleOf = new HashMap<>();
                for (Rule r : rules.get()) {
                    if (r.profile().loadMetrics() == null) {
                        continue; // it serves no Prometheus load page
                    }
                    for (EndpointState ep : r.endpoints()) {
                        if (wanted.putIfAbsent(ep.key(), ep) == null) {
                            ruleOf.put(ep.key(), r);
                        }
                    }
                }
                this.ruleOf = ruleOf;
                retainOnly(wanted);
                for (Target t : targets.values()) {
                    if (!t.inFlight) {
                        t.scrape(cfg);
                    }
                }
            }
        } catch (RuntimeException e) {
            // A bug in one round must not end scraping: the next round starts from the same state.
            io.kvgate.control.log.Log.warn("engine load scraper round failed: " + e);
        } finally {
            if (!closed) {
                roundTimer.schedule(this::round, cfg.scrapeIntervalMs());
            }
        }
    }

    /** Keeps the targets of {@code wanted}, adds new ones, drops (and withdraws the readings of) the others. */
    private void retainOnly(Map<String, EndpointState> wanted) {
        boolean changed = false;
        for (Iterator<Map.Entry<String, Target>> it = targets.entrySet().iterator(); it.hasNext(); ) {
            Map.Entry<String, Target> e = it.next();
            EndpointState ep = wanted.get(e.getKey());
            if (ep != e.getValue().ep) {
                e.getValue().stop();
                it.remove();
                changed = true;
            }
        }
        for (Map.Entry<String, EndpointState> e : wanted.entrySet()) {
            if (!targets.containsKey(e.getKey())) {
                targets.put(e.getKey(), new Target(e.getValue(), ruleOf.get(e.getKey())));
                changed = true;
            }
        }
        if (changed) {
            view = targets.values().toArray(Target[]::new);
        }
    }

    /** Scrape outcomes of {@code endpointKey} with {@code result} so far (tests, metrics); 0 for an unknown endpoint. */
    public long scrapes(String endpointKey, Result result) {
        for (Target t : view) {
            if (t.ep.key().equals(endpointKey)) {
                return t.results.get(result.ordinal());
            }
        }
        return 0;
    }

    /** Scrapes started so far, over all endpoints (tests: none may start while scraping is off). */
    long scrapesStarted() {
        return started.get();
    }

    /** Malformed lines skipped in {@code endpointKey}'s pages so far. */
    public long malformedLines(String endpointKey) {
        for (Target t : view) {
            if (t.ep.key().equals(endpointKey)) {
                return t.malformed.get();
            }
        }
        return 0;
    }

    /**
     * The tokens per KV-cache block {@code endpointKey}'s last page stated (TensorRT-LLM's
     * {@code trtllm_kv_cache_tokens_per_block}), 0 when none did.
     */
    public int tokensPerBlock(String endpointKey) {
        for (Target t : view) {
            if (t.ep.key().equals(endpointKey)) {
                return t.tokensPerBlock;
            }
        }
        return 0;
    }

    /** The path scraped on {@code endpointKey} under the current {@code load} settings, null for one not scraped. */
    public String pathOf(String endpointKey) {
        for (Target t : view) {
            if (t.ep.key().equals(endpointKey)) {
                return config.get().pathFor(t.enginePath);
            }
        }
        return null;
    }

    /** Registers the families of the scrapes and the last readings. */
    public void registerMetrics(PrometheusRegistry registry) {
        CounterWithCallback.builder().name("kvgate_engine_load_scrapes_total").help("Scrapes of the engines' metrics"
                + " pages by endpoint and result (ok, no_metrics, not_found, http_error, connect_error, timeout, too_large, error).")
            .labelNames("endpoint", "result").callback(cb -> {
                for (Target t : view) {
                    for (Result r : Result.values()) {
                        long n = t.results.get(r.ordinal());
                        if (n > 0 || r == Result.OK) {
                            cb.call(n, t.ep.key(), r.label);
                        }
                    }
                }
            }).register(registry);
        CounterWithCallback.builder().name("kvgate_engine_load_malformed_lines_total").help("Lines of the engines' metrics"
                + " pages skipped as malformed (or with a value that cannot be a load signal).")
            .labelNames("endpoint").callback(cb -> {
                for (Target t : view) {
                    cb.call(t.malformed.get(), t.ep.key());
                }
            }).register(registry);
        readingGauge(registry, "kvgate_engine_load_running",
            "Requests the engine reported running in its last successful scrape, per DP rank.", 0);
        readingGauge(registry, "kvgate_engine_load_waiting",
            "Requests the engine reported waiting in its queue in its last successful scrape, per DP rank.", 1);
        readingGauge(registry, "kvgate_engine_load_kv_usage",
            "KV-cache usage (0..1) the engine reported in its last successful scrape, per DP rank.", 2);
        GaugeWithCallback.builder().name("kvgate_engine_load_age_seconds").help("Age of the endpoint's last successful engine reading.")
            .labelNames("endpoint").callback(cb -> {
                long now = clock.nanoTime();
                for (Target t : view) {
                    EngineReading r = t.ep.loadEstimate().lastReading();
                    if (r != null) {
                        cb.call(Math.max(0, now - r.takenAtNs()) / 1e9, t.ep.key());
                    }
                }
            }).register(registry);
    }

    /** One per-rank reading gauge: {@code which} 0 running, 1 waiting, 2 KV usage; ranks the engine did not report are left out. */
    private void readingGauge(PrometheusRegistry registry, String name, String help, int which) {
        GaugeWithCallback.builder().name(name).help(help).labelNames("endpoint", "rank").callback(cb -> {
            for (Target t : view) {
                EngineReading r = t.ep.loadEstimate().lastReading();
                if (r == null) {
                    continue;
                }
                for (int rank = 0; rank < r.ranks(); rank++) {
                    double v = which == 0 ? r.running(rank) : which == 1 ? r.waiting(rank) : r.kvUsage(rank);
                    if (which < 2 ? v < 0 : Double.isNaN(v)) {
                        continue;
                    }
                    cb.call(v, t.ep.key(), Integer.toString(rank));
                }
            }
        }).register(registry);
    }

    @Override
    public void close() {
        closed = true;
        group.shutdownGracefully(0, 1, TimeUnit.SECONDS).syncUninterruptibly();
    }

    /** One endpoint's scrapes (loop-confined except the counters). */
    private final class Target {
        final EndpointState ep;
        /** Where the endpoint's engine serves its page when {@code load.path} is unset. */
        final String enginePath;
        /** The rule's block size, which a block size the page states must equal. */
        final int ruleBlockSize;
        final String ruleName;
        /** The page's block size (last scrape that stated one), 0: none; written on the loop, read by the doctor. */
        volatile int tokensPerBlock;
        private boolean warnedBlockSize;
        final AtomicLongArray results = new AtomicLongArray(Result.values().length);
        final AtomicLong malformed = new AtomicLong();
        private Channel ch;
        private boolean inFlight;
        private long sentAtNs;
        private long baseRouted;
        private long baseCompleted;
        private final long[] baseRankRouted = new long[EngineReading.MAX_RANKS];
        private final long[] baseRankCompleted = new long[EngineReading.MAX_RANKS];
        private ScheduledFuture<?> timeout;
        private boolean stopped;

        Target(EndpointState ep, Rule rule) {
            this.ep = ep;
            this.enginePath = rule.profile().loadMetrics().path();
            this.ruleBlockSize = rule.config().blockSize();
            this.ruleName = rule.name();
        }

        void scrape(GatewayConfig.Load cfg) {
            inFlight = true;
            started.incrementAndGet();
            // The baseline: what this gateway had routed and seen finish when the engine counts its requests.
            sentAtNs = clock.nanoTime();
            baseRouted = ep.loadEstimate().routedTotal();
            baseCompleted = ep.loadEstimate().completedTotal();
            for (int r = 0; r < EngineReading.MAX_RANKS; r++) {
                baseRankRouted[r] = ep.rankLoad().routedTotal(r);
                baseRankCompleted[r] = ep.rankLoad().completedTotal(r);
            }
            timeout = loop.schedule(() -> finish(Result.TIMEOUT, true), cfg.timeoutMs(), TimeUnit.MILLISECONDS);
            if (ch != null && ch.isActive()) {
                send(ch, cfg);
                return;
            }
            ch = null;
            Bootstrap b = new Bootstrap().group(loop).channel(channelClass)
                .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, (int) Math.min(Integer.MAX_VALUE, cfg.timeoutMs()))
                .option(ChannelOption.TCP_NODELAY, true)
                .handler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel c) {
                        tls.addHandler(c, ep.config());
                        c.pipeline().addLast(new HttpClientCodec());
                        c.pipeline().addLast(new HttpObjectAggregator(cfg.maxBodyBytes()));
                        c.pipeline().addLast(new PageHandler(Target.this));
                    }
                });
            ChannelFuture connected = b.connect(ep.config().host(), ep.config().port());
            Channel c = connected.channel();
            ChannelFuture f = tls.secure(c, ep.config(), connected);
            ch = c;
            f.addListener(done -> {
                if (ch != c || !inFlight) {
                    c.close(); // timed out or stopped meanwhile
                    return;
                }
                if (!done.isSuccess()) {
                    ch = null;
                    finish(Result.CONNECT_ERROR, false);
                    return;
                }
                send(c, cfg);
            });
        }

        private void send(Channel c, GatewayConfig.Load cfg) {
            // A llama.cpp router serves each model's page at ?model= (and must not load one for a scrape).
            DefaultFullHttpRequest req = new DefaultFullHttpRequest(HttpVersion.HTTP_1_1, HttpMethod.GET,
                cfg.pathFor(enginePath) + ep.facts().routerQuery());
            req.headers().set("host", ep.hostHeader());
            req.headers().set("accept", "text/plain;version=0.0.4");
            req.headers().set("user-agent", "kvgate-load");
            c.writeAndFlush(req).addListener(w -> {
                if (!w.isSuccess() && ch == c && inFlight) {
                    finish(Result.ERROR, true);
                }
            });
        }

        /** The page arrived (on the loop). */
        void onPage(Channel c, FullHttpResponse r) {
            if (c != ch || !inFlight) {
                return;
            }
            boolean keep = HttpUtil.isKeepAlive(r);
            int code = r.status().code();
            if (r.decoderResult().isFailure()) {
                finish(Result.ERROR, true);
                return;
            }
            if (code != 200) {
                finish(code == 404 ? Result.NOT_FOUND : Result.HTTP_ERROR, !keep);
                return;
            }
            MetricsPage page = MetricsPage.read(r.content().toString(StandardCharsets.UTF_8));
            if (page.malformed() > 0) {
                malformed.addAndGet(page.malformed());
            }
            checkBlockSize(page.tokensPerBlock());
            if (page.hasQueue()) {
                ep.loadEstimate().publishReading(page.reading(sentAtNs, baseRouted, baseCompleted, baseRankRouted, baseRankCompleted));
                finish(Result.OK, !keep);
            } else {
                finish(Result.NO_METRICS, !keep);
            }
        }

        /** Notes the page's block size; the first that differs from the rule's is logged (once per endpoint). */
        private void checkBlockSize(int stated) {
            if (stated <= 0) {
                return;
            }
            tokensPerBlock = stated;
            if (stated != ruleBlockSize && !warnedBlockSize) {
                warnedBlockSize = true;
                io.kvgate.control.log.Log.warn("endpoint " + ep.key() + " of rule " + ruleName + " states "
                    + stated + " tokens per KV-cache block, the rule's block_size is " + ruleBlockSize
                    + ": set the rule's block_size: " + stated + " (its learned keys cannot match otherwise)");
            }
        }

        void onFailure(Channel c, Throwable cause) {
            if (c != ch || !inFlight) {
                c.close();
                return;
            }
            finish(cause instanceof TooLongFrameException ? Result.TOO_LARGE : Result.ERROR, true);
        }

        void onClosed(Channel c) {
            if (c == ch) {
                ch = null;
                if (inFlight) {
                    finish(Result.ERROR, false);
                }
            }
        }

        private void finish(Result result, boolean closeChannel) {
            if (!inFlight) {
                return;
            }
            inFlight = false;
            if (timeout != null) {
                timeout.cancel(false);
                timeout = null;
            }
            if (!stopped) {
                results.incrementAndGet(result.ordinal());
            }
            if (closeChannel && ch != null) {
                Channel c = ch;
                ch = null;
                c.close();
            }
        }

        /** The endpoint left the rule set (or scraping was turned off): no more scrapes, no reading. */
        void stop() {
            stopped = true;
            finish(Result.ERROR, true);
            if (ch != null) {
                ch.close();
                ch = null;
            }
            ep.loadEstimate().publishReading(null);
        }
    }

    /** Hands the channel's page and failures to its target. */
    private static final class PageHandler extends SimpleChannelInboundHandler<FullHttpResponse> {
        private final Target target;

        PageHandler(Target target) {
            this.target = target;
        }

        @Override
        protected void channelRead0(ChannelHandlerContext ctx, FullHttpResponse r) {
            target.onPage(ctx.channel(), r);
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            target.onFailure(ctx.channel(), cause);
            ctx.close();
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            target.onClosed(ctx.channel());
        }
    }
}
