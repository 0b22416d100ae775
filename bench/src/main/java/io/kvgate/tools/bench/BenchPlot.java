package io.kvgate.tools.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramIterationValue;

/**
 * Writes the run's plot as a standalone SVG (no plotting library): one panel per metric (end-to-end latency, time to
 * first token, inter-token latency) with one percentile curve per target, on the HdrHistogram-style x axis
 * {@code log10(1 / (1 - percentile))} (0%, 90%, 99%, 99.9%, ... evenly spaced, as far as the sample count
 * resolves: a curve of n samples ends at percentile 1 - 1/n, at its maximum) and a linear millisecond y axis;
 * in compare mode also a grouped bar chart of TTFT p50/p90/p99 per target and one of throughput per target.
 *
 * <p>Threading: stateless, thread-safe.
 */
final class BenchPlot {
    private static final String[] COLORS = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"};
    private static final int WIDTH = 960;
    private static final int PANEL_HEIGHT = 320;
    private static final int LEFT = 80;
    private static final int RIGHT = 200;
    private static final int TOP = 40;
    private static final int BOTTOM = 50;
    private static final int MAX_NINES = 5; // 99.999%

    private BenchPlot() {}

    static String svg(BenchReport report) {
        List<TargetReport> targets = report.targets();
        BenchConfig c = report.config();
        List<String> panels = new ArrayList<>();
        addCurves(panels, "End-to-end latency (ms, from intended start)", targets, 0);
        addCurves(panels, c.stream() ? "Time to first token (ms, from intended start)" : "Time to first byte (ms, from intended start)", targets, 1);
        addCurves(panels, "Inter-token latency (ms, between content frames)", targets, 2);
        if (targets.size() > 1) {
            panels.add(bars("TTFT by target (ms)", targets, new String[] {"p50", "p90", "p99"}, false));
            panels.add(bars("Throughput by target", targets, new String[] {"achieved req/s", "output tokens/s"}, true));
        }
        int height = 50 + panels.size() * PANEL_HEIGHT;
        StringBuilder sb = new StringBuilder(32_768);
        sb.append(String.format(Locale.ROOT, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            + "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"12\">%n", WIDTH, height, WIDTH, height));
        sb.append(String.format(Locale.ROOT, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>%n", WIDTH, height));
        String mode = c.closedLoop() ? "closed loop, " + c.connections() + " connections"
            : String.format(Locale.ROOT, "open loop, %s %s req/s", BenchConfig.cliName(c.arrival()), trim(c.ratePerS()));
        sb.append(String.format(Locale.ROOT, "<text x=\"%d\" y=\"28\" font-size=\"16\" font-weight=\"bold\">%s</text>%n", LEFT,
            esc("kvgate bench: " + BenchConfig.cliName(c.workload()) + ", " + mode + ", " + trim(c.durationS()) + " s, model "
                + c.model() + (c.stream() ? ", stream" : ""))));
        for (int i = 0; i < panels.size(); i++) {
            sb.append(String.format(Locale.ROOT, "<g transform=\"translate(0,%d)\">%n", 40 + i * PANEL_HEIGHT));
            sb.append(panels.get(i));
            sb.append("</g>\n");
        }
        sb.append("</svg>\n");
        return sb.toString();
    }

    private static Histogram histogram(TargetReport t, int metric) {
        return switch (metric) {
            case 0 -> t.latencyUs;
            case 1 -> t.ttftUs;
            default -> t.itlUs;
        };
    }

    private static void addCurves(List<String> panels, String title, List<TargetReport> targets, int metric) {
        double maxMs = 0;
        boolean any = false;
        for (TargetReport t : targets) {
            Histogram h = histogram(t, metric);
            if (h.getTotalCount() > 0) {
                any = true;
                maxMs = Math.max(maxMs, h.getMaxValue() / 1e3);
            }
        }
        if (!any) {
            return;
        }
        double[] ticks = niceTicks(maxMs);
        double yMax = ticks[ticks.length - 1];
        int plotW = WIDTH - LEFT - RIGHT;
        int plotH = PANEL_HEIGHT - TOP - BOTTOM;
        // The x axis goes as far as the data can say anything: n samples resolve percentiles up to 1 - 1/n.
        long maxCount = 0;
        for (TargetReport t : targets) {
            maxCount = Math.max(maxCount, histogram(t, metric).getTotalCount());
        }
        int nines = (int) Math.max(2, Math.min(MAX_NINES, Math.ceil(Math.log10(Math.max(1, maxCount)))));
        StringBuilder sb = new StringBuilder(8192);
        sb.append(String.format(Locale.ROOT, "<text x=\"%d\" y=\"%d\" font-size=\"14\">%s</text>%n", LEFT, TOP - 12, esc(title)));
        axes(sb, plotW, plotH, ticks, yMax);
        String[] xLabels = {"0%", "90%", "99%", "99.9%", "99.99%", "99.999%"};
        for (int k = 0; k <= nines; k++) {
            double x = LEFT + plotW * (double) k / nines;
            sb.append(String.format(Locale.ROOT, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>%n", x, TOP, x, TOP + plotH));
            sb.append(String.format(Locale.ROOT, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>%n", x, TOP + plotH + 18, xLabels[k]));
        }
        sb.append(String.format(Locale.ROOT, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#444\">percentile</text>%n",
            LEFT + plotW / 2, TOP + plotH + 38));
        int legendY = TOP + 10;
        for (int i = 0; i < targets.size(); i++) {
            TargetReport t = targets.get(i);
            Histogram h = histogram(t, metric);
            if (h.getTotalCount() == 0) {
                continue;
            }
            String color = COLORS[i % COLORS.length];
            StringBuilder points = new StringBuilder();
            // This target's curve ends where its own sample count stops resolving percentiles (at its max value).
            double xEnd = Math.min(nines, Math.log10(Math.max(10, h.getTotalCount())));
            for (HistogramIterationValue v : h.percentiles(5)) {
                double q = v.getPercentileLevelIteratedTo() / 100.0;
                double x = q >= 1 ? xEnd : Math.min(xEnd, Math.log10(1 / (1 - q)));
                double y = v.getValueIteratedTo() / 1e3;
                points.append(String.format(Locale.ROOT, "%.1f,%.1f ", LEFT + plotW * x / nines, TOP + plotH - plotH * Math.min(y, yMax) / yMax));
                if (x >= xEnd) {
                    break;
                }
            }
            sb.append(String.format(Locale.ROOT, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"%s\"/>%n", color, points.toString().trim()));
            sb.append(String.format(Locale.ROOT, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"4\" fill=\"%s\"/>%n", WIDTH - RIGHT + 12, legendY - 4, color));
            sb.append(String.format(Locale.ROOT, "<text x=\"%d\" y=\"%d\">%s</text>%n", WIDTH - RIGHT + 32, legendY, esc(t.label)));
            sb.append(String.format(Locale.ROOT, "<text x=\"%d\" y=\"%d\" font-size=\"10\" fill=\"#444\">p50 %s  p99 %s ms</text>%n",
                WIDTH - RIGHT + 32, legendY + 14, trim(h.getValueAtPercentile(50) / 1e3), trim(h.getValueAtPercentile(99) / 1e3)));
            legendY += 36;
        }
        panels.add(sb.toString());
    }

    private static void axes(StringBuilder sb, int plotW, int plotH, double[] ticks, double yMax) {
        for (double t : ticks) {
            double y = TOP + plotH - plotH * t / yMax;
            sb.append(String.format(Locale.ROOT, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>%n", LEFT, y, LEFT + plotW, y));
            sb.append(String.format(Locale.ROOT, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>%n", LEFT - 6, y + 4, trim(t)));
        }
        sb.append(String.format(Locale.ROOT, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#333\"/>%n", LEFT, TOP, plotW, plotH));
    }

    private static void bars(StringBuilder sb, double[] values, String color, double x0, double barW, double yMax, int plotH) {
        for (int k = 0; k < values.length; k++) {
            double v = Double.isNaN(values[k]) ? 0 : values[k];
            double h = plotH * Math.min(v, yMax) / yMax;
            double x = x0 + k * barW;
            sb.append(String.format(Locale.ROOT, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>%n",
                x, TOP + plotH - h, barW * 0.9, h, color));
            sb.append(String.format(Locale.ROOT, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"10\">%s</text>%n",
                x + barW * 0.45, TOP + plotH - h - 4, Double.isNaN(values[k]) ? "n/a" : trim(values[k])));
        }
    }

    /** Grouped bars: one group per metric, one bar per target (throughput: each metric on its own scale). */
    private static String bars(String title, List<TargetReport> targets, String[] groups, boolean throughput) {
        int plotW = WIDTH - LEFT - RIGHT;
        int plotH = PANEL_HEIGHT - TOP - BOTTOM;
        StringBuilder sb = new StringBuilder(4096);
        sb.append(String.format(Locale.ROOT, "<text x=\"%d\" y=\"%d\" font-size=\"14\">%s</text>%n", LEFT, TOP - 12, esc(title)));
        double groupW = (double) plotW / groups.length;
        double barW = groupW * 0.8 / targets.size();
        double[][] values = new double[groups.length][targets.size()];
        for (int g = 0; g < groups.length; g++) {
            for (int i = 0; i < targets.size(); i++) {
                TargetReport t = targets.get(i);
                values[g][i] = throughput ? (g == 0 ? t.achievedRps : t.outputTokensPerS)
                    : BenchReport.p(t.ttftMs, g == 0 ? 50 : g == 1 ? 90 : 99);
            }
        }
        double shared = 0;
        for (double[] row : values) {
            for (double v : row) {
                if (!Double.isNaN(v)) {
                    shared = Math.max(shared, v);
                }
            }
        }
        if (!throughput) {
            double[] ticks = niceTicks(shared);
            axes(sb, plotW, plotH, ticks, ticks[ticks.length - 1]);
        } else {
            sb.append(String.format(Locale.ROOT, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#333\"/>%n", LEFT, TOP, plotW, plotH));
        }
        for (int g = 0; g < groups.length; g++) {
            double yMax;
            if (throughput) {
                double m = 0;
                for (double v : values[g]) {
                    if (!Double.isNaN(v)) {
                        m = Math.max(m, v);
                    }
                }
                double[] ticks = niceTicks(m);
                yMax = ticks[ticks.length - 1];
            } else {
                double[] ticks = niceTicks(shared);
                yMax = ticks[ticks.length - 1];
            }
            double x0 = LEFT + g * groupW + groupW * 0.1;
            for (int i = 0; i < targets.size(); i++) {
                bars(sb, new double[] {values[g][i]}, COLORS[i % COLORS.length], x0 + i * barW, barW, yMax, plotH);
            }
            sb.append(String.format(Locale.ROOT, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>%n",
                LEFT + g * groupW + groupW / 2, TOP + plotH + 18, esc(groups[g] + (throughput ? " (own scale)" : ""))));
        }
        int legendY = TOP + 10;
        for (int i = 0; i < targets.size(); i++) {
            sb.append(String.format(Locale.ROOT, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"10\" fill=\"%s\"/>%n",
                WIDTH - RIGHT + 12, legendY - 9, COLORS[i % COLORS.length]));
            sb.append(String.format(Locale.ROOT, "<text x=\"%d\" y=\"%d\">%s</text>%n", WIDTH - RIGHT + 32, legendY, esc(targets.get(i).label)));
            legendY += 20;
        }
        return sb.toString();
    }

    /** 0 and round steps (1, 2, 5 x 10^k) up to at least {@code max}; at most ~6 ticks. */
    static double[] niceTicks(double max) {
        if (!(max > 0)) {
            max = 1;
        }
        double raw = max / 5;
        double mag = Math.pow(10, Math.floor(Math.log10(raw)));
        double step = raw / mag <= 1 ? mag : raw / mag <= 2 ? 2 * mag : raw / mag <= 5 ? 5 * mag : 10 * mag;
        int n = (int) Math.ceil(max / step - 1e-9);
        double[] ticks = new double[n + 1];
        for (int i = 0; i <= n; i++) {
            ticks[i] = i * step;
        }
        return ticks;
    }

    static String trim(double v) {
        if (Double.isNaN(v)) {
            return "n/a";
        }
        if (v == Math.rint(v) && Math.abs(v) < 1e12) {
            return Long.toString((long) v);
        }
        double a = Math.abs(v);
        String s = a >= 100 ? String.format(Locale.ROOT, "%.0f", v) : a >= 10 ? String.format(Locale.ROOT, "%.1f", v)
            : a >= 1 ? String.format(Locale.ROOT, "%.2f", v) : String.format(Locale.ROOT, "%.3f", v);
        return s;
    }

    static String esc(String s) {
        return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\"", "&quot;");
    }
}
