package io.kvgate.dataplane.route;

import io.kvgate.control.config.EndpointConfig;
import java.util.Collection;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Every endpoint the gateway has known, by host:port, so that a configuration swap keeps each endpoint's load,
 * health and block inventory. Thread-safe; ids are dense and never reused.
 */
public final class EndpointRegistry {
    private final ConcurrentHashMap<String, EndpointState> byKey = new ConcurrentHashMap<>();
    private final AtomicInteger nextId = new AtomicInteger();

    public EndpointState resolve(EndpointConfig cfg) {
        EndpointState ep = byKey.computeIfAbsent(cfg.key(), k -> new EndpointState(k, nextId.getAndIncrement(), cfg));
        ep.config(cfg);
        return ep;
    }

    public EndpointState get(String key) {
        return byKey.get(key);
    }

    public Collection<EndpointState> all() {
        return byKey.values();
    }
}
