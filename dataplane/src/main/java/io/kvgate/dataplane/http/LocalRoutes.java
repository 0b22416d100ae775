package io.kvgate.dataplane.http;

import io.kvgate.dataplane.proxy.GatewayContext;
import io.kvgate.dataplane.route.Rule;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpVersion;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.function.BooleanSupplier;

/**
 * Routes the gateway answers itself: {@code /health}, {@code /metrics}, {@code /v1/models}, and whatever the
 * request hooks add (render routes). Event-loop only; stateless.
 */
public final class LocalRoutes {
    private final GatewayContext gw;
    private final BooleanSupplier draining;
    private final long createdEpochSeconds = System.currentTimeMillis() / 1000;

    public LocalRoutes(GatewayContext gw, BooleanSupplier draining) {
        this.gw = gw;
        this.draining = draining;
    }

    FullHttpResponse handle(ChannelHandlerContext ctx, HttpRequest req, String path, ByteBuf body, RequestFields fields,
                            RequestFieldExtractor extractor) {
        HttpMethod m = req.method();
        switch (path) {
            case "/health" -> {
                if (!m.equals(HttpMethod.GET) && !m.equals(HttpMethod.HEAD)) {
                    return methodNotAllowed(ctx, path, "GET");
                }
                boolean drain = draining.getAsBoolean();
                return OpenAiErrors.jsonResponse(ctx.alloc(), drain ? HttpResponseStatus.SERVICE_UNAVAILABLE : HttpResponseStatus.OK,
                    drain ? "{\"status\":\"draining\"}" : "{\"status\":\"ok\"}");
            }
            case "/metrics" -> {
                if (!m.equals(HttpMethod.GET)) {
                    return methodNotAllowed(ctx, path, "GET");
                }
                byte[] text = gw.metrics().render().getBytes(StandardCharsets.UTF_8);
                FullHttpResponse r = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK,
                    ctx.alloc().buffer(text.length).writeBytes(text));
                r.headers().set(HttpHeaderNames.CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
                r.headers().setInt(HttpHeaderNames.CONTENT_LENGTH, text.length);
                return r;
            }
            case "/v1/models" -> {
                if (!m.equals(HttpMethod.GET)) {
                    return methodNotAllowed(ctx, path, "GET");
                }
                if (!authorized(req)) {
                    return OpenAiErrors.response(ctx.alloc(), HttpResponseStatus.UNAUTHORIZED,
                        "Missing or invalid API key (Authorization: Bearer ...).", null, null);
                }
                return OpenAiErrors.jsonResponse(ctx.alloc(), HttpResponseStatus.OK, modelsJson());
            }
            default -> { }
        }
        if (path.equals("/v1/chat/completions") || path.equals("/v1/completions")) {
            return methodNotAllowed(ctx, path, "POST");
        }
        if (path.startsWith("/v1/") && m.equals(HttpMethod.POST)) {
            boolean chat = path.equals("/v1/chat/completions/render");
            if (chat || path.equals("/v1/completions/render")) {
                String ct = req.headers().get(HttpHeaderNames.CONTENT_TYPE);
                if (ct != null && !ct.regionMatches(true, 0, "application/json", 0, 16)) {
                    return OpenAiErrors.response(ctx.alloc(), HttpResponseStatus.UNSUPPORTED_MEDIA_TYPE,
                        "Content-Type must be application/json (got '" + ct + "').", null, null);
                }
                String problem = validateBody(extractor, fields, chat);
                if (problem != null) {
                    gw.metrics().badRequest("invalid_body");
                    return OpenAiErrors.response(ctx.alloc(), HttpResponseStatus.BAD_REQUEST, problem, lastParam(fields, problem), null);
                }
                Rule rule = gw.router().table().ruleForModel(fields.model);
                if (rule == null) {
                    return modelNotFound(ctx, fields.model);
                }
                FullHttpResponse r = gw.hooks().handleLocal(ctx, req, body, fields, rule);
                if (r != null) {
                    return r;
                }
            }
        }
        gw.metrics().badRequest("unknown_route");
        return OpenAiErrors.response(ctx.alloc(), HttpResponseStatus.NOT_FOUND, "Unknown route: " + m + " " + path, null, null);
    }

    private FullHttpResponse methodNotAllowed(ChannelHandlerContext ctx, String path, String allowed) {
        gw.metrics().badRequest("method_not_allowed");
        FullHttpResponse r = OpenAiErrors.response(ctx.alloc(), HttpResponseStatus.METHOD_NOT_ALLOWED,
            "Method not allowed on " + path + " (use " + allowed + ").", null, null);
        r.headers().set(HttpHeaderNames.ALLOW, allowed);
        return r;
    }

    String modelsJson() {
        Set<String> models = new LinkedHashSet<>();
        for (Rule r : gw.router().table().rules()) {
            models.addAll(r.config().models());
        }
        StringBuilder sb = new StringBuilder("{\"object\":\"list\",\"data\":[");
        boolean first = true;
        for (String m : models) {
            if (!first) {
                sb.append(',');
            }
            first = false;
            sb.append("{\"id\":");
            OpenAiErrors.quote(sb, m);
            sb.append(",\"object\":\"model\",\"created\":").append(createdEpochSeconds).append(",\"owned_by\":\"kvgate\"}");
        }
        return sb.append("]}").toString();
    }

    boolean authorized(HttpRequest req) {
        List<String> keys = gw.config().apiKeys();
        if (keys.isEmpty()) {
            return true;
        }
        String auth = req.headers().get(HttpHeaderNames.AUTHORIZATION);
        if (auth == null || !auth.regionMatches(true, 0, "Bearer ", 0, 7)) {
            return false;
        }
        String key = auth.substring(7).trim();
        boolean ok = false;
        for (String k : keys) {
            ok |= java.security.MessageDigest.isEqual(k.getBytes(StandardCharsets.UTF_8), key.getBytes(StandardCharsets.UTF_8));
        }
        return ok;
    }

    /** Checks the body's shape for an OpenAI route; returns the client-facing problem, or null when it is fine. */
    static String validateBody(RequestFieldExtractor extractor, RequestFields f, boolean chat) {
        switch (extractor.finish()) {
            case EMPTY -> {
                return "The request body is empty: send a JSON object.";
            }
            case NOT_OBJECT -> {
                return "The request body must be a JSON object.";
            }
            case MALFORMED -> {
                return "We could not parse the JSON body of your request: " + extractor.error();
            }
            default -> { }
        }
        if (f.modelNotString) {
            return "'model' must be a string.";
        }
        if (f.model == null) {
            return "You must provide a model parameter.";
        }
        if (chat && !f.hasMessages) {
            return "'messages' is a required property.";
        }
        if (chat && f.messagesNotArray) {
            return "'messages' must be an array of message objects.";
        }
        if (!chat && !f.hasPrompt) {
            return "'prompt' is a required property.";
        }
        if (f.n < 1) {
            return "'n' must be at least 1.";
        }
        return null;
    }

    static String lastParam(RequestFields f, String problem) {
        if (problem.startsWith("'model'") || problem.startsWith("You must provide a model")) {
            return "model";
        }
        if (problem.startsWith("'messages'")) {
            return "messages";
        }
        if (problem.startsWith("'prompt'")) {
            return "prompt";
        }
        if (problem.startsWith("'n'")) {
            return "n";
        }
        return null;
    }

    static FullHttpResponse modelNotFound(ChannelHandlerContext ctx, String model) {
        return OpenAiErrors.response(ctx.alloc(), HttpResponseStatus.NOT_FOUND, "The model `" + model + "` does not exist.", "model", 404);
    }
}
