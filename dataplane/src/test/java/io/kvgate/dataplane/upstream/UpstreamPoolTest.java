package io.kvgate.dataplane.upstream;

import static io.kvgate.dataplane.upstream.EmbeddedEngines.reads;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.route.EndpointState;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import org.junit.jupiter.api.Test;

/**
 * {@link UpstreamPool}'s idle stack on embedded connections: a released connection keeps auto-read off (turning it
 * on and off per request costs two epoll_ctl calls per request) and keeps one read pending instead.
 */
class UpstreamPoolTest {
    static final GatewayConfig.Limits LIMITS = new GatewayConfig.Limits(1 << 20, 16 << 10, 8 << 10, 30_000, 60_000, 1024, 30_000);

    static GatewayConfig.Upstream upstream(int maxIdlePerEndpoint) {
        return new GatewayConfig.Upstream(1_000, 60_000, 60_000, 2, maxIdlePerEndpoint, 4096);
    }

    private final EndpointState ep = EmbeddedEngines.endpoint("10.0.0.1", 8000);

    @Test
    void releasedConnectionKeepsAutoReadOffWithOneReadPending() {
        UpstreamPool pool = new UpstreamPool(NioSocketChannel.class, upstream(4), LIMITS);
        EmbeddedChannel ch = EmbeddedEngines.newEngineChannel();
        int before = reads(ch);
        pool.release(ep, ch);
        assertFalse(ch.config().isAutoRead(), "auto-read is never toggled on a pooled connection");
        assertEquals(before + 1, reads(ch), "an idle connection keeps a read pending (an engine close retires it)");
        assertSame(ch, pool.pollIdle(ep));
        assertNull(pool.pollIdle(ep));
    }

    @Test
    void closedOrSurplusConnectionsAreNotPooled() {
        UpstreamPool pool = new UpstreamPool(NioSocketChannel.class, upstream(1), LIMITS);
        EmbeddedChannel closed = EmbeddedEngines.newEngineChannel();
        closed.close();
        pool.release(ep, closed);
        assertNull(pool.pollIdle(ep), "a closed connection is not pooled");

        EmbeddedChannel first = EmbeddedEngines.newEngineChannel();
        EmbeddedChannel second = EmbeddedEngines.newEngineChannel();
        pool.release(ep, first);
        pool.release(ep, second);
        assertFalse(second.isOpen(), "beyond max_idle_per_endpoint the connection is closed");
        assertSame(first, pool.pollIdle(ep));

        UpstreamPool noIdle = new UpstreamPool(NioSocketChannel.class, upstream(0), LIMITS);
        EmbeddedChannel ch = EmbeddedEngines.newEngineChannel();
        noIdle.release(ep, ch);
        assertFalse(ch.isOpen(), "max_idle_per_endpoint 0: nothing is kept");
    }

    @Test
    void pollIdleSkipsConnectionsThatClosedWhileIdle() {
        UpstreamPool pool = new UpstreamPool(NioSocketChannel.class, upstream(4), LIMITS);
        EmbeddedChannel older = EmbeddedEngines.newEngineChannel();
        EmbeddedChannel newer = EmbeddedEngines.newEngineChannel();
        pool.release(ep, older);
        pool.release(ep, newer);
        newer.close();
        assertSame(older, pool.pollIdle(ep));
    }
}
