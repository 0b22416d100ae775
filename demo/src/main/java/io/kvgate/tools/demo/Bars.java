package io.kvgate.tools.demo;

import java.util.List;
import java.util.Locale;

/** A small side-by-side bar chart (SVG) of the policy comparison: hit ratio and TTFT p50/p90 per policy. */
final class Bars {
    private Bars() {}

    static String svg(List<String[]> rows, List<double[]> values, double bestHit) {
        int w = 900;
        int h = 380;
        int panelW = 400;
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT, "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' font-family='sans-serif' font-size='12'>%n", w, h));
        sb.append("<rect width='100%' height='100%' fill='white'/>\n");
        panel(sb, 40, "Engine prompt-cache hit ratio (%)", rows, values, 0, 100, bestHit, panelW);
        double maxTtft = 1;
        for (double[] v : values) {
            maxTtft = Math.max(maxTtft, v[2]);
        }
        panel(sb, 40 + panelW + 60, "TTFT p50 (light) / p90 (dark), ms", rows, values, 1, maxTtft * 1.1, -1, panelW);
        sb.append("</svg>\n");
        return sb.toString();
    }

    private static void panel(StringBuilder sb, int x0, String title, List<String[]> rows, List<double[]> values, int metric,
                              double max, double refLine, int panelW) {
        int top = 40;
        int height = 260;
        sb.append(String.format(Locale.ROOT, "<text x='%d' y='24' font-size='14'>%s</text>%n", x0, title));
        sb.append(String.format(Locale.ROOT, "<line x1='%d' y1='%d' x2='%d' y2='%d' stroke='black'/>%n", x0, top + height, x0 + panelW, top + height));
        int n = rows.size();
        int slot = panelW / Math.max(1, n);
        String[] colors = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"};
        for (int i = 0; i < n; i++) {
            double[] v = values.get(i);
            int bx = x0 + i * slot + slot / 6;
            int bw = slot * 2 / 3;
            if (metric == 0) {
                bar(sb, bx, bw, v[0], max, top, height, colors[i % colors.length], 1.0);
                label(sb, bx + bw / 2, top + height - (int) (v[0] / max * height) - 4, String.format(Locale.ROOT, "%.1f", v[0]));
            } else {
                bar(sb, bx, bw / 2, v[1], max, top, height, colors[i % colors.length], 0.45);
                bar(sb, bx + bw / 2, bw / 2, v[2], max, top, height, colors[i % colors.length], 1.0);
                label(sb, bx + bw * 3 / 4, top + height - (int) (v[2] / max * height) - 4, String.format(Locale.ROOT, "%.0f", v[2]));
            }
            sb.append(String.format(Locale.ROOT, "<text x='%d' y='%d' text-anchor='middle'>%s</text>%n", bx + bw / 2, top + height + 16, rows.get(i)[0]));
        }
        if (refLine >= 0) {
            int y = top + height - (int) (refLine / max * height);
            sb.append(String.format(Locale.ROOT, "<line x1='%d' y1='%d' x2='%d' y2='%d' stroke='gray' stroke-dasharray='4,3'/>%n", x0, y, x0 + panelW, y));
            sb.append(String.format(Locale.ROOT, "<text x='%d' y='%d' fill='gray'>best possible %.1f</text>%n", x0 + 4, y - 4, refLine));
        }
    }

    private static void bar(StringBuilder sb, int x, int w, double v, double max, int top, int height, String color, double opacity) {
        int bh = (int) Math.round(Math.min(v, max) / max * height);
        sb.append(String.format(Locale.ROOT, "<rect x='%d' y='%d' width='%d' height='%d' fill='%s' fill-opacity='%.2f'/>%n",
            x, top + height - bh, w, bh, color, opacity));
    }

    private static void label(StringBuilder sb, int x, int y, String text) {
        sb.append(String.format(Locale.ROOT, "<text x='%d' y='%d' text-anchor='middle'>%s</text>%n", x, y, text));
    }
}
