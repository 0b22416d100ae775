package io.kvgate.dataplane.upstream;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.tls.UpstreamTls;
import io.kvgate.dataplane.wire.EngineResponseDecoder;
import io.netty.bootstrap.Bootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.ChannelPipeline;
import io.netty.channel.EventLoop;
import io.netty.channel.socket.SocketChannel;
import io.netty.util.concurrent.FastThreadLocal;
import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Keep-alive connections to engines, one idle stack per (event loop, endpoint): an upstream connection is always
 * used on the event loop of the client connection it serves, so a proxied byte never crosses threads and the pool
 * needs no locks.
 */
public final class UpstreamPool implements UpstreamConnector {
    private final Class<? extends SocketChannel> channelClass;
    // Replaced by a reload (read per connect / per release, so the next request uses the new values).
    private volatile GatewayConfig.Upstream cfg;
    private volatile GatewayConfig.Limits limits;
    private final FastThreadLocal<Map<String, ArrayDeque<Channel>>> idle = new FastThreadLocal<>() {
        @Override
        protected Map<String, ArrayDeque<Channel>> initialValue() {
            return new HashMap<>();
        }
    };
    final AtomicLong connectsOpened = new AtomicLong();
    final AtomicLong connectsReused = new AtomicLong();
    final AtomicLong openUpstreamConnections = new AtomicLong();

    private final UpstreamTls tls;

    public UpstreamPool(Class<? extends SocketChannel> channelClass, GatewayConfig.Upstream cfg, GatewayConfig.Limits limits) {
        this(channelClass, cfg, limits, new UpstreamTls());
    }

    /** @param tls how {@code https://} endpoints are reached (a connection is handed out once its handshake is done) */
    public UpstreamPool(Class<? extends SocketChannel> channelClass, GatewayConfig.Upstream cfg, GatewayConfig.Limits limits,
                        UpstreamTls tls) {
        this.tls = tls;
        this.channelClass = channelClass;
        this.cfg = cfg;
        this.limits = limits;
    }

    public GatewayConfig.Upstream config() {
        return cfg;
    }

    /** A reload's new engine-side timeouts and bounds: used from the next connect / call on. */
    public void reconfigure(GatewayConfig.Upstream upstream, GatewayConfig.Limits clientLimits) {
        this.cfg = upstream;
        this.limits = clientLimits;
    }

    /** An idle pooled connection to {@code ep} that is still open, or null. Event-loop only. */
    @Override
    public Channel pollIdle(EndpointState ep) {
        ArrayDeque<Channel> q = idle.get().get(ep.key());
        if (q == null) {
            return null;
        }
        Channel ch;
        while ((ch = q.pollLast()) != null) {
            if (ch.isActive()) {
                connectsReused.incrementAndGet();
                return ch;
            }
        }
        return null;
    }

    @Override
    public ChannelFuture connect(EventLoop loop, EndpointState ep) {
        GatewayConfig.Upstream cfg = this.cfg;
        GatewayConfig.Limits limits = this.limits;
        Bootstrap b = new Bootstrap()
            .group(loop)
            .channel(channelClass)
            .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, (int) Math.min(Integer.MAX_VALUE, cfg.connectTimeoutMs()))
            .option(ChannelOption.TCP_NODELAY, true)
            // Auto-read stays off for the connection's whole life: legs and the idle pool ask for each read
            // (UpstreamLeg's read-after-write back-pressure). Toggling it per request would cost two epoll_ctl
            // calls per request on the epoll transport (turning it off clears EPOLLIN, the next read() sets it).
            .option(ChannelOption.AUTO_READ, false)
            .handler(new ChannelInitializer<SocketChannel>() {
                @Override
                protected void initChannel(SocketChannel ch) {
                    initEngineChannel(ch.pipeline(), limits.maxInitialLineBytes());
                    tls.addHandler(ch, ep.config());
                }
            });
        connectsOpened.incrementAndGet();
        ChannelFuture f = b.connect(ep.config().host(), ep.config().port());
        f.addListener(x -> {
            if (x.isSuccess()) {
                openUpstreamConnections.incrementAndGet();
                f.channel().closeFuture().addListener(y -> openUpstreamConnections.decrementAndGet());
            }
        });
        return tls.secure(f.channel(), ep.config(), f);
    }

    /** Most header bytes an engine's response head may carry (besides its status line). */
    public static final int MAX_ENGINE_HEADER_BYTES = 64 << 10;

    /**
     * An engine connection's handlers: the strict response decoder (status line within {@code maxStatusLineBytes},
     * the head within that plus {@link #MAX_ENGINE_HEADER_BYTES}) and the leg handler. Requests are written as bytes
     * (the leg encodes them), so no encoder. Also used by tests on embedded channels.
     */
    public static void initEngineChannel(ChannelPipeline p, int maxStatusLineBytes) {
        p.addLast("codec", new EngineResponseDecoder(maxStatusLineBytes, maxStatusLineBytes + 2 + MAX_ENGINE_HEADER_BYTES));
        p.addLast("call", new UpstreamLeg.Handler());
    }

    /** Returns a connection whose last response completed cleanly. Event-loop only. */
    @Override
    public void release(EndpointState ep, Channel ch) {
        if (!ch.isActive() || cfg.maxIdlePerEndpoint() == 0) {
            ch.close();
            return;
        }
        ArrayDeque<Channel> q = idle.get().computeIfAbsent(ep.key(), k -> new ArrayDeque<>());
        if (q.size() >= cfg.maxIdlePerEndpoint()) {
            ch.close();
            return;
        }
        // An idle connection keeps one read pending, so a close or stray bytes retire it at once. Released from the
        // leg's last read, the read interest is still registered: this costs no epoll_ctl (auto-read stays off).
        ch.read();
        q.addLast(ch);
    }

    /** Registers the pool's families (open connections, connects, reuses), read from its counters on scrape. */
    public void registerMetrics(PrometheusRegistry registry) {
        GaugeWithCallback.builder().name("kvgate_upstream_open_connections").help("Open connections to engines.")
            .callback(cb -> cb.call(openConnections())).register(registry);
        counter(registry, "kvgate_upstream_connects_total", "New connections opened to engines.", this::connectsOpened);
        counter(registry, "kvgate_upstream_reuses_total", "Requests sent on a pooled keep-alive connection.", this::connectsReused);
    }

    private static void counter(PrometheusRegistry registry, String name, String help, java.util.function.LongSupplier value) {
        CounterWithCallback.builder().name(name).help(help).callback(cb -> cb.call(value.getAsLong())).register(registry);
    }

    public long connectsOpened() {
        return connectsOpened.get();
    }

    public long connectsReused() {
        return connectsReused.get();
    }

    public long openConnections() {
        return openUpstreamConnections.get();
    }
}
