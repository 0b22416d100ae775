package io.kvgate.tools.sim;

import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import io.kvgate.tools.sim.SimulatorConfig.Role;
import java.util.Locale;

/**
 * The engine's Prometheus {@code /metrics} page in its dialect, read from the live admission queues and caches, so
 * a gateway that scrapes it sees the load it would see on a real fleet:
 * <ul>
 *   <li>vLLM (v1 engine): {@code vllm:num_requests_running}, {@code vllm:num_requests_waiting},
 *       {@code vllm:kv_cache_usage_perc} (fraction 0..1; {@code vllm:gpu_cache_usage_perc} on older builds,
 *       {@code --legacy-metrics}), one series per engine core labelled {@code engine="<dp rank>"} and
 *       {@code model_name};</li>
 *   <li>SGLang ({@code --enable-metrics}): {@code sglang:num_running_reqs}, {@code sglang:num_queue_reqs},
 *       {@code sglang:token_usage} (fraction 0..1), one series per scheduler labelled {@code model_name},
 *       {@code engine_type}, {@code tp_rank}, {@code pp_rank}, and {@code dp_rank} when data parallelism is on;</li>
 *   <li>TensorRT-LLM ({@code /prometheus/metrics}, mounted with {@code return_perf_metrics}): the gauges
 *       tensorrt_llm/metrics/collector.py's {@code log_iteration_stats} sets from the iteration statistics,
 *       {@code trtllm_num_requests_running} (numActiveRequests), {@code trtllm_num_requests_waiting}
 *       (numQueuedRequests), {@code trtllm_kv_cache_utilization} (usedNumBlocks / maxNumBlocks),
 *       {@code trtllm_kv_cache_tokens_per_block}, {@code trtllm_kv_cache_max_blocks}, labelled as OpenAIServer creates
 *       its collector ({@code model_name="undefined"}, {@code engine_type="undefined"}) plus the {@code pid} label
 *       of prometheus_client's multiprocess collector, which serves the page. One series per server: the simulator
 *       writes its totals over DP ranks (the fullest rank's usage).</li>
 * </ul>
 * Counters: prompt, generation and cached tokens; finished requests ({@code vllm:request_success_total} by
 * {@code finished_reason} stop|length|abort; {@code sglang:num_requests_total}), what a load generator reads to
 * know each engine's share of the requests ({@code ./kvgate bench --engine-metrics}).
 * Gauges are printed as floats, like prometheus_client. Token counters are engine-wide. Engine-loop confined.
 */
final class EngineMetrics {
    private final SimulatorConfig config;
    private final Admission admission;
    private final RankCaches caches;
    private final SimStats stats;

    /** llama.cpp: the slots' cache usage (null for the other dialects). */
    private final java.util.function.DoubleSupplier llamaUsage;

    EngineMetrics(SimulatorConfig config, Admission admission, RankCaches caches, SimStats stats,
                  java.util.function.DoubleSupplier llamaUsage) {
        this.llamaUsage = llamaUsage;
        this.config = config;
        this.admission = admission;
        this.caches = caches;
        this.stats = stats;
    }

    String render() {
        StringBuilder sb = new StringBuilder(2048);
        int ranks = caches.ranks();
        String model = config.model.replace("\\", "\\\\").replace("\"", "\\\"");
        if (config.dialect == Dialect.VLLM) {
            String[] labels = new String[ranks];
            for (int r = 0; r < ranks; r++) {
                labels[r] = "{engine=\"" + r + "\",model_name=\"" + model + "\"}";
            }
            gauge(sb, "vllm:num_requests_running", "Number of requests in model execution batches.", labels,
                Kind.RUNNING);
            gauge(sb, "vllm:num_requests_waiting", "Number of requests waiting to be processed.", labels,
                Kind.WAITING);
            gauge(sb, config.legacyMetrics ? "vllm:gpu_cache_usage_perc" : "vllm:kv_cache_usage_perc",
                "KV-cache usage. 1 means 100 percent usage.", labels, Kind.CACHE);
            String engineLabel = "{engine=\"0\",model_name=\"" + model + "\"}";
            counter(sb, "vllm:prompt_tokens_total", engineLabel, stats.get("prompt_tokens"));
            counter(sb, "vllm:generation_tokens_total", engineLabel, stats.get("completion_tokens"));
            counter(sb, "vllm:prefix_cache_queries_total", engineLabel, stats.get("prompt_tokens"));
            counter(sb, "vllm:prefix_cache_hits_total", engineLabel, stats.get("cached_tokens"));
            for (String reason : FINISHED_REASONS) {
                counter(sb, "vllm:request_success_total", "{engine=\"0\",finished_reason=\"" + reason + "\",model_name=\""
                    + model + "\"}", stats.get("finished_" + reason));
            }
        } else if (config.dialect == Dialect.LLAMACPP) {
            // llama-server --metrics
            gaugeValue(sb, "llamacpp:requests_processing", "Number of requests processing.", admission.totalRunning());
            gaugeValue(sb, "llamacpp:requests_deferred", "Number of requests deferred.", admission.totalWaiting());
            gaugeValue(sb, "llamacpp:kv_cache_usage_ratio", "KV-cache usage. 1 means 100 percent usage.",
                llamaUsage == null ? 0 : llamaUsage.getAsDouble());
            counter(sb, "llamacpp:prompt_tokens_total", "", stats.get("prompt_tokens"));
            counter(sb, "llamacpp:tokens_predicted_total", "", stats.get("completion_tokens"));
        } else if (config.dialect == Dialect.SGLANG) {
            String engineType = config.role == Role.BOTH ? "unified" : config.role.name().toLowerCase(Locale.ROOT);
            String[] labels = new String[ranks];
            for (int r = 0; r < ranks; r++) {
                labels[r] = "{model_name=\"" + model + "\",engine_type=\"" + engineType
                    + "\",tp_rank=\"0\",pp_rank=\"0\"" + (ranks > 1 ? ",dp_rank=\"" + r + "\"" : "") + "}";
            }
            gauge(sb, "sglang:num_running_reqs", "The number of running requests.", labels, Kind.RUNNING);
            gauge(sb, "sglang:num_queue_reqs", "The number of requests in the waiting queue.", labels, Kind.WAITING);
            gauge(sb, "sglang:token_usage", "The token usage.", labels, Kind.CACHE);
            String plain = "{model_name=\"" + model + "\"}";
            counter(sb, "sglang:prompt_tokens_total", plain, stats.get("prompt_tokens"));
            counter(sb, "sglang:generation_tokens_total", plain, stats.get("completion_tokens"));
            counter(sb, "sglang:cached_tokens_total", plain, stats.get("cached_tokens"));
            counter(sb, "sglang:num_requests_total", plain, stats.get("generations_finished"));
        } else if (config.dialect == Dialect.TRTLLM) {
            String labels = "{engine_type=\"undefined\",model_name=\"undefined\",pid=\"" + ProcessHandle.current().pid()
                + "\"}";
            double usage = 0;
            for (int r = 0; r < ranks; r++) {
                usage = Math.max(usage, caches.usage(r));
            }
            trtllmGauge(sb, "trtllm_num_requests_running", labels, admission.totalRunning());
            trtllmGauge(sb, "trtllm_num_requests_waiting", labels, admission.totalWaiting());
            trtllmGauge(sb, "trtllm_kv_cache_utilization", labels, usage);
            trtllmGauge(sb, "trtllm_kv_cache_tokens_per_block", labels, caches.blockSize());
            trtllmGauge(sb, "trtllm_kv_cache_max_blocks", labels, config.cacheBlocks);
            counter(sb, "trtllm_prompt_tokens_total", "{engine_type=\"undefined\",model_name=\"undefined\"}",
                stats.get("prompt_tokens"));
            counter(sb, "trtllm_generation_tokens_total", "{engine_type=\"undefined\",model_name=\"undefined\"}",
                stats.get("completion_tokens"));
        }
        return sb.toString();
    }

    private enum Kind { RUNNING, WAITING, CACHE }

    /** vLLM's finish reasons as {@code vllm:request_success_total} labels them (every series is always present). */
    private static final String[] FINISHED_REASONS = {"stop", "length", "abort"};

    private void gauge(StringBuilder sb, String name, String help, String[] labels, Kind kind) {
        sb.append("# HELP ").append(name).append(' ').append(help).append('\n');
        sb.append("# TYPE ").append(name).append(" gauge\n");
        for (int r = 0; r < labels.length; r++) {
            double v = switch (kind) {
                case RUNNING -> admission.running(r);
                case WAITING -> admission.waiting(r);
                case CACHE -> caches.usage(r);
            };
            sb.append(name).append(labels[r]).append(' ').append(v).append('\n');
        }
    }

    private static void gaugeValue(StringBuilder sb, String name, String help, double value) {
        sb.append("# HELP ").append(name).append(' ').append(help).append('\n');
        sb.append("# TYPE ").append(name).append(" gauge\n");
        sb.append(name).append(' ').append(value).append('\n');
    }

    /** prometheus_client's multiprocess collector writes "Multiprocess metric" as every family's help. */
    private static void trtllmGauge(StringBuilder sb, String name, String labels, double value) {
        sb.append("# HELP ").append(name).append(" Multiprocess metric\n");
        sb.append("# TYPE ").append(name).append(" gauge\n");
        sb.append(name).append(labels).append(' ').append(value).append('\n');
    }

    private static void counter(StringBuilder sb, String name, String label, long value) {
        sb.append("# TYPE ").append(name).append(" counter\n");
        sb.append(name).append(label).append(' ').append((double) value).append('\n');
    }
}
