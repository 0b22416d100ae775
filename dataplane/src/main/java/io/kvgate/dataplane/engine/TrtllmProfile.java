package io.kvgate.dataplane.engine;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.control.config.RuleConfig;
import java.util.List;

/**
 * TensorRT-LLM ({@code trtllm-serve}): vLLM's request spellings, its own P/D protocol, a Prometheus load page at
 * {@code /prometheus/metrics}, no probes.
 */
public final class TrtllmProfile implements EngineProfile {
    public static final TrtllmProfile INSTANCE = new TrtllmProfile();

    /**
     * trtllm-serve mounts {@code /prometheus/metrics} when {@code return_perf_metrics} is on; the gauges come from its
     * iteration statistics ({@code enable_iter_perf_stats}), as tensorrt_llm/metrics/collector.py's
     * {@code log_iteration_stats} sets them: {@code numActiveRequests}, {@code numQueuedRequests},
     * {@code usedNumBlocks / maxNumBlocks} and {@code tokensPerBlock}. Every series carries {@code model_name} and
     * {@code engine_type}, and {@code pid} (prometheus_client's multiprocess collector); no DP rank label.
     */
    private static final LoadMetrics LOAD = new LoadMetrics(List.of("trtllm_num_requests_running"),
        List.of("trtllm_num_requests_waiting"), List.of("trtllm_kv_cache_utilization"), null, "/prometheus/metrics",
        List.of("trtllm_kv_cache_tokens_per_block"));

    private TrtllmProfile() {}

    @Override
    public RuleConfig.Engine kind() {
        return RuleConfig.Engine.TRTLLM;
    }

    @Override
    public String name() {
        return "trtllm";
    }

    @Override
    public boolean needsTemperatureFloor() {
        return false;
    }

    @Override
    public String stopStringMember() {
        return "include_stop_str_in_output";
    }

    @Override
    public boolean nullsEmptyLogitBias() {
        return false;
    }

    /** Greedy decoding allows one return sequence. */
    @Override
    public boolean refusesGreedyN() {
        return true;
    }

    @Override
    public boolean putsExtrasOnLastChunk() {
        return false;
    }

    @Override
    public String metricsFix() {
        return "start trtllm-serve with return_perf_metrics: true and enable_iter_perf_stats: true in"
            + " --extra_llm_api_options (mounts /prometheus/metrics with the trtllm_num_requests_* gauges)";
    }

    @Override
    public boolean servesOwnRender() {
        return false;
    }

    @Override
    public boolean namesAdapterInLoraPath() {
        return false;
    }

    @Override
    public boolean refusesExactContextFill() {
        return false;
    }

    @Override
    public PdProtocol pdProtocol() {
        return PdProtocol.DISAGGREGATED_PARAMS;
    }

    @Override
    public boolean decodeServesAlone() {
        return true;
    }

    /** No wording of its own is recognised (the other engines' still are: an error body does not name its engine). */
    @Override
    public boolean statesContextOverflow(String message) {
        return false;
    }

    /** {@code /health}: trtllm-serve's route beside {@code /metrics} and {@code /version}. */
    @Override
    public String healthPath() {
        return "/health";
    }

    @Override
    public boolean answers503WhileLoading() {
        return false;
    }

    @Override
    public boolean listsAdapterCards() {
        return false;
    }

    @Override
    public String routesPath() {
        return null;
    }

    @Override
    public MountedRoutes mountedRoutes(JsonNode body) {
        return null;
    }

    @Override
    public String toolCallParser(JsonNode body) {
        return null;
    }

    /** Its model card has no context length and nothing else states one: rules set {@code max_model_len}. */
    @Override
    public String contextPath() {
        return null;
    }

    @Override
    public int contextLength(JsonNode body) {
        return 0;
    }

    /** Its {@code /metrics} is JSON iteration statistics; the Prometheus page is {@code /prometheus/metrics}. */
    @Override
    public LoadMetrics loadMetrics() {
        return LOAD;
    }

    /** The tokenizer's templates: it takes no {@code --chat-template} file. */
    @Override
    public TemplateRules templates() {
        return TemplateRules.TOKENIZER_ONLY;
    }

    /** It serves one model per process: no router role. */
    @Override
    public boolean statesRouterRole(JsonNode body) {
        return false;
    }

    /** Its cards carry no load state: a listed model is served. */
    @Override
    public boolean cardReady(JsonNode card) {
        return true;
    }

    /** Its drained stored blocks name {@code cache_salt} and {@code lora_id}. */
    @Override
    public boolean namesBlockNamespaces() {
        return true;
    }
}
