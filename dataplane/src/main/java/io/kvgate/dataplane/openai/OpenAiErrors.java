package io.kvgate.dataplane.openai;

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
 */
public final class OpenAiErrors {
    private OpenAiErrors() {}

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
        if (code == null) {
            sb.append("null");
        } else if (code instanceof Number) {
            sb.append(code);
        } else {
            quote(sb, code.toString());
        }
        return sb.append("}}").toString();
    }

    /** The OpenAI type name the SDKs map for a status. */
    public static String typeFor(int status) {
        return switch (status) {
            case 400, 413, 414, 415, 422, 431 -> "invalid_request_error";
            case 401 -> "authentication_error";
            case 403 -> "permission_error";
            case 404 -> "NotFoundError";
            case 408 -> "timeout_error";
            case 429 -> "rate_limit_error";
            case 502 -> "upstream_error";
            case 503 -> "service_unavailable";
            case 504 -> "timeout_error";
            default -> status >= 500 ? "server_error" : "invalid_request_error";
        };
    }

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

    public static void quote(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                case '\n' -> sb.append("\\n");
                case '\r' -> sb.append("\\r");
                case '\t' -> sb.append("\\t");
                default -> {
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
                }
            }
        }
        sb.append('"');
    }
}
