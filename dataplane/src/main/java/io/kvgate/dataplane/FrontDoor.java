package io.kvgate.dataplane;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.exchange.GatewayContext;
import io.kvgate.dataplane.http.DrainState;
import io.kvgate.dataplane.metrics.FamilyRegistry;
import io.kvgate.dataplane.ready.Readiness;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.ServerChannel;
import java.util.function.Supplier;

/**
 * A front door besides the HTTP listener, in a module of its own that the data plane does not link: the endpoint
 * picker ({@code epp_listen}, module {@code epp}). Found on the class path with {@link java.util.ServiceLoader}; the
 * gateway opens it after its own listeners are bound, on the same I/O event loops (requests then reach the routing
 * stage through the same per-loop ports as the HTTP front door's), and closes it with them.
 */
public interface FrontDoor {
    /** What the gateway lends a front door: its request path, state and threads. */
    record Wiring(GatewayConfig config, GatewayContext gateway, DrainState drain, Supplier<Readiness.Report> readiness,
                  EventLoopGroup boss, EventLoopGroup workers, Class<? extends ServerChannel> serverChannel,
                  FamilyRegistry metrics) {}

    /** An open front door: its bound port, closed with the gateway. */
    interface Open extends AutoCloseable {
        int port();

        /** Stops accepting new streams (the shutdown's drain); streams in flight go on until closed. */
        void stopAccepting();

        @Override
        void close();
    }

    /** Whether {@code config} asks for this front door. */
    boolean configured(GatewayConfig config);

    /** Binds it (only when {@link #configured}); throws when it cannot. */
    Open open(Wiring wiring) throws Exception;
}
