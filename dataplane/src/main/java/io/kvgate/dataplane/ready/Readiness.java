package io.kvgate.dataplane.ready;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.EndpointConfig;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.RouteTable;
import io.kvgate.dataplane.route.Rule;
import io.kvgate.ingest.zmq.SubscriberStatus;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/**
 * Two answers. {@code GET /ready} ({@link #evaluate}) is the gateway's own readiness, what a balancer or an
 * orchestrator gates traffic on: it has started (configuration applied, listeners bound), it is neither draining nor
 * shutting down, and every {@code kv_exact} rule is warm. A rule is warm once its expected KV subscribers (each
 * endpoint with {@code kv_events}, each DP rank) have all been connected for {@code kv.warmup_ms} (counted from the last
 * one to connect); it stays warm after that, so an engine outage later never takes the gateway out of rotation
 * (clients then get the gateway's own 503 {@code no_healthy_endpoint} with {@code Retry-After}, not a connection
 * error). A rule added by a reload warms on its own.
 *
 * <p>{@code GET /ready/engines} ({@link #evaluateEngines}) is the fleet's state, for dashboards and scripts that wait
 * for engines: for every rule, each model it serves is listed in {@code /v1/models} by a healthy, undrained endpoint
 * of each pool the rule routes to (both pools of a P/D rule), and its KV subscribers are connected and warm now.
 *
 * <p>Model lists come from {@link #recordModels} (the probe); subscriber connection times from
 * {@link #observeSubscribers}, called by the probe's tick and by every evaluation. Thread-safe.
 */
public final class Readiness {
    /** One evaluation: ready, or what it waits for (one line each). */
    public record Report(boolean ready, List<String> waitingFor) {}

    private final Supplier<RouteTable> table;
    private final Supplier<List<SubscriberStatus>> subscribers;
    private final BooleanSupplier draining;
    private final BooleanSupplier shuttingDown;
    private final BooleanSupplier started;
    private final NanoClock clock;
    /** Names of the {@code kv_exact} rules that have been warm once (see the class comment: it is not undone). */
    private final Set<String> warmedRules = ConcurrentHashMap.newKeySet();
    /** Endpoint key → models its last /v1/models answer listed; absent until it answered. */
    private final Map<String, Set<String>> models = new ConcurrentHashMap<>();
    /** Endpoint key → why its last /v1/models probe failed. */
    private final Map<String, String> modelErrors = new ConcurrentHashMap<>();
    /** "endpointId/rank" → when that subscriber was first seen connected (cleared when it disconnects). */
    private final Map<String, Long> connectedSinceNs = new ConcurrentHashMap<>();

    /** A readiness for a gateway that has started and never shuts down (tests of the fleet rules). */
    public Readiness(Supplier<RouteTable> table, Supplier<List<SubscriberStatus>> subscribers, BooleanSupplier draining,
                     NanoClock clock) {
        this(table, subscribers, draining, () -> false, () -> true, clock);
    }

    /**
     * @param shuttingDown whether a shutdown was announced (SIGTERM: {@code shutdown.drain_delay_ms} still serving)
     * @param started      whether the gateway has applied its configuration and bound its listeners
     */
    public Readiness(Supplier<RouteTable> table, Supplier<List<SubscriberStatus>> subscribers, BooleanSupplier draining,
                     BooleanSupplier shuttingDown, BooleanSupplier started, NanoClock clock) {
        this.table = table;
        this.subscribers = subscribers;
        this.draining = draining;
        this.shuttingDown = shuttingDown;
        this.started = started;
        this.clock = clock;
    }

    /** The probe's result for one endpoint: the model ids it lists, or null with the reason it could not tell. */
    public void recordModels(String endpointKey, Set<String> listed, String error) {
        if (listed != null) {
            models.put(endpointKey, Set.copyOf(listed));
            modelErrors.remove(endpointKey);
        } else {
            models.remove(endpointKey);
            modelErrors.put(endpointKey, error);
        }
    }

    /** Notes when each KV subscriber connected (and forgets one that disconnected: its warm-up restarts). */
    public void observeSubscribers() {
        long now = clock.nanoTime();
        Set<String> connected = new java.util.HashSet<>();
        for (SubscriberStatus s : subscribers.get()) {
            if (s.connected()) {
                String k = s.endpointId() + "/" + s.rank();
                connected.add(k);
                connectedSinceNs.putIfAbsent(k, now);
            }
        }
        connectedSinceNs.keySet().retainAll(connected);
    }

    /**
     * Readiness as {@code ctl status} shows it: the gateway's own, then the fleet's under {@code engines}, then
     * {@code warnings}: not reasons to wait (the engines serve), but what keeps routing from working as configured.
     */
    public com.fasterxml.jackson.databind.node.ObjectNode statusJson(List<String> warnings) {
        Report r = evaluate();
        var n = com.fasterxml.jackson.databind.node.JsonNodeFactory.instance.objectNode();
        n.put("ready", r.ready());
        var w = n.putArray("waiting_for");
        r.waitingFor().forEach(w::add);
        Report e = evaluateEngines();
        var engines = n.putObject("engines");
        engines.put("ready", e.ready());
        var ew = engines.putArray("waiting_for");
        e.waitingFor().forEach(ew::add);
        var warned = n.putArray("warnings");
        warnings.forEach(warned::add);
        return n;
    }

    /** {@code GET /ready}: the gateway's own readiness; each line names a failing condition. */
    public Report evaluate() {
        observeSubscribers();
        List<String> waiting = new ArrayList<>();
        if (!started.getAsBoolean()) {
            waiting.add("the gateway is starting (configuration not applied or listeners not bound yet)");
        }
        if (shuttingDown.getAsBoolean()) {
            waiting.add("the gateway is shutting down (serving until shutdown.drain_delay_ms ends, then draining)");
        }
        if (draining.getAsBoolean()) {
            waiting.add("the gateway is draining (undo: ctl undrain)");
        }
        long now = clock.nanoTime();
        List<Rule> rules = table.get().rules();
        // A rule removed by a reload and added again later warms again.
        warmedRules.retainAll(rules.stream().map(Rule::name).toList());
        for (Rule r : rules) {
            if ("kv_exact".equals(r.config().policy()) && !warmedRules.contains(r.name())) {
                List<String> kvWaiting = new ArrayList<>();
                kvWaits(r, now, kvWaiting);
                if (kvWaiting.isEmpty()) {
                    warmedRules.add(r.name());
                } else {
                    waiting.addAll(kvWaiting);
                }
            }
        }
        return new Report(waiting.isEmpty(), waiting);
    }

    /** {@code GET /ready/engines}: what the fleet lacks now (models not listed, KV subscribers not connected or warm). */
    public Report evaluateEngines() {
        observeSubscribers();
        List<String> waiting = new ArrayList<>();
        long now = clock.nanoTime();
        for (Rule r : table.get().rules()) {
            List<List<EndpointState>> pools = r.isPd() ? List.of(r.prefillEndpoints(), decodes(r)) : List.of(r.endpoints());
            for (List<EndpointState> pool : pools) {
                // The engines list the name they serve (served_as for an alias); two aliases may share it.
                Set<String> checked = new java.util.HashSet<>();
                for (io.kvgate.control.config.ModelEntry e : r.config().modelEntries()) {
                    String model = e.engineName();
                    if (checked.add(model) && !served(pool, model)) {
                        waiting.add("rule " + r.name() + ": no healthy endpoint" + (r.isPd() ? " in the " + role(pool) + " pool" : "")
                            + " lists model '" + model + "'" + (e.renamed() ? " (served_as of '" + e.name() + "')" : "")
                            + " in /v1/models (" + describe(pool) + ")");
                    }
                }
            }
            if ("kv_exact".equals(r.config().policy())) {
                kvWaits(r, now, waiting);
            }
        }
        return new Report(waiting.isEmpty(), waiting);
    }

    private static List<EndpointState> decodes(Rule r) {
        return r.endpoints().stream().filter(e -> "decode".equals(e.config().role())).toList();
    }

    private static String role(List<EndpointState> pool) {
        return pool.isEmpty() ? "empty" : String.valueOf(pool.get(0).config().role());
    }

    private boolean served(List<EndpointState> pool, String model) {
        for (EndpointState ep : pool) {
            Set<String> listed = models.get(ep.key());
            if (ep.probeHealthy() && !ep.drained() && listed != null && listed.contains(model)) {
                return true;
            }
        }
        return false;
    }

    private String describe(List<EndpointState> pool) {
        List<String> parts = new ArrayList<>();
        for (EndpointState ep : pool) {
            String s = ep.key() + ": ";
            if (!ep.probeHealthy()) {
                s += "unhealthy";
            } else if (ep.drained()) {
                s += "drained";
            } else if (models.containsKey(ep.key())) {
                s += "lists " + models.get(ep.key());
            } else {
                s += modelErrors.getOrDefault(ep.key(), "not probed yet");
            }
            parts.add(s);
        }
        return String.join("; ", parts);
    }

    private void kvWaits(Rule r, long now, List<String> waiting) {
        long lastConnect = Long.MIN_VALUE;
        Map<String, String> missing = new java.util.LinkedHashMap<>();
        for (EndpointState ep : r.endpoints()) {
            EndpointConfig ec = ep.config();
            if (ec.kvEvents() == null) {
                continue;
            }
            for (int rank = 0; rank < ec.dpRanks(); rank++) {
                Long since = connectedSinceNs.get(ep.id() + "/" + rank);
                if (since == null) {
                    missing.put(ep.key() + " rank " + rank, ec.kvEvents());
                } else {
                    lastConnect = Math.max(lastConnect, since);
                }
            }
        }
        if (!missing.isEmpty()) {
            waiting.add("rule " + r.name() + ": KV subscribers not connected: " + String.join(", ", missing.keySet()));
            return;
        }
        long warmupNs = r.config().kvExact().warmupMs() * 1_000_000L;
        if (lastConnect != Long.MIN_VALUE && now - lastConnect < warmupNs) {
            waiting.add("rule " + r.name() + ": KV warm-up, " + ((warmupNs - (now - lastConnect)) / 1_000_000L)
                + " ms left of kv.warmup_ms " + r.config().kvExact().warmupMs());
        }
    }
}
