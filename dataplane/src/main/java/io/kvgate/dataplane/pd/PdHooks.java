package io.kvgate.dataplane.pd;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.dataplane.http.OpenAiErrors;
import io.kvgate.dataplane.http.RequestFields;
import io.kvgate.dataplane.proxy.ActiveExchange;
import io.kvgate.dataplane.proxy.ExchangeOwner;
import io.kvgate.dataplane.proxy.GatewayContext;
import io.kvgate.dataplane.route.Rule;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufInputStream;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import java.util.function.Supplier;

/** Sends the requests of {@code policy: pd} rules through {@link PdExchange}. Stateless; event-loop calls only. */
public final class PdHooks {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final Supplier<GatewayContext> gw;
    private final PdMetrics metrics;

    public PdHooks(Supplier<GatewayContext> gw, PdMetrics metrics) {
        this.gw = gw;
        this.metrics = metrics;
    }

    public ActiveExchange start(ChannelHandlerContext ctx, HttpRequest head, ByteBuf body, RequestFields fields, Rule rule,
                                String requestId, boolean explain, long startNs, ExchangeOwner owner) {
        if (!rule.isPd()) {
            return null;
        }
        GatewayContext g = gw.get();
        ObjectNode tree;
        try (ByteBufInputStream in = new ByteBufInputStream(body, true)) {
            JsonNode n = JSON.readTree((java.io.InputStream) in);
            tree = (ObjectNode) n; // the front door already checked it is one well-formed JSON object
        } catch (Exception e) {
            FullHttpResponse r = OpenAiErrors.response(ctx.alloc(), HttpResponseStatus.BAD_REQUEST,
                "We could not parse the JSON body of your request: " + e.getMessage(), null, null);
            r.headers().set("x-request-id", requestId);
            boolean keepAlive = HttpUtil.isKeepAlive(head);
            if (!keepAlive) {
                r.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
            }
            ctx.writeAndFlush(r);
            owner.onExchangeDone(keepAlive);
            return () -> { }; // answered already
        }
        io.kvgate.dataplane.proxy.RoutingInputs inputs = io.kvgate.dataplane.kv.RoutingInputsBuilder.build(rule, head.headers(),
            tree, fields, head.uri().startsWith("/v1/chat/completions"), g.metrics(), g.clock());
        PdExchange ex = new PdExchange(g, metrics, ctx, owner, head, tree, fields, rule, requestId, explain, startNs, inputs);
        ex.start();
        return ex;
    }

    public PdMetrics metrics() {
        return metrics;
    }
}
