package io.kvgate.dataplane.admin;

import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.kvgate.control.log.Log;
import io.kvgate.dataplane.metrics.MetricsExposition;
import io.kvgate.dataplane.openai.OpenAiErrors;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.function.Supplier;

/**
 * The admin API over HTTP (the control socket serves the same routes through this handler, without a token): requests
 * are small and rare, so they are aggregated and answered by {@link AdminApi}, off the data path. Token-checked when
 * an admin token is configured.
 */
@ChannelHandler.Sharable
public final class AdminHandler extends SimpleChannelInboundHandler<FullHttpRequest> {
    private final AdminApi api;
    private final Supplier<String> token;

    public AdminHandler(AdminApi api, String token) {
        this(api, () -> token);
    }

    /** @param token the admin token in effect now (read per request: a reload that changes it applies at once), or null */
    public AdminHandler(AdminApi api, Supplier<String> token) {
        this.api = api;
        this.token = token;
    }

    @Override
    protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest req) {
        FullHttpResponse r;
        String token = this.token.get();
        if (token != null && !tokenOk(token, req.headers().get(HttpHeaderNames.AUTHORIZATION))) {
            r = OpenAiErrors.response(ctx.alloc(), HttpResponseStatus.UNAUTHORIZED, "admin token required", null, null);
        } else {
            int status;
            byte[] bytes;
            String contentType;
            try {
                // The metrics page is binary when the scraper asks for protobuf: answered apart from the JSON routes.
                MetricsExposition.Page page = req.method() == HttpMethod.GET
                    ? api.metricsPage(req.uri(), req.headers().get(HttpHeaderNames.ACCEPT)) : null;
                if (page != null) {
                    status = 200;
                    bytes = page.body();
                    contentType = page.contentType();
                } else {
                    AdminApi.Reply reply = api.handle(req.method().name(), req.uri(), req.content().toString(StandardCharsets.UTF_8));
                    status = reply.status();
                    bytes = reply.body().getBytes(StandardCharsets.UTF_8);
                    contentType = reply.contentType();
                }
            } catch (RuntimeException e) {
                Log.error("admin: " + req.method() + " " + req.uri() + " failed: " + e);
                status = 500;
                bytes = OpenAiErrors.json("admin error: " + e, "server_error", null, null).getBytes(StandardCharsets.UTF_8);
                contentType = "application/json";
            }
            if (Log.enabled(Log.Level.DEBUG)) {
                Log.debug("admin: " + req.method() + " " + req.uri() + " -> " + status + " (" + ctx.channel().remoteAddress() + ")");
            }
            r = new io.netty.handler.codec.http.DefaultFullHttpResponse(req.protocolVersion(), HttpResponseStatus.valueOf(status),
                ctx.alloc().buffer(bytes.length).writeBytes(bytes));
            r.headers().set(HttpHeaderNames.CONTENT_TYPE, contentType);
            r.headers().setInt(HttpHeaderNames.CONTENT_LENGTH, bytes.length);
        }
        boolean keepAlive = HttpUtil.isKeepAlive(req);
        if (!keepAlive) {
            r.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
            ctx.writeAndFlush(r).addListener(io.netty.channel.ChannelFutureListener.CLOSE);
        } else {
            ctx.writeAndFlush(r);
        }
    }

    private static boolean tokenOk(String token, String auth) {
        if (auth == null || !auth.startsWith("Bearer ")) {
            return false;
        }
        return MessageDigest.isEqual(token.getBytes(StandardCharsets.UTF_8), auth.substring(7).trim().getBytes(StandardCharsets.UTF_8));
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        Log.debug("admin: connection closed after " + cause);
        ctx.close();
    }
}
