package io.kvgate.dataplane.http;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.metrics.GatewayMetrics;
import io.kvgate.dataplane.exchange.GatewayContext;
import io.kvgate.dataplane.exchange.ActiveExchange;
import io.kvgate.dataplane.exchange.ExchangeOwner;
import io.kvgate.dataplane.exchange.ExchangeStarter;
import io.kvgate.dataplane.request.ParsedRequest;
import io.kvgate.dataplane.route.EndpointRegistry;
import io.kvgate.dataplane.route.RouteTable;
import io.kvgate.dataplane.route.RoutingStage;
import io.kvgate.dataplane.route.RulePolicies;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.embedded.EmbeddedChannel;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The front door on an {@link EmbeddedChannel}: the real pipeline ({@link ClientChannelInitializer}), a real route
 * table, and an exchange layer that records what it was handed instead of calling engines. Time is the channel's
 * (advanced with {@code advanceTimeBy}); nothing sleeps.
 */
final class FrontDoorHarness implements AutoCloseable {
    static final String BASE_YAML = """
        listen: 127.0.0.1:0
        admin_listen: 127.0.0.1:0
        admin_token: admin-token-0123456789
        api_keys: [k1]
        limits:
          max_body_bytes: 4096
          request_read_timeout_ms: 1000
          max_connections: 3
        rules:
          - name: chat
            models: [m]
            endpoints:
              - url: http://127.0.0.1:1
          - name: small
            models: [small]
            max_n: 4
            endpoints:
              - url: http://127.0.0.1:2
        """;

    final GatewayConfig config;
    /** The configuration the gateway applies now: set it to reload (the route table stays the harness's). */
    final java.util.concurrent.atomic.AtomicReference<GatewayConfig> applied = new java.util.concurrent.atomic.AtomicReference<>();
    final GatewayMetrics metrics = new GatewayMetrics();
    final ManualClock clock = new ManualClock();
    final RoutingStage router;
    final GatewayContext gw;
    final DrainState drain = new DrainState();
    final ConnectionLimit connections;
    final List<ParsedRequest> started = new ArrayList<>();
    /** The body each started exchange was handed, as text (the buffer itself is released). */
    final List<String> bodies = new ArrayList<>();
    /** The memory each started exchange's body lives in (its backing array; the channels allocate on the heap). */
    final List<byte[]> bodyArrays = new ArrayList<>();
    final List<ExchangeOwner> owners = new ArrayList<>();
    final List<ChannelHandlerContext> contexts = new ArrayList<>();
    /** Counts heap bytes of every buffer the channels allocate (cumulation, body, responses). */
    final UnpooledByteBufAllocator alloc = new UnpooledByteBufAllocator(false, false, false);

    FrontDoorHarness() throws Exception {
        this(BASE_YAML);
    }

    FrontDoorHarness(String yaml) throws Exception {
        config = GatewayConfig.parse(yaml);
        RouteTable table = RouteTable.build(config, new EndpointRegistry(),
            c -> RulePolicies.create(c, null, clock));
        router = new RoutingStage(config.router(), table, clock);
        applied.set(config);
        gw = new GatewayContext(applied::get, router, null, metrics, clock);
        java.util.Set<String> models = new java.util.HashSet<>();
        config.rules().forEach(r -> models.addAll(r.models()));
        metrics.modelLabels(models);
        connections = new ConnectionLimit(config.limits().maxConnections());
    }

    /** Records the request and keeps it "in flight" until the test answers through {@link #owners}. */
    final ExchangeStarter starter = (ctx, request, owner) -> {
        started.add(request);
        bodies.add(request.body().toString(StandardCharsets.UTF_8));
        bodyArrays.add(request.body().hasArray() ? request.body().array() : null);
        owners.add(owner);
        contexts.add(ctx);
        request.body().release();
        return () -> { };
    };

    EmbeddedChannel channel() {
        EmbeddedChannel ch = new EmbeddedChannel(false, false);
        ch.config().setAllocator(alloc);
        ch.pipeline().addLast(new ClientChannelInitializer(gw, new LocalRoutes(gw, drain), starter, drain, connections));
        try {
            ch.register();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
        // The embedded loop's clock otherwise runs on System.nanoTime() plus the advances: on a loaded machine the
        // real time between two steps of a test fires a deadline early (m2_headSlowlorisGets408AndClose did).
        // Frozen, time moves only by advanceTimeBy. (Deadlines start with the first byte, after this.)
        ch.freezeTime();
        return ch;
    }

    static ByteBuf ascii(String s) {
        return Unpooled.copiedBuffer(s, StandardCharsets.ISO_8859_1);
    }

    /** Everything the channel has written so far, as text. */
    static String output(EmbeddedChannel ch) {
        StringBuilder sb = new StringBuilder();
        Object o;
        while ((o = ch.readOutbound()) != null) {
            ByteBuf b = (ByteBuf) o;
            sb.append(b.toString(StandardCharsets.ISO_8859_1));
            b.release();
        }
        return sb.toString();
    }

    static String chatPost(String body, String... headers) {
        StringBuilder sb = new StringBuilder("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n");
        for (String h : headers) {
            sb.append(h).append("\r\n");
        }
        return sb.append("Content-Length: ").append(body.getBytes(StandardCharsets.UTF_8).length).append("\r\n\r\n").append(body).toString();
    }

    static final String AUTH = "Authorization: Bearer k1";

    ByteBufAllocator allocator() {
        return alloc;
    }

    @Override
    public void close() {
        router.close();
    }
}
