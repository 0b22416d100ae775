package io.kvgate.dataplane.engine;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.control.config.RuleConfig;
import java.util.List;
import java.util.function.UnaryOperator;

/**
 * vLLM ({@code vllm serve}): the reference dialect. Sources named per fact: vllm/sampling_params.py,
 * vllm/entrypoints/openai/api_server.py, vllm/v1/metrics/loggers.py.
 */
public final class VllmProfile implements EngineProfile {
    public static final VllmProfile INSTANCE = new VllmProfile();
    private static final LoadMetrics LOAD = new LoadMetrics(List.of("vllm:num_requests_running"),
        List.of("vllm:num_requests_waiting"),
        // Older builds: vllm:gpu_cache_usage_perc.
        List.of("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        // PrometheusStatLogger labels every series with model_name and engine (the DP rank of the engine core).
        "engine");
    // A template file is rendered as read (the --chat-template file's text).
    private static final TemplateRules TEMPLATES = new TemplateRules(UnaryOperator.identity(), false, true);

    private VllmProfile() {}

    @Override
    public RuleConfig.Engine kind() {
        return RuleConfig.Engine.VLLM;
    }

    @Override
    public String name() {
        return "vllm";
    }

    /** Its own floor: it raises (0, 0.01) to 0.01 itself (with a warning). */
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

    /** "n must be 1 when using greedy sampling" (SamplingParams._verify_greedy_sampling). */
    @Override
    public boolean refusesGreedyN() {
        return true;
    }

    /** The adapter is the request's {@code model} (its served LoRA name). */
    @Override
    public boolean putsExtrasOnLastChunk() {
        return false;
    }

    @Override
    public String metricsFix() {
        return "start vLLM without --disable-log-stats";
    }

    @Override
    public boolean servesOwnRender() {
        return true;
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
        return PdProtocol.KV_TRANSFER_PARAMS;
    }

    @Override
    public boolean continuesAssistantMessage() {
        return true;
    }

    @Override
    public boolean decodeServesAlone() {
        return true;
    }

    /**
     * Serving's "... exceeds model's maximum context length (Y)." and its older "... This model's maximum context
     * length is N tokens ...", the input processor's "The decoder prompt (length X) is longer than the maximum model
     * length of Y." (vLLM a556f3f).
     */
    @Override
    public boolean statesContextOverflow(String message) {
        return message.contains("maximum context length") || message.contains("longer than the maximum model length");
    }

    /** {@code /health}: its liveness route (200, or 503 once the engine core died). */
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
        return true;
    }

    /**
     * FastAPI's schema of the app, whose {@code paths} are the routes it mounted: the generation family only when
     * the model's supported tasks include generation, the pooling family otherwise ({@code build_app}). 404 when it
     * runs with {@code --disable-fastapi-docs}: unknown.
     */
    @Override
    public String routesPath() {
        return "/openapi.json";
    }

    @Override
    public MountedRoutes mountedRoutes(JsonNode body) {
        JsonNode paths = body.path("paths");
        return paths.isObject() ? new MountedRoutes(paths.has(MountedRoutes.CHAT_PATH), paths.has(MountedRoutes.COMPLETIONS_PATH)) : null;
    }

    @Override
    public String toolCallParser(JsonNode body) {
        return null;
    }

    /** Its model cards carry {@code max_model_len} (the effective {@code --max-model-len}). */
    @Override
    public String contextPath() {
        return null;
    }

    @Override
    public int contextLength(JsonNode body) {
        return 0;
    }

    @Override
    public LoadMetrics loadMetrics() {
        return LOAD;
    }

    @Override
    public TemplateRules templates() {
        return TEMPLATES;
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

    /** Its events carry the salt only inside extra_keys, which learned keys do not read. */
    @Override
    public boolean namesBlockNamespaces() {
        return false;
    }

    @Override
    public boolean takesCacheSalt() {
        return true;
    }
}
