package io.kvgate.dataplane.http;

import io.kvgate.dataplane.metrics.MetricsExposition;
import io.kvgate.dataplane.openai.OpenAiErrors;
import io.kvgate.dataplane.exchange.GatewayContext;
import io.kvgate.dataplane.request.FrontRoute;
import io.kvgate.dataplane.prompt.RenderRoutes;
import io.kvgate.dataplane.route.Rule;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpVersion;
import java.nio.charset.StandardCharsets;
import io.kvgate.dataplane.ready.Readiness;
import io.kvgate.control.config.ModelEntry;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.route.AdapterDirectory;
import io.kvgate.dataplane.tenant.Tenant;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Supplier;

/**
 * Routes the gateway answers itself: {@code /health} (liveness), {@code /ready} (the gateway's readiness),
 * {@code /ready/engines} (the fleet's), {@code /metrics}, {@code /v1/models} and the render routes
 * ({@link RenderRoutes}). Method, API key and Content-Type were already checked on the head by the front
 * door. Event-loop only; stateless.
 */
public final class LocalRoutes {
    private final GatewayContext gw;
    private final DrainState drain;
    private final long createdEpochSeconds = System.currentTimeMillis() / 1000;

    private final Supplier<Readiness.Report> readiness;
    private final Supplier<Readiness.Report> engineReadiness;

    public LocalRoutes(GatewayContext gw, DrainState drain) {
        this(gw, drain, () -> new Readiness.Report(!drain.closesConnections(), List.of()),
            () -> new Readiness.Report(true, List.of()));
    }

    /**
     * @param readiness       what {@code GET /ready} reports (see {@link Readiness#evaluate})
     * @param engineReadiness what {@code GET /ready/engines} reports (see {@link Readiness#evaluateEngines})
     */
    public LocalRoutes(GatewayContext gw, DrainState drain, Supplier<Readiness.Report> readiness,
                       Supplier<Readiness.Report> engineReadiness) {
        this.gw = gw;
        this.drain = drain;
        this.readiness = readiness;
        this.engineReadiness = engineReadiness;
    }

    /**
     * Answers a local route for a caller of {@code tenant} (null: a route without a key check): {@code /v1/models} and
     * {@code /v1/models/{id}} show only the models the tenant may use ({@link Tenant#allows}), so a tenant's listing
     * names exactly what it can call, and a model outside its allow-list is the same 404 as one that does not exist.
     */
    FullHttpResponse handle(ChannelHandlerContext ctx, HttpRequest req, FrontRoute route, Tenant tenant) {
        return switch (route) {
            case HEALTH -> {
                // A balancer that checks /health (as this route advised before /ready existed) also moves away during
                // the shutdown's drain delay.
                boolean leaving = drain.closesConnections();
                yield OpenAiErrors.jsonResponse(ctx.alloc(), leaving ? HttpResponseStatus.SERVICE_UNAVAILABLE : HttpResponseStatus.OK,
                    leaving ? "{\"status\":\"draining\"}" : "{\"status\":\"ok\"}");
            }
            case READY, READY_ENGINES -> {
                Readiness.Report rep = (route == FrontRoute.READY ? readiness : engineReadiness).get();
                StringBuilder sb = new StringBuilder("{\"ready\":").append(rep.ready()).append(",\"waiting_for\":[");
                for (int i = 0; i < rep.waitingFor().size(); i++) {
                    if (i > 0) {
                        sb.append(',');
                    }
                    OpenAiErrors.quote(sb, rep.waitingFor().get(i));
                }
                yield OpenAiErrors.jsonResponse(ctx.alloc(), rep.ready() ? HttpResponseStatus.OK : HttpResponseStatus.SERVICE_UNAVAILABLE,
                    sb.append("]}").toString());
            }
            case METRICS -> {
                MetricsExposition.Page page = MetricsExposition.scrape(gw.metrics().registry(), req.headers().get(HttpHeaderNames.ACCEPT));
                FullHttpResponse r = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK,
                    ctx.alloc().buffer(page.body().length).writeBytes(page.body()));
                r.headers().set(HttpHeaderNames.CONTENT_TYPE, page.contentType());
                r.headers().setInt(HttpHeaderNames.CONTENT_LENGTH, page.body().length);
                yield r;
            }
            case MODELS -> OpenAiErrors.jsonResponse(ctx.alloc(), HttpResponseStatus.OK, modelsJson(tenant));
            case MODEL -> retrieveModel(ctx, req, tenant);
            default -> throw new IllegalArgumentException("not a local route: " + route);
        };
    }

    /**
     * A render route ({@code chat}: a chat body) for a validated body whose model resolved to {@code rule}, answered
     * by the prompt stage's own {@link RenderRoutes}; {@code body} is borrowed.
     */
    FullHttpResponse render(ChannelHandlerContext ctx, boolean chat, ByteBuf body, Rule rule) {
        return RenderRoutes.answer(ctx.alloc(), chat, body, rule);
    }

    /**
     * {@code GET /v1/models/{id}}: the model object when a rule serves {@code id} (percent-decoded, so the SDKs'
     * encoded {@code org%2Fname} and a raw {@code org/name} both work) and {@code tenant} may use it, else OpenAI's 404
     * {@code model_not_found} (a model outside the allow-list is not told apart from one that does not exist).
     */
    private FullHttpResponse retrieveModel(ChannelHandlerContext ctx, HttpRequest req, Tenant tenant) {
        String uri = req.uri();
        int q = uri.indexOf('?');
        String raw = (q < 0 ? uri : uri.substring(0, q)).substring(FrontRoute.MODEL_PREFIX.length());
        String id = percentDecoded(raw);
        if (id == null) {
            gw.metrics().badRequest("invalid_model_id");
            return OpenAiErrors.response(ctx.alloc(), HttpResponseStatus.BAD_REQUEST, "The model id in the path is not "
                + "valid percent-encoded UTF-8: " + raw, "model", "invalid_value");
        }
        if (tenant != null && !tenant.allows(id)) {
            gw.metrics().badRequest("model_not_found");
            return modelNotFound(ctx, id);
        }
        Rule rule = gw.router().table().ruleForModel(id);
        String parent = null;
        if (rule != null) {
            parent = baseOf(rule.config(), id);
        } else {
            AdapterDirectory.Served discovered = gw.router().discoveredAdapter(id);
            if (discovered == null) {
                gw.metrics().badRequest("model_not_found");
                return modelNotFound(ctx, id);
            }
            parent = clientBase(discovered);
        }
        StringBuilder sb = new StringBuilder(96 + id.length());
        appendModel(sb, id, parent);
        return OpenAiErrors.jsonResponse(ctx.alloc(), HttpResponseStatus.OK, sb.toString());
    }

    /** The client name of the model a configured adapter {@code name} is listed under, or null (a base model name). */
    private static String baseOf(RuleConfig rc, String name) {
        for (ModelEntry e : rc.modelEntries()) {
            if (e.adapters().contains(name)) {
                return e.name();
            }
        }
        return null;
    }

    /**
     * A discovered adapter's base model as clients name it: the rule's entry the engines serve as the cards'
     * {@code parent} (an alias shows its client name, as every other answer does).
     */
    private static String clientBase(AdapterDirectory.Served s) {
        for (ModelEntry e : s.rule().config().modelEntries()) {
            if (e.engineName().equals(s.parent())) {
                return e.name();
            }
        }
        return s.parent();
    }

    /** {@code s} with its {@code %XX} escapes decoded as UTF-8 ({@code +} stays a plus: this is a path), or null. */
    static String percentDecoded(String s) {
        if (s.indexOf('%') < 0) {
            return s;
        }
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream(s.length());
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '%') {
                if (i + 2 >= s.length()) {
                    return null;
                }
                int hi = Character.digit(s.charAt(i + 1), 16);
                int lo = Character.digit(s.charAt(i + 2), 16);
                if (hi < 0 || lo < 0) {
                    return null;
                }
                out.write(hi * 16 + lo);
                i += 2;
            } else {
                byte[] b = String.valueOf(c).getBytes(StandardCharsets.UTF_8);
                out.write(b, 0, b.length);
            }
        }
        var decoder = StandardCharsets.UTF_8.newDecoder();
        try {
            return decoder.decode(java.nio.ByteBuffer.wrap(out.toByteArray())).toString();
        } catch (java.nio.charset.CharacterCodingException e) {
            return null;
        }
    }

    /**
     * One model object: OpenAI's {@code id, object, created, owned_by}, plus {@code parent} (the base model's client
     * name) for a LoRA adapter, as vLLM lists its adapters.
     */
    private void appendModel(StringBuilder sb, String id, String parent) {
        sb.append("{\"id\":");
        OpenAiErrors.quote(sb, id);
        sb.append(",\"object\":\"model\",\"created\":").append(createdEpochSeconds).append(",\"owned_by\":\"kvgate\"");
        if (parent != null) {
            sb.append(",\"parent\":");
            OpenAiErrors.quote(sb, parent);
        }
        sb.append('}');
    }

    /**
     * {@code GET /v1/models}: every client name of every rule in configuration order — the rule's models, then its
     * configured adapters (with {@code parent}) — then the adapters discovered on the endpoints (sorted), so the
     * list names everything {@code GET /v1/models/{id}} answers. A name given out twice is listed once. For a tenant
     * with a {@code models} allow-list, only the names it may use (the same test the generation routes apply).
     */
    String modelsJson(Tenant tenant) {
        Map<String, String> models = new LinkedHashMap<>(); // name -> parent (null: a base model)
        for (Rule r : gw.router().table().rules()) {
            for (ModelEntry e : r.config().modelEntries()) {
                models.putIfAbsent(e.name(), null);
            }
            for (ModelEntry e : r.config().modelEntries()) {
                for (String a : e.adapters()) {
                    models.putIfAbsent(a, e.name());
                }
            }
        }
        for (AdapterDirectory.Served s : new TreeMap<>(gw.router().adapters().snapshot()).values()) {
            if (gw.router().discoveredAdapter(s.adapter()) != null) { // its rule is the current table's
                models.putIfAbsent(s.adapter(), clientBase(s));
            }
        }
        StringBuilder sb = new StringBuilder("{\"object\":\"list\",\"data\":[");
        boolean first = true;
        for (Map.Entry<String, String> m : models.entrySet()) {
            if (tenant != null && !tenant.allows(m.getKey())) {
                continue;
            }
            if (!first) {
                sb.append(',');
            }
            first = false;
            appendModel(sb, m.getKey(), m.getValue());
        }
        return sb.append("]}").toString();
    }

    static FullHttpResponse modelNotFound(ChannelHandlerContext ctx, String model) {
        return OpenAiErrors.jsonResponse(ctx.alloc(), HttpResponseStatus.NOT_FOUND, OpenAiErrors.modelNotFoundJson(model));
    }
}
