package io.kvgate.dataplane.http;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.exchange.RequestContext;
import io.kvgate.dataplane.metrics.GatewayMetrics;
import io.kvgate.dataplane.exchange.GatewayContext;
import io.kvgate.dataplane.request.Refusal;
import io.kvgate.dataplane.route.EndpointRegistry;
import io.kvgate.dataplane.route.RouteTable;
import io.kvgate.dataplane.route.RoutingStage;
import io.kvgate.dataplane.route.RulePolicies;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.handler.codec.http.DefaultHttpRequest;
import io.netty.handler.codec.http.DefaultLastHttpContent;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpVersion;
import java.nio.charset.StandardCharsets;

/**
 * The request stages without a channel, as a second front door would run them: a real configuration, route table
 * and routing stage (for discovered adapters), a {@link RequestContext} begun from a request line and headers, and
 * the body handed in as bytes. Time is a {@link ManualClock}.
 */
final class StageFixture implements AutoCloseable {
    static final String YAML = """
        listen: 127.0.0.1:0
        admin_listen: 127.0.0.1:0
        admin_token: admin-token-0123456789
        api_keys: [k1]
        limits:
          max_body_bytes: 4096
        rules:
          - name: chat
            models: [m]
            max_n: 2
            endpoints:
              - url: http://127.0.0.1:1
          - name: sticky
            models: [s]
            policy: session
            session: {mode: table, ttl_ms: 60000}
            endpoints:
              - url: http://127.0.0.1:2
          - name: text
            models: [t]
            engine: llamacpp
            policy: chwbl
            chwbl: {prefix_chars: 16}
            endpoints:
              - url: http://127.0.0.1:3
          - name: sg
            models: [sg]
            engine: sglang
            endpoints:
              - url: http://127.0.0.1:4
        """;

    final GatewayConfig config;
    final RouteTable table;
    final ManualClock clock = new ManualClock();
    final GatewayMetrics metrics = new GatewayMetrics();
    final RoutingStage router;
    final GatewayContext gw;
    final DrainState drain = new DrainState();
    final RequestPipeline pipeline;
    final ByteBufAllocator alloc = UnpooledByteBufAllocator.DEFAULT;

    StageFixture() throws Exception {
        config = GatewayConfig.parse(YAML);
        table = RouteTable.build(config, new EndpointRegistry(), c -> RulePolicies.create(c, null, clock));
        router = new RoutingStage(config.router(), table, clock);
        gw = new GatewayContext(config, router, null, metrics, clock);
        java.util.Set<String> models = new java.util.HashSet<>();
        config.rules().forEach(r -> models.addAll(r.models()));
        metrics.modelLabels(models);
        pipeline = new RequestPipeline(gw, drain);
    }

    /** A head: {@code headers} as "Name: value" lines. */
    static HttpRequest head(String method, String uri, String... headers) {
        HttpRequest req = new DefaultHttpRequest(HttpVersion.HTTP_1_1, HttpMethod.valueOf(method), uri);
        for (String h : headers) {
            int colon = h.indexOf(':');
            req.headers().add(h.substring(0, colon).trim(), h.substring(colon + 1).trim());
        }
        return req;
    }

    /** A context begun with {@code head} under this fixture's configuration. */
    RequestContext begin(HttpRequest head) {
        RequestContext rc = new RequestContext();
        rc.begin(head, config, table, clock.nanoTime(), null);
        return rc;
    }

    /** A chat POST with the API key and a JSON body of {@code body}'s length. */
    static HttpRequest chatHead(String body, String... extra) {
        String[] headers = new String[extra.length + 3];
        headers[0] = "Authorization: Bearer k1";
        headers[1] = "Content-Type: application/json";
        headers[2] = "Content-Length: " + body.getBytes(StandardCharsets.UTF_8).length;
        System.arraycopy(extra, 0, headers, 3, extra.length);
        return head("POST", "/v1/chat/completions", headers);
    }

    /**
     * Runs head → body (in one piece) → validate → prompt → forward body → the tenant's reservation over {@code body}:
     * the refusal, or null with the context holding the routing inputs and the body as the engine gets it. Without a
     * shared store the reservation is decided at once, so the loop it is answered on runs tasks in place.
     */
    Refusal routable(RequestContext rc, String body) {
        Refusal r = pipeline.head(rc);
        if (r != null) {
            return r;
        }
        DefaultLastHttpContent piece = new DefaultLastHttpContent(Unpooled.copiedBuffer(body, StandardCharsets.UTF_8));
        try {
            r = pipeline.body(rc, piece, alloc);
        } finally {
            piece.release();
        }
        if (r != null || (r = pipeline.beforeLimits(rc, alloc)) != null) {
            return r;
        }
        Refusal[] decided = new Refusal[1];
        boolean[] answered = new boolean[1];
        pipeline.reserve(rc, IN_PLACE, res -> {
            decided[0] = RequestPipeline.reserved(rc, res);
            answered[0] = true;
        });
        if (!answered[0]) {
            throw new AssertionError("the reservation was not decided at once (the fixture has no shared store)");
        }
        return decided[0];
    }

    /** A loop that runs its tasks in place and has no timers (nothing here waits for a store). */
    private static final io.kvgate.dataplane.tenant.Loop IN_PLACE = new io.kvgate.dataplane.tenant.Loop() {
        @Override
        public void execute(Runnable task) {
            task.run();
        }

        @Override
        public Runnable schedule(Runnable task, long delayNs) {
            throw new UnsupportedOperationException("no timers: the fixture has no shared store to wait for");
        }
    };

    /** The context's body as text. */
    static String body(RequestContext rc) {
        return rc.body().toString(StandardCharsets.UTF_8);
    }

    @Override
    public void close() {
        router.close();
    }
}
