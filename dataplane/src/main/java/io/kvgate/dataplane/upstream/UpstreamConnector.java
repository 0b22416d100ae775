package io.kvgate.dataplane.upstream;

import io.kvgate.dataplane.route.EndpointState;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.EventLoop;

/**
 * Where legs get engine connections: {@link UpstreamPool} in the gateway, embedded channels in tests. Every channel
 * handed out has the pipeline {@link UpstreamPool#initEngineChannel} builds (an {@code EngineResponseDecoder}
 * followed by an {@link UpstreamLeg.Handler}; requests are written as bytes), and auto-read off for its
 * whole life (the leg and the idle pool request every read; toggling auto-read per request costs epoll_ctl calls).
 * Event-loop only.
 */
public interface UpstreamConnector {
    /** An idle keep-alive connection to {@code ep} that is still open, or null. */
    Channel pollIdle(EndpointState ep);

    /** Opens a new connection to {@code ep} on {@code loop}. */
    ChannelFuture connect(EventLoop loop, EndpointState ep);

    /**
     * Takes back a connection whose last response completed cleanly and may be reused. An idle connection must keep a
     * read pending ({@code ch.read()}), so an engine's close or stray bytes retire it before a leg picks it up.
     */
    void release(EndpointState ep, Channel ch);
}
