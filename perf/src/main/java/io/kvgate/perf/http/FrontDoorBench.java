package io.kvgate.perf.http;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.http.ClientChannelInitializer;
import io.kvgate.dataplane.http.DrainState;
import io.kvgate.dataplane.http.LocalRoutes;
import io.kvgate.dataplane.metrics.GatewayMetrics;
import io.kvgate.dataplane.proxy.GatewayContext;
import io.kvgate.dataplane.proxy.RequestHooks;
import io.kvgate.dataplane.request.ExchangeStarter;
import io.kvgate.dataplane.route.EndpointRegistry;
import io.kvgate.dataplane.route.RouteTable;
import io.kvgate.dataplane.route.RoutingStage;
import io.kvgate.dataplane.route.RulePolicies;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
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

    private static final byte[] OK = "{}".getBytes(StandardCharsets.US_ASCII);
    private RoutingStage router;
    private EmbeddedChannel frontDoor;
    private EmbeddedChannel codecOnly;
    private ByteBuf request;

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
            rules:
              - name: chat
                models: [m]
                endpoints:
                  - url: http://127.0.0.1:1
            """);
        RouteTable table = RouteTable.build(cfg, new EndpointRegistry(), c -> RulePolicies.create(c, null, NanoClock.SYSTEM));
        router = new RoutingStage(cfg.router(), table, NanoClock.SYSTEM);
        GatewayMetrics metrics = new GatewayMetrics();
        metrics.modelLabels(Set.of("m"));
        GatewayContext gw = new GatewayContext(cfg, router, null, metrics, NanoClock.SYSTEM, new RequestHooks() { });
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
        StringBuilder content = new StringBuilder();
        String head = "{\"model\":\"m\",\"max_tokens\":16,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"";
        String tail = "\"}]}";
        while (content.length() < bodyBytes - head.length() - tail.length()) {
            content.append("the quick brown fox ");
        }
        String body = head + content.substring(0, bodyBytes - head.length() - tail.length()) + tail;
        String req = "POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer bench-key-0123456789\r\n"
            + "Content-Type: application/json\r\nAccept: text/event-stream\r\nUser-Agent: bench\r\nContent-Length: "
            + body.length() + "\r\n\r\n" + body;
        request = Unpooled.unreleasableBuffer(Unpooled.directBuffer(req.length()).writeBytes(req.getBytes(StandardCharsets.US_ASCII)));
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

    @Benchmark
    public int baseline_codecOnly() {
        codecOnly.writeInbound(request.duplicate());
        return drain(codecOnly);
    }

    @TearDown
    public void tearDown() {
        frontDoor.finishAndReleaseAll();
        codecOnly.finishAndReleaseAll();
        router.close();
    }
}
