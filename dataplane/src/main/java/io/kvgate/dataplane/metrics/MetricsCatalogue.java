package io.kvgate.dataplane.metrics;

import io.prometheus.metrics.model.registry.Collector;
import io.prometheus.metrics.model.registry.MetricType;
import io.prometheus.metrics.model.registry.MultiCollector;
import io.prometheus.metrics.model.snapshots.CounterSnapshot;
import io.prometheus.metrics.model.snapshots.DataPointSnapshot;
import io.prometheus.metrics.model.snapshots.GaugeSnapshot;
import io.prometheus.metrics.model.snapshots.HistogramSnapshot;
import io.prometheus.metrics.model.snapshots.InfoSnapshot;
import io.prometheus.metrics.model.snapshots.MetricFamilyDescriptor;
import io.prometheus.metrics.model.snapshots.MetricSnapshot;
import io.prometheus.metrics.model.snapshots.SummarySnapshot;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.TreeSet;

/**
 * The family catalogue of {@code docs/metrics.md}: one Markdown table row per family a gateway registers (name as
 * scraped, type, labels, help), generated from the registry so the page cannot drift from the code.
 */
public final class MetricsCatalogue {
    /** Marks the generated table in {@code docs/metrics.md}; the text around it is written by hand. */
    public static final String BEGIN = "<!-- families:begin (generated: see docs/development.md) -->";
    public static final String END = "<!-- families:end -->";

    /** One family. */
    public record Family(String name, String type, List<String> labels, String help) {
        String row() {
            return "| `" + name + "` | " + type + " | " + (labels.isEmpty() ? "" : "`" + String.join("`, `", labels) + "`")
                + " | " + help.replace("|", "\\|") + " |";
        }
    }

    private MetricsCatalogue() {}

    /** Every family of {@code registry}, by name. */
    public static List<Family> families(FamilyRegistry registry) {
        List<Family> out = new ArrayList<>();
        for (Collector c : registry.collectors()) {
            out.add(family(c.getMetricFamilyDescriptor()));
        }
        // A multi-collector (the JVM instrumentation) names its families only on scrape: they always have samples.
        for (MultiCollector m : registry.multiCollectors()) {
            for (MetricSnapshot s : m.collect()) {
                out.add(family(s));
            }
        }
        out.sort(Comparator.comparing(Family::name));
        return out;
    }

    private static Family family(MetricFamilyDescriptor d) {
        String name = d.getPrometheusName();
        String type = d.getType().name().toLowerCase(Locale.ROOT);
        if (d.getType() == MetricType.COUNTER) {
            name += "_total";
        } else if (d.getType() == MetricType.INFO) {
            name += "_info";
        }
        return new Family(name, type, List.copyOf(new TreeSet<>(d.getLabelNames())), d.getMetadata().getHelp());
    }

    private static Family family(MetricSnapshot s) {
        String name = s.getMetadata().getPrometheusName();
        String type = switch (s) {
            case CounterSnapshot c -> "counter";
            case GaugeSnapshot g -> "gauge";
            case HistogramSnapshot h -> "histogram";
            case SummarySnapshot u -> "summary";
            case InfoSnapshot i -> "info";
            default -> "unknown";
        };
        name += switch (type) {
            case "counter" -> "_total";
            case "info" -> "_info";
            default -> "";
        };
        TreeSet<String> labels = new TreeSet<>();
        for (DataPointSnapshot p : s.getDataPoints()) {
            p.getLabels().forEach(l -> labels.add(l.getName()));
        }
        String help = s.getMetadata().getHelp();
        return new Family(name, type, List.copyOf(labels), help == null ? "" : help);
    }

    /** The generated part of {@code docs/metrics.md}: the markers and the table between them. */
    public static String table(List<Family> families) {
        StringBuilder b = new StringBuilder(BEGIN).append("\n\n| Family | Type | Labels | Help |\n|---|---|---|---|\n");
        for (Family f : families) {
            b.append(f.row()).append('\n');
        }
        return b.append('\n').append(END).toString();
    }

    /** {@code page} with its generated table replaced by {@code table} (appended when it has none yet). */
    public static String withTable(String page, String table) {
        int a = page.indexOf(BEGIN);
        int z = page.indexOf(END);
        if (a < 0 || z < a) {
            return page + (page.endsWith("\n") ? "\n" : "\n\n") + table + "\n";
        }
        return page.substring(0, a) + table + page.substring(z + END.length());
    }

    /** The generated table {@code page} holds now, or null when it has none. */
    public static String tableOf(String page) {
        int a = page.indexOf(BEGIN);
        int z = page.indexOf(END);
        return a < 0 || z < a ? null : page.substring(a, z + END.length());
    }
}
