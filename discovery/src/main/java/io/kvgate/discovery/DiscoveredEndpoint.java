package io.kvgate.discovery;

import io.kvgate.control.config.EndpointConfig;

/**
 * One endpoint a discovery source found.
 *
 * @param config      the endpoint as a configured one would read
 * @param terminating its pod is terminating (Kubernetes' {@code terminating} condition or a deletion timestamp): it
 *                    stays known, so requests in flight finish, but is drained: it gets no new request
 */
public record DiscoveredEndpoint(EndpointConfig config, boolean terminating) {}
