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
import java.util.Arrays;
import java.util.Base64;
import java.util.function.Supplier;

/**
 * The admin API over HTTP (the control socket serves the same routes through this handler, without a token): requests
 * are small and rare, so they are aggregated and answered by {@link AdminApi}, off the data path. Token-checked when
 * an admin token is configured: {@code Authorization: Bearer TOKEN}, or HTTP Basic with the token as the password (any
 * user name), which is how a browser carries it to the status page ({@code GET /ui}, {@link StatusPage}) and to the
 * JSON routes the page polls; a 401 offers both schemes, so a browser asks for it.
 */
@ChannelHandler.Sharable
public final class AdminHandler extends SimpleChannelInboundHandler<FullHttpRequest> {
    /** The realm a browser shows when it asks for the admin token (user name ignored, the token is the password). */
    static final String REALM = "kvgate admin";
    private static final StatusPage PAGE = StatusPage.load();
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
            r.headers().add(HttpHeaderNames.WWW_AUTHENTICATE, "Bearer realm=\"" + REALM + "\"");
            r.headers().add(HttpHeaderNames.WWW_AUTHENTICATE, "Basic realm=\"" + REALM + "\", charset=\"UTF-8\"");
        } else if (isStatusPage(req.uri())) {
            r = statusPage(ctx, req);
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

    static boolean tokenOk(String token, String auth) {
        if (auth == null) {
            return false;
        }
        byte[] offered;
        if (auth.regionMatches(true, 0, "Bearer ", 0, 7)) {
            offered = auth.substring(7).trim().getBytes(StandardCharsets.UTF_8);
        } else if (auth.regionMatches(true, 0, "Basic ", 0, 6)) {
            byte[] userColonPassword;
            try {
                userColonPassword = Base64.getDecoder().decode(auth.substring(6).trim());
            } catch (IllegalArgumentException e) {
                return false;
            }
            int colon = indexOf(userColonPassword, (byte) ':');
            if (colon < 0) {
                return false;
            }
            offered = Arrays.copyOfRange(userColonPassword, colon + 1, userColonPassword.length);
        } else {
            return false;
        }
        return MessageDigest.isEqual(token.getBytes(StandardCharsets.UTF_8), offered);
    }

    private static int indexOf(byte[] b, byte v) {
        for (int i = 0; i < b.length; i++) {
            if (b[i] == v) {
                return i;
            }
        }
        return -1;
    }

    private static boolean isStatusPage(String uri) {
        int q = uri.indexOf('?');
        String path = q < 0 ? uri : uri.substring(0, q);
        return path.equals("/ui") || path.equals("/ui/");
    }

    private static FullHttpResponse statusPage(ChannelHandlerContext ctx, FullHttpRequest req) {
        if (req.method().equals(HttpMethod.GET) || req.method().equals(HttpMethod.HEAD)) {
            return PAGE.response(ctx.alloc(), req.protocolVersion(), req.method().equals(HttpMethod.HEAD),
                req.headers().get(HttpHeaderNames.IF_NONE_MATCH));
        }
        FullHttpResponse r = OpenAiErrors.response(ctx.alloc(), HttpResponseStatus.METHOD_NOT_ALLOWED,
            "the status page is read-only: GET /ui (or HEAD), not " + req.method(), null, null);
        r.headers().set(HttpHeaderNames.ALLOW, "GET, HEAD");
        return r;
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        Log.debug("admin: connection closed after " + cause);
        ctx.close();
    }
}
