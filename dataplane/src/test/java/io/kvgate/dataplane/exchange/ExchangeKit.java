package io.kvgate.dataplane.exchange;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.exchange.ExchangeOwner;
import io.kvgate.dataplane.request.RequestFields;
import io.kvgate.dataplane.metrics.GatewayMetrics;
import io.kvgate.dataplane.route.EndpointRegistry;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.Outcome;
import io.kvgate.dataplane.route.Policies;
import io.kvgate.dataplane.route.Decision;
import io.kvgate.dataplane.route.RouteCallback;
import io.kvgate.dataplane.route.RouteInputs;
import io.kvgate.dataplane.route.RouteTable;
import io.kvgate.dataplane.route.Rule;
import io.kvgate.dataplane.upstream.EmbeddedEngines;
import io.kvgate.dataplane.wire.ClientHttpCodec;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelOutboundHandlerAdapter;
import io.netty.channel.ChannelPromise;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.codec.http.DefaultHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpResponseDecoder;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.util.ReferenceCountUtil;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * One client connection as an {@link EmbeddedChannel} (with the client codec: what reaches the socket is bytes, read
 * back through a response decoder), engine connections from {@link EmbeddedEngines}, and routing decisions scripted
 * by the test: an exchange runs entirely on the test thread.
 */
public final class ExchangeKit implements AutoCloseable {
    /** Holds the client's writes (a client that does not read) until {@link #release()}. */
    public static final class HoldingWrites extends ChannelOutboundHandlerAdapter {
        boolean holding;
        private final ArrayDeque<Object[]> held = new ArrayDeque<>();
        private ChannelHandlerContext ctx;

        @Override
        public void handlerAdded(ChannelHandlerContext c) {
            ctx = c;
        }

        @Override
        public void write(ChannelHandlerContext c, Object msg, ChannelPromise promise) {
            if (holding) {
                held.add(new Object[] {msg, promise});
            } else {
                c.write(msg, promise);
            }
        }

        @Override
        public void flush(ChannelHandlerContext c) {
            if (!holding) {
                c.flush();
            }
        }

        public void release() {
            holding = false;
            Object[] w;
            while ((w = held.poll()) != null) {
                ctx.write(w[0], (ChannelPromise) w[1]);
            }
            ctx.flush();
        }

        public void drop() {
            Object[] w;
            while ((w = held.poll()) != null) {
                ReferenceCountUtil.release(w[0]);
            }
        }
    }

    /** Captures the context exchanges write through (the front door's position in the pipeline). */
    public static final class Capture extends ChannelInboundHandlerAdapter {
        public ChannelHandlerContext ctx;

        @Override
        public void handlerAdded(ChannelHandlerContext c) {
            ctx = c;
        }
    }

    /** Routing decisions on the test thread: requests wait in {@link #pending} until the test decides. */
    public static final class ScriptedRouting implements ExchangeRouting {
        /** A published request: a copy of its inputs (the exchange's value is reused) and where its decision goes. */
        public record Pending(RouteInputs inputs, RouteCallback callback, boolean pair) {
            public io.kvgate.dataplane.route.Role role() {
                return inputs.role();
            }

            public boolean needsAdmission() {
                return inputs.needsAdmission();
            }
        }

        public final List<Pending> pending = new ArrayList<>();
        private final RouteInputs scratch = new RouteInputs();
        public final EmbeddedEngines outcomes;
        boolean full;

        ScriptedRouting(EmbeddedEngines outcomes) {
            this.outcomes = outcomes;
        }

        @Override
        public RouteInputs inputs() {
            return scratch.clear();
        }

        @Override
        public boolean tryRoute(RouteInputs inputs, RouteCallback callback) {
            if (full) {
                return false;
            }
            pending.add(new Pending(new RouteInputs().copyFrom(inputs), callback, false));
            return true;
        }

        @Override
        public boolean tryRoutePair(RouteInputs inputs, RouteCallback callback) {
            if (full) {
                return false;
            }
            pending.add(new Pending(new RouteInputs().copyFrom(inputs), callback, true));
            return true;
        }

        @Override
        public void complete(EndpointState endpoint, Outcome outcome) {
            outcomes.complete(endpoint, outcome);
        }

        @Override
        public void firstToken(EndpointState endpoint, long ttftNs) {
            outcomes.firstToken(endpoint, ttftNs);
        }

        @Override
        public void noFirstTokenAfter(EndpointState endpoint, long waitedNs) {
            outcomes.noFirstTokenAfter(endpoint, waitedNs);
        }
    }

    public static final class Owner implements ExchangeOwner {
        public int done;
        public Boolean keepAlive;

        @Override
        public void onExchangeDone(boolean k) {
            done++;
            keepAlive = k;
        }

        @Override
        public boolean clientWritable() {
            return true;
        }

        @Override
        public void onClientWritable(Runnable action) {
            action.run();
        }
    }

    public final HoldingWrites writes = new HoldingWrites();
    public final Capture capture = new Capture();
    public final EmbeddedChannel client = new EmbeddedChannel(writes, new ClientHttpCodec(4096, 8192, 65536), capture);
    /** Reads back what the client received, as a client would. */
    private final EmbeddedChannel reader = new EmbeddedChannel(new HttpResponseDecoder());
    public final EmbeddedEngines engines = new EmbeddedEngines();
    public final ScriptedRouting routing = new ScriptedRouting(engines);
    public final GatewayMetrics metrics = new GatewayMetrics();
    public final LiveExchanges live = new LiveExchanges();
    public final Owner owner = new Owner();
    public final GatewayConfig config;
    public final GatewayContext gw;
    public final Rule rule;
    public final EndpointState ep1 = EmbeddedEngines.endpoint("10.0.0.1", 8000);
    public final EndpointState ep2 = EmbeddedEngines.endpoint("10.0.0.2", 8000);
    public final List<ByteBuf> engineBytes = new ArrayList<>();

    /** What the client received so far. */
    public HttpResponse head;
    public final StringBuilder body = new StringBuilder();
    boolean ended;

    public ExchangeKit(String extraYaml, String policy) throws Exception {
        this(extraYaml, policy, "vllm", "");
    }

    /** {@code ruleYaml}: more keys of the rule, each line indented by 4 spaces and ending in a newline. */
    public ExchangeKit(String extraYaml, String policy, String engine, String ruleYaml) throws Exception {
        client.freezeTime();
        config = GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            upstream: {first_byte_timeout_ms: 1000, idle_timeout_ms: 2000}
            %s
            rules:
              - name: r
                models: [m]
                engine: %s
                policy: %s
            %s    endpoints:
                  - url: http://10.0.0.1:8000%s
                  - url: http://10.0.0.2:8000%s
            """.formatted(extraYaml, engine, policy, ruleYaml, policy.equals("pd") ? "\n        role: prefill" : "",
            policy.equals("pd") ? "\n        role: decode" : ""));
        gw = new GatewayContext(() -> config, null, null, metrics, new ManualClock(), engines, live, loop -> routing);
        rule = RouteTable.build(config, new EndpointRegistry(), c -> Policies.create("round_robin")).ruleForModel("m");
    }

    public ExchangeKit(String extraYaml) throws Exception {
        this(extraYaml, "round_robin");
    }

    public static HttpRequest request(String... headers) {
        HttpRequest r = new DefaultHttpRequest(HttpVersion.HTTP_1_1, HttpMethod.POST, "/v1/chat/completions");
        r.headers().set("content-type", "application/json");
        for (int i = 0; i < headers.length; i += 2) {
            r.headers().add(headers[i], headers[i + 1]);
        }
        return r;
    }

    public static RequestFields fields() {
        RequestFields f = new RequestFields();
        f.model = "m";
        return f;
    }

    /** The fields the front door records for {@code body} (its byte ranges too: P/D splices its legs' bodies at them). */
    public static RequestFields parsed(String body) {
        RequestFields f = new RequestFields();
        io.kvgate.dataplane.request.RequestFieldExtractor x = new io.kvgate.dataplane.request.RequestFieldExtractor(f);
        x.feed(java.nio.ByteBuffer.wrap(body.getBytes(java.nio.charset.StandardCharsets.UTF_8)));
        if (x.finish() != io.kvgate.dataplane.request.RequestFieldExtractor.Result.OK) {
            throw new IllegalArgumentException("not a request body: " + body);
        }
        return f;
    }

    public PlainExchange plain(String requestBody, HttpRequest req) {
        return plain(requestBody, req, fields());
    }

    /** A plain exchange for a request whose fields (and answer rewrite) the test set. */
    public PlainExchange plain(String requestBody, HttpRequest req, RequestFields f) {
        return new PlainExchange(gw, capture.ctx, owner, req, EmbeddedEngines.bytes(requestBody), f, rule,
            io.kvgate.dataplane.request.RequestIds.keepOrGenerate(req.headers().get("x-request-id")), false, 0);
    }

    /** The routing stage decides {@code ep} for the oldest pending request; the decision runs on the loop. */
    public void decide(EndpointState ep) {
        ScriptedRouting.Pending r = routing.pending.remove(0);
        r.callback().onDecision(Decision.routed(ep, rule, "test"));
        client.runPendingTasks();
    }

    /** The routing stage decides the oldest pending pair request: {@code prefill} and {@code decode} together. */
    public void decidePair(EndpointState prefill, EndpointState decode) {
        ScriptedRouting.Pending r = routing.pending.remove(0);
        if (!r.pair()) {
            throw new AssertionError("the oldest pending request is not a pair request");
        }
        r.callback().onDecision(Decision.pair(prefill, decode, rule, "test"));
        client.runPendingTasks();
    }

    /** The routing stage refuses the oldest pending pair request: pool {@code unserved} has no endpoint. */
    public void refusePair(io.kvgate.dataplane.route.Role unserved) {
        ScriptedRouting.Pending r = routing.pending.remove(0);
        r.callback().onDecision(Decision.refusedPair(rule, unserved, null));
        client.runPendingTasks();
    }

    public EmbeddedChannel engine(int i) {
        return engines.opened.get(i);
    }

    /** The request the engine received on connection {@code i}, as text. */
    public String engineGot(int i) {
        return EmbeddedEngines.written(engine(i));
    }

    public void engineSends(int i, String s) {
        ByteBuf b = EmbeddedEngines.bytes(s);
        engineBytes.add(b);
        engine(i).writeInbound(b);
        client.runPendingTasks();
    }

    public void advance(long ms) {
        client.advanceTimeBy(ms, TimeUnit.MILLISECONDS);
        client.runScheduledPendingTasks();
        client.runPendingTasks();
    }

    /** Reads what reached the client's socket so far into {@link #head}/{@link #body}. */
    public ExchangeKit received() {
        Object o;
        while ((o = client.readOutbound()) != null) {
            reader.writeInbound(o);
        }
        while ((o = reader.readInbound()) != null) {
            if (o instanceof HttpResponse h) {
                head = h;
            }
            if (o instanceof HttpContent c) {
                body.append(c.content().toString(StandardCharsets.UTF_8));
                ended |= c instanceof LastHttpContent || o instanceof FullHttpResponse;
            }
            ReferenceCountUtil.release(o);
        }
        return this;
    }

    @Override
    public void close() {
        writes.drop();
        client.finishAndReleaseAll();
        reader.finishAndReleaseAll();
        for (EmbeddedChannel ch : engines.opened) {
            ch.finishAndReleaseAll();
        }
        for (ByteBuf b : engineBytes) {
            if (b.refCnt() != 0) {
                throw new AssertionError("an engine buffer was not released (refCnt " + b.refCnt() + ")");
            }
        }
    }
}
