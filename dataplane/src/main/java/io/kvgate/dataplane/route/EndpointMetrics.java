package io.kvgate.dataplane.route;

import io.kvgate.dataplane.engine.MountedRoutes;
import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.util.function.Supplier;

/**
 * The endpoint and rule families (in flight, load estimate, breaker, health, DP-rank load, mounted routes, context
 * length), read on scrape from the endpoints' state and the route table current then: registered next to the state
 * they read, once at start-up; any scraping thread.
 */
public final class EndpointMetrics {
    private final PrometheusRegistry registry;
    private final Supplier<RouteTable> table;
    private final EndpointRegistry endpoints;

    private EndpointMetrics(PrometheusRegistry registry, Supplier<RouteTable> table, EndpointRegistry endpoints) {
        this.registry = registry;
        this.table = table;
        this.endpoints = endpoints;
    }

    /** Registers every family; {@code table} is the routing stage's current table. */
    public static void register(PrometheusRegistry registry, Supplier<RouteTable> table, EndpointRegistry endpoints) {
        new EndpointMetrics(registry, table, endpoints).registerAll();
    }

    private void registerAll() {
        ruleEndpointGauge("kvgate_endpoint_outstanding", "Requests in flight per endpoint.", EndpointState::outstanding);
        ruleEndpointGauge("kvgate_endpoint_load", "The load estimate the policies compare: this gateway's requests in flight"
            + " plus the other gateways' part of the engine's running + waiting (aged toward its mean, load.peer_decay),"
            + " or this gateway's in-flight count when the engine reading is stale.", EndpointState::load);
        ruleEndpointGauge("kvgate_engine_load_stale", "1 when the endpoint's load estimate falls back to this gateway's"
            + " in-flight count (no engine reading, or older than load.stale_ms).",
            ep -> ep.loadEstimate().loadSource() == LoadEstimate.LoadSource.ENGINE ? 0 : 1);
        GaugeWithCallback.builder().name("kvgate_endpoint_lifetime_seconds").help("This gateway's requests' mean time in"
                + " flight on the endpoint (Little's law over 2 s, measured when a reading is taken up): how fast the other"
                + " gateways' part of a reading ages (load.peer_decay: lifetime); absent while unknown.").labelNames("endpoint")
            .callback(cb -> {
                for (EndpointState ep : endpoints.all()) {
                    double life = ep.loadEstimate().lifetimeSeconds();
                    if (life >= 0) {
                        cb.call(life, ep.key());
                    }
                }
            }).register(registry);
        GaugeWithCallback.builder().name("kvgate_endpoint_ttft_seconds").help("The endpoint's recent time to first token as"
                + " the router estimates it (streamed requests' first event, averaged; an excess over its rule's fleet fading"
                + " while unmeasured): what load.ttft_aware weighs and hedge.ttft_factor multiplies; absent while unmeasured.")
            .labelNames("endpoint").callback(cb -> {
                for (EndpointState ep : endpoints.all()) {
                    long ns = ep.ttft().ownRecentNs();
                    if (ns >= 0) {
                        cb.call(ns / 1e9, ep.key());
                    }
                }
            }).register(registry);
        endpointGauge("kvgate_endpoint_prefill_tokens", "Uncached prompt tokens of this gateway's requests still in"
            + " prefill on the endpoint (kv_exact rules; kv.prefill_token_weight).", ep -> ep.loadEstimate().prefillTokens());
        GaugeWithCallback.builder().name("kvgate_rule_context_length").help("The context length (tokens) a rule's requests"
                + " are checked against: max_model_len, else the smallest its endpoints state; absent while unknown.")
            .labelNames("rule").callback(cb -> {
                for (Rule r : table.get().rules()) {
                    int ctx = r.contextLength();
                    if (ctx > 0) {
                        cb.call(ctx, r.name());
                    }
                }
            }).register(registry);
        GaugeWithCallback.builder().name("kvgate_endpoint_route_mounted").help("1 when the endpoint's engine mounts the"
                + " route, 0 when it says it does not (vLLM GET /openapi.json, SGLang is_embedding): the rule then sends that"
                + " route's requests to its other endpoints; absent while unknown.").labelNames("rule", "endpoint", "route")
            .callback(cb -> {
                for (Rule r : table.get().rules()) {
                    for (EndpointState ep : r.endpoints()) {
                        if (ep.facts().routesSource() == null) {
                            continue;
                        }
                        for (boolean chat : new boolean[] {true, false}) {
                            cb.call((ep.facts().unmountedRoutes() & EngineFacts.routeBit(chat)) == 0 ? 1 : 0, r.name(), ep.key(),
                                chat ? MountedRoutes.CHAT_PATH : MountedRoutes.COMPLETIONS_PATH);
                        }
                    }
                }
            }).register(registry);
        GaugeWithCallback.builder().name("kvgate_endpoint_rank_outstanding").help("Requests this gateway pinned to a DP rank"
                + " of the endpoint (X-data-parallel-rank) and still in flight; endpoints with dp_ranks > 1.")
            .labelNames("endpoint", "rank").callback(cb -> {
                for (EndpointState ep : endpoints.all()) {
                    for (int rank = 0; ep.ranks() > 1 && rank < ep.ranks(); rank++) {
                        cb.call(ep.rankLoad().outstanding(rank), ep.key(), Integer.toString(rank));
                    }
                }
            }).register(registry);
        endpointGauge("kvgate_endpoint_healthy", "1 when the endpoint passes its active probes.", ep -> ep.probeHealthy() ? 1 : 0);
        endpointGauge("kvgate_endpoint_breaker_open", "1 when the endpoint's circuit breaker is open or half-open.",
            ep -> ep.breaker().state() == Breaker.State.CLOSED ? 0 : 1);
        endpointCounter("kvgate_endpoint_breaker_opens_total", "Times the endpoint's circuit breaker opened.",
            ep -> ep.breaker().opens());
        endpointCounter("kvgate_endpoint_routed_total", "Requests routed to the endpoint.", ep -> ep.loadEstimate().routedTotal());
        endpointCounter("kvgate_endpoint_failures_total", "Failed requests to the endpoint (the breaker's input).",
            ep -> ep.breaker().failures());
    }

    /** A gauge per (rule, endpoint) of the current table. */
    private void ruleEndpointGauge(String name, String help, java.util.function.ToDoubleFunction<EndpointState> value) {
        GaugeWithCallback.builder().name(name).help(help).labelNames("rule", "endpoint").callback(cb -> {
            for (Rule r : table.get().rules()) {
                for (EndpointState ep : r.endpoints()) {
                    cb.call(value.applyAsDouble(ep), r.name(), ep.key());
                }
            }
        }).register(registry);
    }

    /** A gauge per endpoint of the registry. */
    private void endpointGauge(String name, String help, java.util.function.ToDoubleFunction<EndpointState> value) {
        GaugeWithCallback.builder().name(name).help(help).labelNames("endpoint").callback(cb -> {
            for (EndpointState ep : endpoints.all()) {
                cb.call(value.applyAsDouble(ep), ep.key());
            }
        }).register(registry);
    }

    /** A counter per endpoint of the registry. */
    private void endpointCounter(String name, String help, java.util.function.ToDoubleFunction<EndpointState> value) {
        CounterWithCallback.builder().name(name).help(help).labelNames("endpoint").callback(cb -> {
            for (EndpointState ep : endpoints.all()) {
                cb.call(value.applyAsDouble(ep), ep.key());
            }
        }).register(registry);
    }
}
