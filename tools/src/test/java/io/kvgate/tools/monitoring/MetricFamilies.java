package io.kvgate.tools.monitoring;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The metric families the gateway exposes, as the monitoring files may query them: the list kept in
 * {@code metric-families.txt} (name, Prometheus type), the
 * series names a family yields ({@code _bucket}, {@code _sum}, {@code _count} for a histogram...), and the names the
 * checked-in dashboard and alert rules reference. Every {@code kvgate_} identifier in those files is a metric name
 * (no label, rule or dashboard name starts with it), so a plain scan finds them all, expressions and variables alike.
 */
final class MetricFamilies {
    static final String RESOURCE = "metric-families.txt";
    /** The files whose PromQL must name only existing series. */
    static final List<String> MONITORING_FILES = List.of("deploy/grafana/kvgate.json", "deploy/prometheus/alerts.yml");
    private static final Pattern NAME = Pattern.compile("\\bkvgate_[a-z0-9_]*[a-z0-9]");

    private final Map<String, String> types = new LinkedHashMap<>();

    static MetricFamilies load() {
        try (InputStream in = MetricFamilies.class.getResourceAsStream(RESOURCE)) {
            return parse(new String(in.readAllBytes(), StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static MetricFamilies parse(String text) {
        MetricFamilies f = new MetricFamilies();
        for (String line : text.split("\n")) {
            String l = line.strip();
            if (l.isEmpty() || l.startsWith("#")) {
                continue;
            }
            String[] w = l.split("\\s+");
            f.types.put(w[0], w[1]);
        }
        return f;
    }

    Map<String, String> families() {
        return types;
    }

    /** Every series name the listed families yield. */
    Set<String> seriesNames() {
        Set<String> out = new TreeSet<>();
        types.forEach((name, type) -> out.addAll(series(name, type)));
        return out;
    }

    /** Every series name of the families docs/metrics.md's table lists ({@code | `name` | type | labels | help |}). */
    static Set<String> registeredIn(String metricsDoc) {
        Set<String> out = new TreeSet<>();
        Matcher m = Pattern.compile("(?m)^\\| `([a-z_:][a-z0-9_:]*)` \\| (\\w+) \\|")
            .matcher(metricsDoc);
        while (m.find()) {
            out.addAll(series(m.group(1), m.group(2)));
        }
        return out;
    }

    static Set<String> series(String family, String type) {
        return switch (type) {
            case "histogram" -> Set.of(family + "_bucket", family + "_sum", family + "_count");
            case "summary" -> Set.of(family, family + "_sum", family + "_count");
            default -> Set.of(family);
        };
    }

    /** The series names in a Prometheus text scrape: its samples, and what each TYPE line's family yields. */
    static Set<String> namesIn(String scrape) {
        Set<String> out = new TreeSet<>();
        for (String line : scrape.split("\n")) {
            if (line.startsWith("# TYPE ")) {
                String[] w = line.split(" ");
                out.addAll(series(w[2], w[3]));
            } else if (!line.isBlank() && !line.startsWith("#")) {
                int end = 0;
                while (end < line.length() && line.charAt(end) != '{' && line.charAt(end) != ' ') {
                    end++;
                }
                out.add(line.substring(0, end));
            }
        }
        return out;
    }

    /** The {@code kvgate_} names a text (PromQL, a dashboard, a rule file) references. */
    static Set<String> referencedIn(String text) {
        Set<String> out = new TreeSet<>();
        Matcher m = NAME.matcher(text);
        while (m.find()) {
            out.add(m.group());
        }
        return out;
    }

    /** The names the checked-in monitoring files reference. */
    static Set<String> referenced(Path repoRoot) throws IOException {
        Set<String> out = new TreeSet<>();
        for (String f : MONITORING_FILES) {
            out.addAll(referencedIn(Files.readString(repoRoot.resolve(f))));
        }
        return out;
    }

    /** The names in {@code text} that no listed family yields. */
    Set<String> unknownIn(String text) {
        Set<String> known = seriesNames();
        Set<String> out = new TreeSet<>(referencedIn(text));
        out.removeAll(known);
        return out;
    }
}
