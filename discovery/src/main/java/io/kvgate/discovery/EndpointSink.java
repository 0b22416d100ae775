package io.kvgate.discovery;

import java.util.List;

/** Receives a rule's complete endpoint set each time it changes (one thread at a time, in the order found). */
@FunctionalInterface
public interface EndpointSink {
    void endpoints(String rule, List<DiscoveredEndpoint> found);
}
