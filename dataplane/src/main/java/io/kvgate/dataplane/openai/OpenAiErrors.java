package io.kvgate.dataplane.openai;

import io.kvgate.dataplane.wire.JsonText;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpVersion;
import java.nio.charset.StandardCharsets;

/**
 * Every error the gateway answers is an OpenAI error object {@code {"error":{"message","type","param","code"}}}:
 * the official SDKs surface exactly these fields, and report only "status code (no body)" for anything else.
 *
 * <p><b>One vocabulary</b> (issue #13 item 3): {@code type} follows the status ({@link #typeFor}), whoever made the
 * error (the gateway, vLLM or SGLang, as JSON or in a stream), and {@code code} is a string OpenAI-style code
 * ({@code model_not_found}, {@code context_length_exceeded}, {@code invalid_value}, the gateway's own
 * {@code upstream_*}...) or null: never the HTTP status number some engines put there.
 */
public final class OpenAiErrors {
    private OpenAiErrors() {}

    /** @param code a string code, or null; a number (an engine's copy of the HTTP status) is written as null */
    public static String json(String message, String type, String param, Object code) {
        StringBuilder sb = new StringBuilder(96 + message.length());
        sb.append("{\"error\":{\"message\":");
        quote(sb, message);
        sb.append(",\"type\":");
        quote(sb, type);
        sb.append(",\"param\":");
        if (param == null) {
            sb.append("null");
        } else {
            quote(sb, param);
        }
        sb.append(",\"code\":");
        if (code == null || code instanceof Number) {
            sb.append("null");
        } else {
            quote(sb, code.toString());
        }
        return sb.append("}}").toString();
    }

    /**
     * OpenAI's error {@code type} for a status: {@code invalid_request_error} for client errors (400, 404, 405, 413,
     * 415, 422...), {@code authentication_error} 401, {@code permission_error} 403, {@code rate_limit_error} 429,
     * {@code timeout} 504, {@code server_error} for every other 5xx. Engine-specific names ({@code BadRequestError},
     * {@code NotFoundError}, {@code Bad Request}) never reach a client.
     */
    public static String typeFor(int status) {
        return switch (status) {
            case 401 -> "authentication_error";
            case 403 -> "permission_error";
            case 429 -> "rate_limit_error";
            case 504 -> "timeout";
            default -> status >= 500 ? "server_error" : "invalid_request_error";
        };
    }

    /** An error event on an SSE stream whose 200 is already on the wire: {@code type} as a 502 would have it. */
    public static final String STREAM_ERROR_TYPE = "server_error";

    public static FullHttpResponse response(ByteBufAllocator alloc, HttpResponseStatus status, String message, String param,
                                            Object code) {
        String body = json(message, typeFor(status.code()), param, code);
        return jsonResponse(alloc, status, body);
    }

    public static FullHttpResponse jsonResponse(ByteBufAllocator alloc, HttpResponseStatus status, String body) {
        ByteBuf buf = alloc.buffer(body.length() + 16);
        buf.writeCharSequence(body, StandardCharsets.UTF_8);
        FullHttpResponse r = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, status, buf);
        r.headers().set(HttpHeaderNames.CONTENT_TYPE, HttpHeaderValues.APPLICATION_JSON);
        r.headers().setInt(HttpHeaderNames.CONTENT_LENGTH, buf.readableBytes());
        return r;
    }

    /** The SSE frame sent when a stream cannot finish: clients see an error, not a silently truncated answer. */
    public static String sseErrorFrames(String message, String type, Object code) {
        return "data: " + json(message, type, null, code) + "\n\ndata: [DONE]\n\n";
    }

    /** The 404 for a model no rule serves (chat, completions, render, {@code GET /v1/models/{id}}): OpenAI's answer. */
    public static String modelNotFoundJson(String model) {
        return json("The model `" + model + "` does not exist.", "invalid_request_error", "model", "model_not_found");
    }

    public static void quote(StringBuilder sb, String s) {
        JsonText.appendQuoted(sb, s);
    }
}
