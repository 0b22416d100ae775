package io.kvgate.tools.sim;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import io.kvgate.tools.sim.SimulatorConfig.ErrorShape;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;

/**
 * Writes the engine's answers in its dialect's shapes: OpenAI-style errors (vLLM {@code {"error":{...}}}, SGLang
 * and older vLLM flat {@code {"object":"error",...}}), FastAPI's own {@code {"detail": ...}} for routes and methods
 * the app does not mount, and the in-stream error frame each engine sends once the 200 is on the wire. Stateless
 * apart from the configuration.
 */
final class SimReplies {
    static final ObjectMapper MAPPER = new ObjectMapper();
    private static final JsonNodeFactory JSON = JsonNodeFactory.instance;

    private final SimulatorConfig config;

    SimReplies(SimulatorConfig config) {
        this.config = config;
    }

    /** The error body in the configured shape; {@code code} is the HTTP status as an integer, like both engines. */
    ObjectNode errorBody(SimError e) {
        if (config.dialect == Dialect.LLAMACPP) {
            return llamaError(e.status, e.getMessage());
        }
        ObjectNode inner = JSON.objectNode();
        ObjectNode body;
        if (config.effectiveErrorShape() == ErrorShape.FLAT) {
            body = inner;
            inner.put("object", "error");
        } else {
            body = JSON.objectNode();
            body.set("error", inner);
        }
        inner.put("message", e.getMessage());
        inner.put("type", e.type);
        if (e.param != null) {
            inner.put("param", e.param);
        } else {
            inner.putNull("param");
        }
        inner.put("code", e.status);
        return body;
    }

    /**
     * The {@code data:} payload an engine sends when generation fails after the stream started. vLLM:
     * {@code create_streaming_error_response} dumps its ErrorResponse, i.e. {@code {"error":{message,type,param,code}}}
     * (a GenerationError is typed InternalServerError, 500). SGLang: catches the ValueError, wraps its flat
     * ErrorResponse under "error": {@code {"error":{"object":"error",message,type:"BadRequestError",param,code:400}}}.
     * TensorRT-LLM: null — trtllm-serve's stream generators catch nothing, so the stream is cut without a frame and
     * without {@code [DONE]}.
     */
    ObjectNode streamErrorFrame(String message) {
        if (config.dialect == Dialect.TRTLLM) {
            return null; // no frame: the response is aborted (see Generation)
        }
        if (config.dialect == Dialect.LLAMACPP) {
            return llamaError(500, message);
        }
        ObjectNode frame = JSON.objectNode();
        ObjectNode e = frame.putObject("error");
        if (config.dialect == Dialect.SGLANG) {
            e.put("object", "error");
            e.put("message", message);
            e.put("type", "BadRequestError");
            e.putNull("param");
            e.put("code", 400);
        } else {
            e.put("message", message);
            e.put("type", "InternalServerError");
            e.putNull("param");
            e.put("code", 500);
        }
        return frame;
    }

    /**
     * llama-server's {@code format_error_response}: {@code {"error":{"code":N,"message":"...","type":"..."}}} with an
     * OpenAI-style type by status (no {@code param}).
     */
    static ObjectNode llamaError(int status, String message) {
        ObjectNode body = JSON.objectNode();
        ObjectNode e = body.putObject("error");
        e.put("code", status);
        e.put("message", message);
        e.put("type", switch (status) {
            case 401 -> "authentication_error";
            case 403 -> "permission_error";
            case 404 -> "not_found_error";
            case 501 -> "not_supported_error";
            case 503 -> "unavailable_error";
            default -> status >= 500 ? "server_error" : "invalid_request_error";
        });
        return body;
    }

    void error(ChannelHandlerContext ctx, SimError e, String requestId, boolean keepAlive) {
        json(ctx, HttpResponseStatus.valueOf(e.status), e.body != null ? e.body : errorBody(e), requestId, keepAlive);
    }

    /** FastAPI's default answer for an unmounted route (404) or method (405): {@code {"detail":"Not Found"}}. */
    void detail(ChannelHandlerContext ctx, HttpResponseStatus status, String detail, String requestId,
                boolean keepAlive) {
        json(ctx, status, JSON.objectNode().put("detail", detail), requestId, keepAlive);
    }

    void json(ChannelHandlerContext ctx, HttpResponseStatus status, JsonNode body, String requestId, boolean keepAlive) {
        bytes(ctx, status, bytes(body), "application/json", requestId, keepAlive);
    }

    void bytes(ChannelHandlerContext ctx, HttpResponseStatus status, byte[] body, String contentType,
               String requestId, boolean keepAlive) {
        FullHttpResponse resp = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, status, Unpooled.wrappedBuffer(body));
        resp.headers().set(HttpHeaderNames.CONTENT_TYPE, contentType);
        resp.headers().setInt(HttpHeaderNames.CONTENT_LENGTH, body.length);
        resp.headers().set("x-request-id", requestId);
        HttpUtil.setKeepAlive(resp, keepAlive);
        var f = ctx.writeAndFlush(resp);
        if (!keepAlive) {
            f.addListener(ChannelFutureListener.CLOSE);
        }
    }

    static byte[] bytes(JsonNode node) {
        try {
            return MAPPER.writeValueAsBytes(node);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }
}
