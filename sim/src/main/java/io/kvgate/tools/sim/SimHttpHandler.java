package io.kvgate.tools.sim;

import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.util.ReferenceCountUtil;
import java.util.ArrayDeque;

/**
 * Per-connection HTTP/1.1 handler: answers requests strictly in order (pipelined requests wait in a small
 * bounded queue; overflow closes the connection, counted) and ends the running generation when the client goes
 * away. Event-loop confined.
 */
final class SimHttpHandler extends ChannelInboundHandlerAdapter {
    static final int MAX_PIPELINED = 16;

    private final EngineSimulator engine;
    private final ArrayDeque<FullHttpRequest> pending = new ArrayDeque<>();
    private Generation active;
    private boolean busy;
    private ChannelHandlerContext ctx;

    SimHttpHandler(EngineSimulator engine) {
        this.engine = engine;
    }

    @Override
    public void handlerAdded(ChannelHandlerContext ctx) {
        this.ctx = ctx;
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (!(msg instanceof FullHttpRequest req)) {
            ReferenceCountUtil.release(msg);
            return;
        }
        if (busy) {
            if (pending.size() >= MAX_PIPELINED) {
                engine.stats.inc("pipeline_overflow");
                req.release();
                ctx.close();
                return;
            }
            pending.add(req);
            return;
        }
        process(req);
    }

    private void process(FullHttpRequest req) {
        busy = true;
        Generation g;
        try {
            g = engine.handle(ctx, req, this);
        } finally {
            req.release();
        }
        if (hung || deferred) {
            return;
        }
        if (g == null || g.ended()) {
            requestDone();
        } else {
            active = g;
        }
    }

    /** A hung request keeps the connection busy forever (like an engine that accepted and never answered). */
    void hang() {
        hung = true;
    }

    private boolean hung;

    /** The current request is answered later by a timer (e.g. SGLang's /health_generate); the connection waits. */
    void defer() {
        deferred = true;
    }

    /** The deferred answer was written: serve the next pipelined request. */
    void completeDeferred() {
        if (deferred) {
            deferred = false;
            requestDone();
        }
    }

    private boolean deferred;

    /** The current request is fully answered: serve the next pipelined one. */
    void requestDone() {
        if (hung) {
            return;
        }
        active = null;
        busy = false;
        FullHttpRequest next = pending.poll();
        if (next != null && ctx.channel().isActive()) {
            process(next);
        } else if (next != null) {
            next.release();
        }
    }

    void generationEnded(Generation g) {
        if (active == g) {
            requestDone();
        }
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        Generation g = active;
        if (g != null && !g.ended()) {
            engine.stats.inc("aborted_by_client");
            g.end();
        }
        FullHttpRequest r;
        while ((r = pending.poll()) != null) {
            r.release();
        }
        ctx.fireChannelInactive();
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        engine.stats.inc("connection_errors");
        ctx.close();
    }
}
