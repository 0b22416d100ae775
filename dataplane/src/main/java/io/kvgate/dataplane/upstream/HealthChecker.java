package io.kvgate.dataplane.upstream;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.engine.EngineProfile;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.RoutingStage;
import io.kvgate.dataplane.route.Rule;
import io.netty.bootstrap.Bootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoop;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.handler.codec.http.DefaultFullHttpRequest;
import io.netty.handler.codec.http.HttpClientCodec;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpObject;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpVersion;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * Active HTTP probes: every interval, GET the health path of every endpoint of the current rule set; after
 * {@code unhealthy_threshold} consecutive failures (or {@code healthy_threshold} successes) the verdict is sent to
 * the routing stage, which owns health. An engine that answers 503 while its model loads (llama-server) is not
 * ready on that answer at once, without counting it as a failure: loading is a state the engine states, not a fault
 * to confirm, and the successes after it bring the endpoint in as after any outage. Runs entirely on one event loop
 * (its own state needs no locks).
 */
public final class HealthChecker implements AutoCloseable {
    private final EventLoop loop;
    private final Class<? extends SocketChannel> channelClass;
    private final Supplier<Iterable<Rule>> rules;
    private final RoutingStage router;
    private final java.util.function.Consumer<EndpointState> onDown;
    private volatile GatewayConfig.Health cfg;
    private final Map<EndpointState, int[]> streaks = new HashMap<>(); // [successes, failures, lastVerdict(1 up, 0 down)]
    private volatile ScheduledFuture<?> task;
    private final io.kvgate.dataplane.tls.UpstreamTls tls;

    /**
     * @param onDown told (on the probe loop) when an endpoint is found down after being up, so requests waiting on it
     *               fail over at once instead of waiting for their timeouts; not for a loading answer (a loading engine
     *               answers every request at once)
     */
    public HealthChecker(EventLoop loop, Class<? extends SocketChannel> channelClass, Supplier<Iterable<Rule>> rules,
                         RoutingStage router, GatewayConfig.Health cfg, java.util.function.Consumer<EndpointState> onDown) {
        this(loop, channelClass, rules, router, cfg, onDown, new io.kvgate.dataplane.tls.UpstreamTls());
    }

    /** @param tls how {@code https://} endpoints are probed (a failed handshake is a failed probe) */
    public HealthChecker(EventLoop loop, Class<? extends SocketChannel> channelClass, Supplier<Iterable<Rule>> rules,
                         RoutingStage router, GatewayConfig.Health cfg, java.util.function.Consumer<EndpointState> onDown,
                         io.kvgate.dataplane.tls.UpstreamTls tls) {
        this.tls = tls;
        this.loop = loop;
        this.onDown = onDown;
        this.channelClass = channelClass;
        this.rules = rules;
        this.router = router;
        this.cfg = cfg;
    }

    public void start() {
        task = loop.scheduleAtFixedRate(this::probeAll, 0, cfg.intervalMs(), TimeUnit.MILLISECONDS);
    }

    /**
     * A reload's probe settings: thresholds, timeout and path apply to the next probe; a new interval reschedules
     * the probe loop (on its own event loop, so the streaks need no lock).
     */
    public void reconfigure(GatewayConfig.Health next) {
        GatewayConfig.Health prev = this.cfg;
        this.cfg = next;
        if (prev.intervalMs() != next.intervalMs()) {
            loop.execute(() -> {
                if (task != null && !task.isCancelled()) {
                    task.cancel(false);
                    task = loop.scheduleAtFixedRate(this::probeAll, next.intervalMs(), next.intervalMs(), TimeUnit.MILLISECONDS);
                }
            });
        }
    }

    /** The probe settings in use. */
    public GatewayConfig.Health config() {
        return cfg;
    }

    private void probeAll() {
        Set<EndpointState> seen = new HashSet<>();
        for (Rule r : rules.get()) {
            for (EndpointState ep : r.endpoints()) {
                if (seen.add(ep)) {
                    // An endpoint listed by several rules is probed once, with the first rule's health override.
                    probe(ep, r.profile().answers503WhileLoading(), probePath(r.config().health(), cfg, r.profile()),
                        r.config().health());
                    if (r.config().session().pinSlot() && ep.facts().engineSlots() == 0) {
                        readSlotCount(ep);
                    }
                }
            }
        }
        streaks.keySet().retainAll(seen);
    }

    /**
     * Where a rule's endpoints are probed: the rule's {@code health.path}, else the global {@code health.path}, else
     * the engine profile's health route.
     */
    static String probePath(RuleConfig.HealthOverride ruleHealth, GatewayConfig.Health global, EngineProfile profile) {
        return ruleHealth.pathOr(global.path() != null ? global.path() : profile.healthPath());
    }

    private void probe(EndpointState ep, boolean loading503, String path, RuleConfig.HealthOverride ruleHealth) {
        GatewayConfig.Health cfg = this.cfg;
        long timeoutMs = ruleHealth.timeoutMsOr(cfg.timeoutMs());
        Bootstrap b = new Bootstrap().group(loop).channel(channelClass)
            .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, (int) timeoutMs)
            .handler(new ChannelInitializer<SocketChannel>() {
                @Override
                protected void initChannel(SocketChannel ch) {
                    tls.addHandler(ch, ep.config());
                    ch.pipeline().addLast(new HttpClientCodec());
                    ch.pipeline().addLast(new SimpleChannelInboundHandler<HttpObject>() {
                        private boolean answered;

                        @Override
                        protected void channelRead0(ChannelHandlerContext ctx, HttpObject msg) {
                            if (msg instanceof HttpResponse r && !answered) {
                                answered = true;
                                int code = r.status().code();
                                verdict(ep, code == 200 ? Verdict.UP : loading503 && code == 503 ? Verdict.LOADING : Verdict.DOWN);
                                ctx.close();
                            }
                        }

                        @Override
                        public void channelInactive(ChannelHandlerContext ctx) {
                            if (!answered) {
                                answered = true;
                                verdict(ep, Verdict.DOWN);
                            }
                        }

                        @Override
                        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                            ctx.close();
                        }
                    });
                }
            });
        connect(b, ep).addListener(f -> {
            if (!f.isSuccess()) {
                verdict(ep, Verdict.DOWN);
                return;
            }
            Channel ch = ((io.netty.channel.ChannelFuture) f).channel();
            DefaultFullHttpRequest req = new DefaultFullHttpRequest(HttpVersion.HTTP_1_1, HttpMethod.GET, path);
            req.headers().set("host", ep.config().host() + ":" + ep.config().port());
            req.headers().set("connection", "close");
            req.headers().set("user-agent", "kvgate-health");
            ch.writeAndFlush(req);
            loop.schedule(() -> {
                if (ch.isActive()) {
                    ch.close();
                }
            }, timeoutMs, TimeUnit.MILLISECONDS);
        });
    }

    /** Connects a probe; for an https endpoint the future completes once the TLS handshake is done. */
    private io.netty.channel.ChannelFuture connect(Bootstrap b, EndpointState ep) {
        io.netty.channel.ChannelFuture f = b.connect(ep.config().host(), ep.config().port());
        return tls.secure(f.channel(), ep.config(), f);
    }

    /**
     * llama.cpp slot pinning: reads the server's slot count from {@code GET /slots} (a JSON array, one element per
     * slot) once, so pinned slots stay within it. A loading server (503), a server started with {@code --no-slots}
     * (501) or anything unreadable leaves it unknown, and {@code session.slots} is used; the next probe round retries.
     */
    private void readSlotCount(EndpointState ep) {
        GatewayConfig.Health cfg = this.cfg;
        Bootstrap b = new Bootstrap().group(loop).channel(channelClass)
            .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, (int) cfg.timeoutMs())
            .handler(new ChannelInitializer<SocketChannel>() {
                @Override
                protected void initChannel(SocketChannel ch) {
                    tls.addHandler(ch, ep.config());
                    ch.pipeline().addLast(new HttpClientCodec());
                    ch.pipeline().addLast(new io.netty.handler.codec.http.HttpObjectAggregator(1 << 20));
                    ch.pipeline().addLast(new SimpleChannelInboundHandler<io.netty.handler.codec.http.FullHttpResponse>() {
                        @Override
                        protected void channelRead0(ChannelHandlerContext ctx, io.netty.handler.codec.http.FullHttpResponse r) {
                            if (r.status().code() == 200) {
                                try {
                                    var slots = SLOTS_JSON.readTree(r.content().toString(java.nio.charset.StandardCharsets.UTF_8));
                                    if (slots != null && slots.isArray() && !slots.isEmpty()) {
                                        ep.facts().engineSlots(slots.size());
                                    }
                                } catch (Exception ignored) {
                                    // Not the array llama-server answers: the slot count stays unknown.
                                }
                            }
                            ctx.close();
                        }

                        @Override
                        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                            ctx.close();
                        }
                    });
                }
            });
        connect(b, ep).addListener(f -> {
            if (!f.isSuccess()) {
                return;
            }
            Channel ch = ((io.netty.channel.ChannelFuture) f).channel();
            DefaultFullHttpRequest req = new DefaultFullHttpRequest(HttpVersion.HTTP_1_1, HttpMethod.GET,
                "/slots" + ep.facts().routerQuery()); // a llama.cpp router proxies /slots?model= to the model
            req.headers().set("host", ep.config().host() + ":" + ep.config().port());
            req.headers().set("connection", "close");
            req.headers().set("user-agent", "kvgate-health");
            ch.writeAndFlush(req);
            loop.schedule(() -> {
                if (ch.isActive()) {
                    ch.close();
                }
            }, cfg.timeoutMs(), TimeUnit.MILLISECONDS);
        });
    }

    private static final com.fasterxml.jackson.databind.ObjectMapper SLOTS_JSON = new com.fasterxml.jackson.databind.ObjectMapper();

    /** What one probe said. */
    enum Verdict { UP, DOWN, LOADING }

    void verdict(EndpointState ep, Verdict v) {
        GatewayConfig.Health cfg = this.cfg;
        int[] s = streaks.computeIfAbsent(ep, k -> new int[] {0, 0, 1});
        if (v == Verdict.LOADING) {
            s[0] = 0; // the failure streak is left as it was: loading is no failure
            if (s[2] == 1) {
                s[2] = 0;
                router.probe(ep, false);
            }
            return;
        }
        if (v == Verdict.UP) {
            s[0]++;
            s[1] = 0;
            if (s[2] == 0 && s[0] >= cfg.healthyThreshold()) {
                s[2] = 1;
                router.probe(ep, true);
            }
        } else {
            s[1]++;
            s[0] = 0;
            if (s[2] == 1 && s[1] >= cfg.unhealthyThreshold()) {
                s[2] = 0;
                router.probe(ep, false);
                onDown.accept(ep);
            }
        }
    }

    @Override
    public void close() {
        if (task != null) {
            task.cancel(false);
        }
    }
}
