package io.kvgate.perf.http;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.http.ClientChannelInitializer;
import io.kvgate.dataplane.http.DrainState;
import io.kvgate.dataplane.http.LocalRoutes;
import io.kvgate.dataplane.metrics.GatewayMetrics;
import io.kvgate.dataplane.exchange.ExchangeRouting;
import io.kvgate.dataplane.exchange.GatewayContext;
import io.kvgate.dataplane.exchange.LiveExchanges;
import io.kvgate.dataplane.exchange.Exchanges;
import io.kvgate.dataplane.exchange.ExchangeStarter;
import io.kvgate.dataplane.route.EndpointRegistry;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.Outcome;
import io.kvgate.dataplane.route.Decision;
import io.kvgate.dataplane.route.RouteCallback;
import io.kvgate.dataplane.route.RouteInputs;
import io.kvgate.dataplane.route.RouteTable;
import io.kvgate.dataplane.route.RoutingStage;
import io.kvgate.dataplane.route.RulePolicies;
import io.kvgate.dataplane.upstream.UpstreamConnector;
import io.kvgate.dataplane.upstream.UpstreamPool;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoop;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.util.ReferenceCountUtil;
import java.nio.charset.StandardCharsets;
import java.util.Set;
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
 * The front door's own work per request on one connection (head, body and prompt stages of a round-robin rule:
 * API key, route, Content-Type, the body read once and scanned once, typed validation, the ParsedRequest), with an
 * exchange layer that answers at once with a 2-byte JSON 200. The baseline is Netty's HTTP codec alone answering the
 * same bytes the same way: the difference is what the front door adds. Both on an {@link EmbeddedChannel} (no
 * socket, no syscalls), so the numbers are CPU and allocation of the pipeline only. Run with {@code -prof gc}.
 *
 * <p>{@link #proxied} is the whole plain proxied path instead: the same request through the front door, the real
 * exchange ({@link io.kvgate.dataplane.exchange.PlainExchange}: routing decided at once, no ring), its upstream leg on a kept-alive engine
 * connection (an {@link EmbeddedChannel} with the pool's pipeline), the engine's answer — the head and 247-byte
 * completion the benchmark origin (nginx) sends — decoded, relayed and framed to the client: every head on the path
 * is built, encoded or parsed once per operation, and the bytes written both ways are drained.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(2)
@State(Scope.Thread)
public class FrontDoorBench {
    @Param({"1024", "16384"})
    int bodyBytes;

    /**
     * Who sends the requests: {@code flat_key} (an {@code api_keys} key: the anonymous tenant), {@code tenant} (a
     * tenant's key, no limits) or {@code limited_tenant} (limits too high to refuse anything, so every request is
     * reserved, answered with the x-ratelimit-* headers and settled). Compare them side by side with
     * {@code -p caller=flat_key,tenant,limited_tenant -prof gc}: a tenant without limits must pay nothing.
     */
    @Param({"flat_key"})
    String caller;

    private static final String TENANT_KEY = "bench-tenant-key-0123456789";

    private static final byte[] OK = "{}".getBytes(StandardCharsets.US_ASCII);
    /** What the benchmark origin (perf/frontdoor/nginx-origin.conf.in) answers, head and body. */
    static final String ORIGIN_BODY = "{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion\",\"created\":1764460800,"
        + "\"model\":\"bench\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"ok\"},"
        + "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,\"total_tokens\":2}}";
    static final String ORIGIN_ANSWER = "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Mon, 01 Dec 2026 20:00:00 GMT\r\n"
        + "Content-Type: application/json\r\nContent-Length: " + ORIGIN_BODY.length() + "\r\nConnection: keep-alive\r\n\r\n"
        + ORIGIN_BODY;

    private RoutingStage router;
    private RoutingStage proxyRouter;
    private EmbeddedChannel frontDoor;
    private EmbeddedChannel codecOnly;
    private EmbeddedChannel proxiedClient;
    /** The one kept-alive engine connection of {@link #proxied} (idle between operations). */
    private EmbeddedChannel engine;
    private Channel idleEngine;
    private ByteBuf request;
    private ByteBuf originAnswer;

    private static FullHttpResponse ok() {
        FullHttpResponse r = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK, Unpooled.wrappedBuffer(OK));
        r.headers().set(HttpHeaderNames.CONTENT_TYPE, "application/json").setInt(HttpHeaderNames.CONTENT_LENGTH, OK.length);
        return r;
    }

    @Setup
    public void setUp() throws Exception {
        GatewayConfig cfg = GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            api_keys: [bench-key-0123456789]
            tenants:
              - name: bench
                api_key_sha256: [%s]
            %s
            rules:
              - name: chat
                models: [m]
                endpoints:
                  - url: http://127.0.0.1:1
            """.formatted(io.kvgate.control.config.TenancyConfig.sha256Hex(TENANT_KEY), caller.equals("limited_tenant")
            ? "    limits: {requests_per_minute: 1000000000000, tokens_per_minute: 1000000000000000}" : ""));
        RouteTable table = RouteTable.build(cfg, new EndpointRegistry(), c -> RulePolicies.create(c, null, NanoClock.SYSTEM));
        router = new RoutingStage(cfg.router(), table, NanoClock.SYSTEM);
        GatewayMetrics metrics = new GatewayMetrics();
        metrics.modelLabels(Set.of("m"));
        GatewayContext gw = new GatewayContext(cfg, router, null, metrics, NanoClock.SYSTEM);
        DrainState drain = new DrainState();
        ExchangeStarter answerAtOnce = (ctx, req, owner) -> {
            req.body().release();
            ctx.writeAndFlush(ok());
            owner.onExchangeDone(true);
            return () -> { };
        };
        frontDoor = new EmbeddedChannel();
        ClientChannelInitializer.configure(frontDoor.pipeline(), gw, new LocalRoutes(gw, drain), answerAtOnce, drain);
        codecOnly = new EmbeddedChannel(new HttpServerCodec(), new ChannelInboundHandlerAdapter() {
            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                boolean last = msg instanceof LastHttpContent;
                ReferenceCountUtil.release(msg);
                if (last) {
                    ctx.writeAndFlush(ok());
                }
            }
        });
        setUpProxied(cfg);
        StringBuilder content = new StringBuilder();
        String head = "{\"model\":\"m\",\"max_tokens\":16,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"";
        String tail = "\"}]}";
        while (content.length() < bodyBytes - head.length() - tail.length()) {
            content.append("the quick brown fox ");
        }
        String body = head + content.substring(0, bodyBytes - head.length() - tail.length()) + tail;
        String req = "POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer "
            + (caller.equals("flat_key") ? "bench-key-0123456789" : TENANT_KEY) + "\r\n"
            + "Content-Type: application/json\r\nAccept: text/event-stream\r\nUser-Agent: bench\r\nContent-Length: "
            + body.length() + "\r\n\r\n" + body;
        request = Unpooled.unreleasableBuffer(Unpooled.directBuffer(req.length()).writeBytes(req.getBytes(StandardCharsets.US_ASCII)));
        originAnswer = Unpooled.unreleasableBuffer(Unpooled.directBuffer(ORIGIN_ANSWER.length())
            .writeBytes(ORIGIN_ANSWER.getBytes(StandardCharsets.US_ASCII)));
        // One request through, so the engine connection exists and is idle in the "pool".
        if (proxied() == 0) {
            throw new IllegalStateException("the proxied path answered nothing");
        }
    }

    /** The plain proxied path of one client connection, with routing decided at once and one engine connection. */
    private void setUpProxied(GatewayConfig cfg) {
        RouteTable table = RouteTable.build(cfg, new EndpointRegistry(), c -> RulePolicies.create(c, null, NanoClock.SYSTEM));
        proxyRouter = new RoutingStage(cfg.router(), table, NanoClock.SYSTEM);
        EndpointState endpoint = table.ruleForModel("m").endpoints().get(0);
        UpstreamConnector connector = new UpstreamConnector() {
            @Override
            public Channel pollIdle(EndpointState ep) {
                Channel ch = idleEngine;
                idleEngine = null;
                return ch;
            }

            @Override
            public ChannelFuture connect(EventLoop loop, EndpointState ep) {
                engine = newEngineChannel();
                return engine.newSucceededFuture();
            }

            @Override
            public void release(EndpointState ep, Channel ch) {
                ch.read();
                idleEngine = ch;
            }
        };
        ExchangeRouting decideAtOnce = new ExchangeRouting() {
            private final RouteInputs scratch = new RouteInputs();
            /** One decision reused for every request, as the port's slot is: no allocation of the bench's own. */
            private Decision decided;

            @Override
            public RouteInputs inputs() {
                return scratch.clear();
            }

            @Override
            public boolean tryRoute(RouteInputs in, RouteCallback callback) {
                if (decided == null || decided.rule() != in.rule()) {
                    decided = Decision.routed(endpoint, in.rule(), null);
                }
                callback.onDecision(decided);
                return true;
            }

            @Override
            public boolean tryRoutePair(RouteInputs in, RouteCallback callback) {
                callback.onDecision(Decision.pair(endpoint, endpoint, in.rule(), null)); // no P/D rule in this bench
                return true;
            }

            @Override
            public void complete(EndpointState ep, Outcome outcome) {
            }
        };
        GatewayMetrics metrics = new GatewayMetrics();
        metrics.modelLabels(Set.of("m"));
        GatewayContext gw = new GatewayContext(() -> cfg, proxyRouter, null, metrics, NanoClock.SYSTEM,
            connector, new LiveExchanges(), loop -> decideAtOnce);
        DrainState drain = new DrainState();
        ExchangeStarter exchanges = Exchanges.plain(gw); // the gateway's starter for a plain rule
        proxiedClient = new EmbeddedChannel();
        ClientChannelInitializer.configure(proxiedClient.pipeline(), gw, new LocalRoutes(gw, drain), exchanges, drain);
    }

    /** An engine connection with the pool's handlers and, as the pool opens it, auto-read off. */
    private static EmbeddedChannel newEngineChannel() {
        EmbeddedChannel ch = new EmbeddedChannel();
        UpstreamPool.initEngineChannel(ch.pipeline(), 4096);
        ch.config().setAutoRead(false);
        return ch;
    }

    private static int drain(EmbeddedChannel ch) {
        int n = 0;
        Object o;
        while ((o = ch.readOutbound()) != null) {
            n += ((ByteBuf) o).readableBytes();
            ReferenceCountUtil.release(o);
        }
        return n;
    }

    @Benchmark
    public int frontDoor() {
        frontDoor.writeInbound(request.duplicate());
        return drain(frontDoor);
    }

    /** One request through the whole plain proxied path (see the class comment); returns the bytes the client got. */
    @Benchmark
    public int proxied() {
        proxiedClient.writeInbound(request.duplicate());
        drain(engine); // the request the engine received
        engine.writeInbound(originAnswer.duplicate());
        return drain(proxiedClient);
    }

    @Benchmark
    public int baseline_codecOnly() {
        codecOnly.writeInbound(request.duplicate());
        return drain(codecOnly);
    }

    @TearDown
    public void tearDown() {
        frontDoor.finishAndReleaseAll();
        codecOnly.finishAndReleaseAll();
        proxiedClient.finishAndReleaseAll();
        if (engine != null) {
            engine.finishAndReleaseAll();
        }
        router.close();
        proxyRouter.close();
    }
}
