package io.kvgate.dataplane.route;

import io.kvgate.control.config.EndpointConfig;
import java.util.Collection;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Every endpoint the gateway has known, by host:port, so that a configuration swap keeps each endpoint's load,
 * health and block inventory. Resolving an endpoint that exists does not change it: a changed configuration (weight,
 * role) is applied by the routing stage when it swaps in the table that carries it, so the running table never sees
 * the next one's settings. Thread-safe; ids are dense and never reused.
 */
public final class EndpointRegistry {
    private final ConcurrentHashMap<String, EndpointState> byKey = new ConcurrentHashMap<>();
    private final AtomicInteger nextId = new AtomicInteger();

    /**
     * The state a new configuration would use for {@code cfg}, without changing anything: the existing state (its
     * configuration untouched) or a new one that is registered only by {@link #install}. A reload that fails after
     * staging leaves the registry as it was (a staged id may be skipped; ids stay unique).
     */
    public EndpointState stage(EndpointConfig cfg) {
        EndpointState ep = byKey.get(cfg.key());
        return ep != null ? ep : new EndpointState(cfg.key(), nextId.getAndIncrement(), cfg);
    }

    /** Registers a staged state and gives it its new configuration (routing stage, at the swap). */
    void install(EndpointState ep, EndpointConfig cfg) {
        EndpointState prev = byKey.putIfAbsent(ep.key(), ep);
        (prev == null ? ep : prev).config(cfg);
    }

    public EndpointState resolve(EndpointConfig cfg) {
        return byKey.computeIfAbsent(cfg.key(), k -> new EndpointState(k, nextId.getAndIncrement(), cfg));
    }

    public EndpointState get(String key) {
        return byKey.get(key);
    }

    public Collection<EndpointState> all() {
        return byKey.values();
    }
}
