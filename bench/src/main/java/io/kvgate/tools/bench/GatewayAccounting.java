package io.kvgate.tools.bench;

import com.fasterxml.jackson.core.JsonGenerator;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * What kvgate's routing-quality accounting counted over a run ({@code --gateway-metrics}, issue #35 item 1): the
 * {@code kvgate_prompt_tokens_total{kind}} and {@code kvgate_routing_loss_tokens_total{cause}} of every listed gateway
 * (the replicas behind a balancer), summed over rules and gateways, read from their {@code /metrics} when the
 * measured window starts and after the run, so the report shows beside the engine-reported usage the client saw how
 * much of the prompt was reachable, predicted and observed and why the rest was computed. Opt-in: the load generator
 * sends nothing to a target it was not asked to.
 *
 * <p>Read on the runner's thread (blocking HTTP, never the generator's event loop); instances are immutable.
 */
final class GatewayAccounting {
    static final String[] KINDS = {"prompt", "reachable", "predicted", "observed"};

    private static final HttpClient HTTP = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
        .connectTimeout(Duration.ofSeconds(3)).build();

    /** Tokens by kind, and lost tokens by cause (both sorted by name). */
    private final Map<String, Long> kinds;
    private final Map<String, Long> causes;

    private GatewayAccounting(Map<String, Long> kinds, Map<String, Long> causes) {
        this.kinds = kinds;
        this.causes = causes;
    }

    /**
     * The gateways' counters now, summed; null when one cannot be read or has none (not a kvgate): a sum missing a
     * replica would be wrong, not partial.
     */
    static GatewayAccounting snapshot(java.util.List<String> baseUrls) {
        GatewayAccounting sum = new GatewayAccounting(new TreeMap<>(), new TreeMap<>());
        for (String url : baseUrls) {
            GatewayAccounting one = read(url);
            if (one == null) {
                return null;
            }
            one.kinds.forEach((k, v) -> sum.kinds.merge(k, v, Long::sum));
            one.causes.forEach((k, v) -> sum.causes.merge(k, v, Long::sum));
        }
        return sum;
    }

    private static GatewayAccounting read(String baseUrl) {
        try {
            HttpResponse<String> r = HTTP.send(HttpRequest.newBuilder(URI.create(baseUrl + "/metrics"))
                .timeout(Duration.ofSeconds(5)).GET().build(), HttpResponse.BodyHandlers.ofString());
            return r.statusCode() == 200 ? parse(r.body()) : null;
        } catch (IOException | IllegalArgumentException e) {
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
    }

    /** The two families of one Prometheus text page, summed over rules; null when the page has neither. */
    static GatewayAccounting parse(String text) {
        Map<String, Long> kinds = new TreeMap<>();
        Map<String, Long> causes = new TreeMap<>();
        for (String line : text.split("\n")) {
            Map<String, Long> into = line.startsWith("kvgate_prompt_tokens_total{") ? kinds
                : line.startsWith("kvgate_routing_loss_tokens_total{") ? causes : null;
            if (into == null) {
                continue;
            }
            String label = label(line, into == kinds ? "kind" : "cause");
            int space = line.lastIndexOf(' ');
            if (label == null || space < 0) {
                continue;
            }
            try {
                into.merge(label, Math.round(Double.parseDouble(line.substring(space + 1).trim())), Long::sum);
            } catch (NumberFormatException e) {
                // not a sample: skipped
            }
        }
        return kinds.isEmpty() ? null : new GatewayAccounting(kinds, causes);
    }

    private static String label(String line, String name) {
        int at = line.indexOf(name + "=\"");
        if (at < 0) {
            return null;
        }
        int from = at + name.length() + 2;
        int to = line.indexOf('"', from);
        return to < 0 ? null : line.substring(from, to);
    }

    /** The counts between two snapshots of one target; null when either is missing. */
    static GatewayAccounting between(GatewayAccounting before, GatewayAccounting after) {
        if (before == null || after == null) {
            return null;
        }
        return new GatewayAccounting(delta(before.kinds, after.kinds), delta(before.causes, after.causes));
    }

    private static Map<String, Long> delta(Map<String, Long> before, Map<String, Long> after) {
        Map<String, Long> d = new TreeMap<>();
        after.forEach((k, v) -> d.put(k, Math.max(0, v - before.getOrDefault(k, 0L))));
        return d;
    }

    long tokens(String kind) {
        return kinds.getOrDefault(kind, 0L);
    }

    long lost(String cause) {
        return causes.getOrDefault(cause, 0L);
    }

    private double share(String kind) {
        long prompt = tokens("prompt");
        return prompt == 0 ? Double.NaN : (double) tokens(kind) / prompt;
    }

    void write(JsonGenerator g) throws IOException {
        g.writeObjectFieldStart("gateway_accounting");
        for (String k : KINDS) {
            g.writeNumberField(k + "_tokens", tokens(k));
        }
        for (String k : KINDS) {
            if (!k.equals("prompt")) {
                double s = share(k);
                if (Double.isNaN(s)) {
                    g.writeNullField(k + "_ratio");
                } else {
                    g.writeNumberField(k + "_ratio", Math.round(s * 10_000.0) / 10_000.0);
                }
            }
        }
        g.writeObjectFieldStart("loss_tokens");
        for (Map.Entry<String, Long> c : causes.entrySet()) {
            g.writeNumberField(c.getKey(), c.getValue());
        }
        g.writeEndObject();
        g.writeEndObject();
    }

    /** Summary lines for the human report. */
    String summary() {
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT, "  gateway accounting: %d prompt tokens: reachable %s, predicted %s, observed %s%n",
            tokens("prompt"), pct(share("reachable")), pct(share("predicted")), pct(share("observed"))));
        long lost = 0;
        for (long v : causes.values()) {
            lost += v;
        }
        if (lost > 0) {
            StringBuilder parts = new StringBuilder();
            final long total = lost;
            causes.entrySet().stream().filter(e -> e.getValue() > 0)
                .sorted((a, b) -> Long.compare(b.getValue(), a.getValue()))
                .forEach(e -> parts.append(parts.length() == 0 ? "" : ", ").append(e.getKey()).append(' ')
                    .append(pct((double) e.getValue() / total)));
            sb.append(String.format(Locale.ROOT, "    computed %d prompt tokens: %s%n", lost, parts));
        }
        return sb.toString();
    }

    private static String pct(double v) {
        return Double.isNaN(v) ? "-" : String.format(Locale.ROOT, "%.1f%%", 100 * v);
    }
}
