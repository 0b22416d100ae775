package io.kvgate.tools.bench;

import com.fasterxml.jackson.core.JsonGenerator;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * What the engines themselves counted over a run ({@code --engine-metrics}): how the requests were spread over them
 * and how much of the prompt they served from cache, read from their Prometheus counters — the view a client of a
 * gateway (or of several gateway replicas behind a balancer) cannot have.
 *
 * <p>Counters read (every series of the name summed: DP ranks, finish reasons): finished requests
 * {@code vllm:request_success_total} (vLLM, by {@code finished_reason}) or {@code sglang:num_requests_total};
 * prompt tokens {@code vllm:prompt_tokens_total} / {@code sglang:prompt_tokens_total}; cached prompt tokens
 * {@code vllm:prefix_cache_hits_total} / {@code sglang:cached_tokens_total}. A snapshot is taken when the measured
 * window starts (before the run when there is no warm-up) and one after the run (drain included, counters settled).
 * With a warm-up, warm-up requests still in flight when the window opens are counted too (and on a loaded machine
 * those sent late): the engines' view is "requests finished in the window", a few more than the client counts.
 *
 * <p>Threading: snapshots are taken on the runner's thread (blocking HTTP, never the generator's event loop);
 * instances are immutable.
 */
public final class EngineShares {
    /** One engine's counters at one instant; {@code error} says why they could not be read (then the rest is -1). */
    record Counters(long requests, long promptTokens, long cachedTokens, String error) {
        static final Counters NONE = new Counters(-1, -1, -1, null);
    }

    /** One engine over the run. */
    public record Engine(String url, long requests, long promptTokens, long cachedTokens, String error) {
        /** This engine's share of the fleet's requests, in [0, 1] (NaN when unknown). */
        public double share(long total) {
            return requests < 0 || total <= 0 ? Double.NaN : (double) requests / total;
        }

        public double hitRatio() {
            return promptTokens <= 0 || cachedTokens < 0 ? Double.NaN : (double) cachedTokens / promptTokens;
        }
    }

    private static final HttpClient HTTP = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
        .connectTimeout(Duration.ofSeconds(3)).build();

    private final List<Engine> engines;

    EngineShares(List<Engine> engines) {
        this.engines = List.copyOf(engines);
    }

    public List<Engine> engines() {
        return engines;
    }

    /** Requests the engines finished in all (-1 when an engine's count is unknown). */
    public long totalRequests() {
        long sum = 0;
        for (Engine e : engines) {
            if (e.requests < 0) {
                return -1;
            }
            sum += e.requests;
        }
        return sum;
    }

    /**
     * The busiest engine's share of the requests over the mean share (1/N): 1.0 is a perfectly even spread, N is
     * everything on one engine. NaN when a count is unknown or nothing was counted.
     */
    public double busiestShareVsMean() {
        long total = totalRequests();
        if (total <= 0) {
            return Double.NaN;
        }
        long max = 0;
        for (Engine e : engines) {
            max = Math.max(max, e.requests);
        }
        return (double) max * engines.size() / total;
    }

    /** Σ cached / Σ prompt tokens over the engines (their own accounting), NaN when unknown. */
    public double hitRatio() {
        long prompt = 0;
        long cached = 0;
        for (Engine e : engines) {
            if (e.promptTokens < 0 || e.cachedTokens < 0) {
                return Double.NaN;
            }
            prompt += e.promptTokens;
            cached += e.cachedTokens;
        }
        return prompt == 0 ? Double.NaN : (double) cached / prompt;
    }

    /** A base URL as {@code --engine-metrics} accepts it (http://host:port[/path], no trailing slash). */
    static String checkUrl(String url) {
        URI u;
        try {
            u = URI.create(url.trim());
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("--engine-metrics '" + url + "' is not a URL: " + e.getMessage());
        }
        if (!"http".equals(u.getScheme()) || u.getHost() == null || u.getPort() <= 0 || u.getQuery() != null) {
            throw new IllegalArgumentException("--engine-metrics '" + url + "' must be http://host:port (an engine's base URL;"
                + " /metrics is appended)");
        }
        String s = u.toString();
        return s.endsWith("/") ? s.substring(0, s.length() - 1) : s;
    }

    /** Reads every engine's counters now (blocking, 5 s per engine at most). */
    static List<Counters> snapshot(List<String> urls) {
        List<Counters> out = new ArrayList<>(urls.size());
        for (String url : urls) {
            out.add(read(url));
        }
        return out;
    }

    private static Counters read(String url) {
        try {
            HttpResponse<String> r = HTTP.send(HttpRequest.newBuilder(URI.create(url + "/metrics")).timeout(Duration.ofSeconds(5))
                .GET().build(), HttpResponse.BodyHandlers.ofString());
            if (r.statusCode() != 200) {
                return new Counters(-1, -1, -1, "GET /metrics answered " + r.statusCode());
            }
            return parse(r.body());
        } catch (IOException e) {
            return new Counters(-1, -1, -1, "GET /metrics failed: " + e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return new Counters(-1, -1, -1, "interrupted");
        }
    }

    /** The counters of one Prometheus text page (vLLM or SGLang names). */
    static Counters parse(String text) {
        long[] requests = {-1};
        long[] prompt = {-1};
        long[] cached = {-1};
        for (String line : text.split("\n")) {
            if (line.isEmpty() || line.charAt(0) == '#') {
                continue;
            }
            int brace = line.indexOf('{');
            int space = line.lastIndexOf(' ');
            if (space <= 0) {
                continue;
            }
            String name = line.substring(0, brace > 0 && brace < space ? brace : space).trim();
            long[] into = switch (name) {
                case "vllm:request_success_total", "sglang:num_requests_total" -> requests;
                case "vllm:prompt_tokens_total", "sglang:prompt_tokens_total" -> prompt;
                case "vllm:prefix_cache_hits_total", "sglang:cached_tokens_total" -> cached;
                default -> null;
            };
            if (into == null) {
                continue;
            }
            double v;
            try {
                v = Double.parseDouble(line.substring(space + 1).trim());
            } catch (NumberFormatException e) {
                continue;
            }
            into[0] = Math.max(0, into[0]) + Math.round(v);
        }
        String error = requests[0] < 0 ? "no finished-request counter (vllm:request_success_total or sglang:num_requests_total)"
            : null;
        return new Counters(requests[0], prompt[0], cached[0], error);
    }

    /** The engines' counts between two snapshots of the same engines. */
    static EngineShares between(List<String> urls, List<Counters> before, List<Counters> after) {
        List<Engine> engines = new ArrayList<>(urls.size());
        for (int i = 0; i < urls.size(); i++) {
            Counters b = before.get(i);
            Counters a = after.get(i);
            String error = b.error() != null ? b.error() : a.error();
            // A counter that went down means the engine restarted during the run: all of its counters start from zero.
            boolean restarted = a.requests() < b.requests() || a.promptTokens() < b.promptTokens() || a.cachedTokens() < b.cachedTokens();
            engines.add(new Engine(urls.get(i), delta(b.requests(), a.requests(), restarted),
                delta(b.promptTokens(), a.promptTokens(), restarted), delta(b.cachedTokens(), a.cachedTokens(), restarted), error));
        }
        return new EngineShares(engines);
    }

    /** A counter's increase, -1 when unknown. */
    private static long delta(long before, long after, boolean restarted) {
        if (before < 0 || after < 0) {
            return -1;
        }
        return restarted ? after : after - before;
    }

    /**
     * Snapshots until two in a row agree (every 100 ms, at most {@code maxMs}): an engine counts a request when it
     * releases it, just after the answer's last byte, so the last requests of a run land a moment after it ended.
     */
    static List<Counters> settled(List<String> urls, long maxMs) throws InterruptedException {
        List<Counters> last = snapshot(urls);
        long deadline = System.nanoTime() + maxMs * 1_000_000L;
        while (System.nanoTime() < deadline) {
            Thread.sleep(100);
            List<Counters> next = snapshot(urls);
            if (next.equals(last)) {
                return next;
            }
            last = next;
        }
        return last;
    }

    void write(JsonGenerator g) throws IOException {
        g.writeObjectFieldStart("engines");
        long total = totalRequests();
        g.writeNumberField("requests", total);
        number(g, "busiest_share_vs_mean", busiestShareVsMean());
        number(g, "hit_ratio", hitRatio());
        g.writeArrayFieldStart("per_engine");
        for (Engine e : engines) {
            g.writeStartObject();
            g.writeStringField("url", e.url());
            g.writeNumberField("requests", e.requests());
            number(g, "share", e.share(total));
            g.writeNumberField("prompt_tokens", e.promptTokens());
            g.writeNumberField("cached_tokens", e.cachedTokens());
            number(g, "hit_ratio", e.hitRatio());
            if (e.error() != null) {
                g.writeStringField("error", e.error());
            }
            g.writeEndObject();
        }
        g.writeEndArray();
        g.writeEndObject();
    }

    private static void number(JsonGenerator g, String name, double v) throws IOException {
        if (Double.isNaN(v) || Double.isInfinite(v)) {
            g.writeNullField(name);
        } else {
            g.writeNumberField(name, Math.round(v * 10_000.0) / 10_000.0);
        }
    }

    /** Summary lines for the human report. */
    String summary() {
        StringBuilder sb = new StringBuilder();
        long total = totalRequests();
        sb.append(String.format(java.util.Locale.ROOT, "  engines: %d requests; busiest share / mean %.3f; engine cache hit %s%n",
            total, busiestShareVsMean(), Double.isNaN(hitRatio()) ? "-" : String.format(java.util.Locale.ROOT, "%.1f%%", 100 * hitRatio())));
        for (Engine e : engines) {
            sb.append(String.format(java.util.Locale.ROOT, "    %-28s %7d requests (%5.1f%%)  hit %s%s%n", e.url(), e.requests(),
                100 * e.share(total), Double.isNaN(e.hitRatio()) ? "-" : String.format(java.util.Locale.ROOT, "%.1f%%", 100 * e.hitRatio()),
                e.error() == null ? "" : "  (" + e.error() + ")"));
        }
        return sb.toString();
    }
}
