package io.kvgate.control.config;

import java.net.URI;
import java.net.URISyntaxException;

/**
 * OpenTelemetry tracing (section {@code tracing}, issue #37 item 3): a span per sampled request, exported over
 * OTLP/HTTP. Restart-only: the SDK (its exporter thread and batch queue) is built once at start-up, and a reload
 * that changes the section is refused (409) naming {@code tracing}.
 *
 * @param otlpEndpoint where spans are POSTed (the full URL, e.g. {@code http://collector:4318/v1/traces}), or null
 *                     for none: tracing is then off whatever the ratio
 * @param sampleRatio  the share of requests without a sampled client {@code traceparent} that start a trace; 0 (the
 *                     default) is off entirely: no span, no SDK work, and a client's {@code traceparent} reaches the
 *                     engine untouched. Above 0 a client's sampling decision is honoured (parent-based sampling).
 * @param serviceName  the {@code service.name} resource attribute of every span
 */
public record TracingConfig(String otlpEndpoint, double sampleRatio, String serviceName) {
    public static final String DEFAULT_SERVICE_NAME = "kvgate";
    public static final TracingConfig OFF = new TracingConfig(null, 0, DEFAULT_SERVICE_NAME);

    /** Whether any request is traced: an endpoint to export to and a ratio above 0. */
    public boolean enabled() {
        return otlpEndpoint != null && sampleRatio > 0;
    }

    /** Reads the {@code tracing} mapping of {@code parent}; problems name the key, the value and the rule. */
    public static TracingConfig read(ConfigNode parent) {
        ConfigNode n = parent.child(TracingKeys.SECTION.name());
        String endpoint = TracingKeys.OTLP_ENDPOINT.read(n);
        double ratio = TracingKeys.SAMPLE_RATIO.read(n);
        String service = TracingKeys.SERVICE_NAME.read(n);
        if (endpoint != null && !isHttpUrl(endpoint)) {
            n.problem("otlp_endpoint", endpoint, "must be an http:// or https:// URL with a host (the OTLP/HTTP traces "
                + "URL, e.g. http://127.0.0.1:4318/v1/traces)");
            endpoint = null;
        }
        if (ratio > 0 && endpoint == null && !n.has("otlp_endpoint")) {
            n.problem("sample_ratio", ratio, "needs tracing.otlp_endpoint (sampled spans must go somewhere)");
        }
        if (service == null || service.isBlank()) {
            n.problem("service_name", service, "must be a non-empty string");
            service = DEFAULT_SERVICE_NAME;
        }
        n.finish();
        return new TracingConfig(endpoint, ratio, service);
    }

    static boolean isHttpUrl(String s) {
        try {
            URI u = new URI(s);
            return ("http".equalsIgnoreCase(u.getScheme()) || "https".equalsIgnoreCase(u.getScheme()))
                && u.getHost() != null && !u.getHost().isEmpty();
        } catch (URISyntaxException e) {
            return false;
        }
    }
}
