package io.kvgate.dataplane.metrics;

import io.prometheus.metrics.expositionformats.ExpositionFormatWriter;
import io.prometheus.metrics.expositionformats.ExpositionFormats;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;

/**
 * One {@code /metrics} answer, in the format the scraper's {@code Accept} header asks for: the Prometheus text format
 * 0.0.4 (the default, and what a missing or unknown Accept gets), OpenMetrics 1.0 (with exemplars) or the protobuf
 * format, all written by the Prometheus client library.
 */
public final class MetricsExposition {
    private static final ExpositionFormats FORMATS = ExpositionFormats.init();

    /** A rendered page and its Content-Type. */
    public record Page(byte[] body, String contentType) {}

    private MetricsExposition() {}

    /** Scrapes {@code registry} now and writes it for {@code accept} (may be null). */
    public static Page scrape(PrometheusRegistry registry, String accept) {
        ExpositionFormatWriter writer = FORMATS.findWriter(accept == null ? "" : accept);
        ByteArrayOutputStream out = new ByteArrayOutputStream(16384);
        try {
            writer.write(out, registry.scrape());
        } catch (IOException e) {
            throw new UncheckedIOException(e); // a ByteArrayOutputStream does not throw
        }
        return new Page(out.toByteArray(), writer.getContentType());
    }

    /** The text format 0.0.4 of {@code registry} now. */
    public static String text(PrometheusRegistry registry) {
        ByteArrayOutputStream out = new ByteArrayOutputStream(16384);
        try {
            FORMATS.getPrometheusTextFormatWriter().write(out, registry.scrape());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return out.toString(java.nio.charset.StandardCharsets.UTF_8);
    }
}
