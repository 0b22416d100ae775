package io.kvgate.dataplane.proxy;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.metrics.GatewayMetrics;
import io.kvgate.dataplane.route.RoutingStage;
import io.kvgate.dataplane.upstream.UpstreamPool;

/** What every request handler needs, wired once at start-up. Immutable; thread-safe components only. */
public record GatewayContext(GatewayConfig config, RoutingStage router, UpstreamPool pool, GatewayMetrics metrics,
                             NanoClock clock, RequestHooks hooks) {}
