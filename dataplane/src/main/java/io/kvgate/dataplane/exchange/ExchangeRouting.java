package io.kvgate.dataplane.exchange;

import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.Outcome;
import io.kvgate.dataplane.route.RouteCallback;
import io.kvgate.dataplane.route.RouteInputs;
import io.kvgate.dataplane.route.RouterPort;
import io.kvgate.dataplane.route.RoutingStage;
import io.kvgate.dataplane.upstream.EndpointOutcomes;
import io.netty.channel.EventLoop;
import io.netty.util.concurrent.FastThreadLocal;
import java.util.function.Function;

/**
 * What an exchange needs from the routing stage, seen from its event loop: ask for a decision (it comes back on the
 * same loop), and report how a routed request ended. The gateway's is the loop's {@link RouterPort}; tests script
 * decisions on the test thread.
 */
public interface ExchangeRouting extends EndpointOutcomes {
    /**
     * The routing inputs to fill for the next {@link #tryRoute}, cleared (the gateway's: its loop's one reused
     * instance, valid until that publish returns).
     */
    RouteInputs inputs();

    /**
     * Publishes a request's {@code inputs} for routing; false when it must be shed (ring or port full). On true, one
     * {@link RouteCallback#onDecision} follows on this loop.
     */
    boolean tryRoute(RouteInputs inputs, RouteCallback callback);

    /**
     * Publishes a P/D request whose prefill ({@code inputs}) and decode endpoints are chosen in one decision
     * ({@link RouterPort#tryRoutePair}); false when it must be shed.
     */
    boolean tryRoutePair(RouteInputs inputs, RouteCallback callback);

    /** Each event loop's view of {@code router}: its {@link RouterPort}, looked up once per loop thread. */
    static Function<EventLoop, ExchangeRouting> ports(RoutingStage router) {
        FastThreadLocal<ExchangeRouting> byLoop = new FastThreadLocal<>();
        return loop -> {
            ExchangeRouting r = byLoop.get();
            if (r == null) {
                RouterPort port = router.port(loop);
                r = new ExchangeRouting() {
                    @Override
                    public RouteInputs inputs() {
                        return port.inputs();
                    }

                    @Override
                    public boolean tryRoute(RouteInputs inputs, RouteCallback callback) {
                        return port.tryRoute(inputs, callback);
                    }

                    @Override
                    public boolean tryRoutePair(RouteInputs inputs, RouteCallback callback) {
                        return port.tryRoutePair(inputs, callback);
                    }

                    @Override
                    public void complete(EndpointState endpoint, Outcome outcome) {
                        port.complete(endpoint, outcome);
                    }

                    @Override
                    public void prefillDone(EndpointState endpoint, int tokens) {
                        port.prefillDone(endpoint, tokens);
                    }

                    @Override
                    public void complete(EndpointState endpoint, Outcome outcome, int rank) {
                        port.complete(endpoint, outcome, rank);
                    }

                    @Override
                    public void prefillDone(EndpointState endpoint, int tokens, int rank) {
                        port.prefillDone(endpoint, tokens, rank);
                    }

                    @Override
                    public void firstToken(EndpointState endpoint, long ttftNs) {
                        port.firstToken(endpoint, ttftNs);
                    }

                    @Override
                    public void noFirstTokenAfter(EndpointState endpoint, long waitedNs) {
                        port.noFirstTokenAfter(endpoint, waitedNs);
                    }
                };
                byLoop.set(r);
            }
            return r;
        };
    }
}
