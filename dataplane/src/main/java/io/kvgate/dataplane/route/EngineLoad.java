package io.kvgate.dataplane.route;

/**
 * What an engine says about its own load, as admission control reads it to decide whether an endpoint is saturated.
 * Implementations are read on the routing thread and must not block; a reading older than the scraper's staleness
 * bound is reported as unknown, and an unknown reading never makes an endpoint saturated (this gateway's own
 * in-flight count, {@code admission.max_outstanding}, still does).
 */
public interface EngineLoad {
    /** Requests waiting in the engine's own queue, or -1 when unknown or stale. */
    int waiting(EndpointState ep);

    /** The engine's KV-cache usage in [0, 1], or NaN when unknown or stale. */
    double kvUsage(EndpointState ep);

    /**
     * The load scraper's readings ({@link LoadEstimate#publishReading}) as the routing stage took them up at its
     * last batch: the engine's own waiting requests (summed over its DP ranks) and its fullest rank's KV-cache usage;
     * unknown when the endpoint has no reading fresher than {@code load.stale_ms}.
     */
    EngineLoad SCRAPED = new EngineLoad() {
        @Override
        public int waiting(EndpointState ep) {
            EngineReading r = ep.loadEstimate().freshReading();
            return r == null ? -1 : r.waitingTotal;
        }

        @Override
        public double kvUsage(EndpointState ep) {
            EngineReading r = ep.loadEstimate().freshReading();
            return r == null ? Double.NaN : r.kvUsageMax;
        }
    };

    /** No engine readings: only the local in-flight count decides. */
    EngineLoad NONE = new EngineLoad() {
        @Override
        public int waiting(EndpointState ep) {
            return -1;
        }

        @Override
        public double kvUsage(EndpointState ep) {
            return Double.NaN;
        }
    };
}
