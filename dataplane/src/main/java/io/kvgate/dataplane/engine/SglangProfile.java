package io.kvgate.dataplane.engine;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.control.config.RuleConfig;
import java.util.List;

/**
 * SGLang ({@code python -m sglang.launch_server}). Sources named per fact: sglang/srt/sampling,
 * sglang/srt/entrypoints/http_server.py, sglang/srt/managers/tokenizer_manager.py and scheduler.py,
 * sglang/srt/metrics/collector.py, TemplateManager.
 */
public final class SglangProfile implements EngineProfile {
    public static final SglangProfile INSTANCE = new SglangProfile();
    private static final LoadMetrics LOAD = new LoadMetrics(List.of("sglang:num_running_reqs"),
        List.of("sglang:num_queue_reqs"), List.of("sglang:token_usage"),
        // One series per scheduler; the collector adds dp_rank only when data parallelism is on.
        "dp_rank");
    private static final TemplateRules TEMPLATES = new TemplateRules(SglangProfile::chatTemplateText, true, false);

    private SglangProfile() {}

    @Override
    public RuleConfig.Engine kind() {
        return RuleConfig.Engine.SGLANG;
    }

    @Override
    public String name() {
        return "sglang";
    }

    /** It samples (0, 0.01) as sent and treats anything below 1e-6 as greedy. */
    @Override
    public boolean needsTemperatureFloor() {
        return true;
    }

    @Override
    public String stopStringMember() {
        return "no_stop_trim";
    }

    /** It builds its dense batch x vocabulary bias matrix as soon as one request has a non-null one, even {}. */
    @Override
    public boolean nullsEmptyLogitBias() {
        return true;
    }

    /** It answers n identical choices. */
    @Override
    public boolean refusesGreedyN() {
        return false;
    }

    /**
     * {@code _resolve_lora_path} reads {@code lora_path} when {@code model} has no {@code base:adapter} colon (rule
     * names never do on SGLang); the client's {@code model} is kept, so it echoes the adapter name as vLLM does.
     */
    @Override
    public boolean putsExtrasOnLastChunk() {
        return false;
    }

    @Override
    public String metricsFix() {
        return "start SGLang with --enable-metrics";
    }

    @Override
    public boolean servesOwnRender() {
        return false;
    }

    @Override
    public boolean namesAdapterInLoraPath() {
        return true;
    }

    /** It refuses {@code prompt + max_tokens >= context}. */
    @Override
    public boolean refusesExactContextFill() {
        return true;
    }

    @Override
    public PdProtocol pdProtocol() {
        return PdProtocol.BOOTSTRAP_ROOM;
    }

    /** A decode server cannot prefill without its prefill's bootstrap rendezvous. */
    @Override
    public boolean continuesAssistantMessage() {
        return true;
    }

    @Override
    public boolean decodeServesAlone() {
        return false;
    }

    /**
     * The tokenizer manager's "Requested token count exceeds the model's maximum context length ..." and "The input
     * (X tokens) is longer than the model's context length (Y tokens).", the scheduler's "Input length (X tokens)
     * exceeds the maximum allowed length (Y tokens)", and the chat handler's "max_completion_tokens is too large:
     * X.This model supports at most N completion tokens." (with {@code --context-length}; SGLang 7d89325).
     */
    @Override
    public boolean statesContextOverflow(String message) {
        return message.contains("maximum context length") || message.contains("model's context length")
            || message.contains("exceeds the maximum allowed length")
            || (message.startsWith("max_completion_tokens is too large") && message.contains("completion tokens"));
    }

    /**
     * {@code /health}: its light route; {@code /health_generate} runs a real one-token request and is the deep probe
     * a rule may opt into ({@code rules[].health.path}).
     */
    @Override
    public String healthPath() {
        return "/health";
    }

    @Override
    public boolean answers503WhileLoading() {
        return false;
    }

    /** Its {@code /v1/models} lists no adapters. */
    @Override
    public boolean listsAdapterCards() {
        return false;
    }

    /**
     * Its server arguments, {@code is_embedding} and {@code tool_call_parser} among them. It mounts every route
     * unconditionally, but an embedding server ({@code --is-embedding}) cannot generate.
     */
    @Override
    public String routesPath() {
        return "/server_info"; // the prober falls back to the deprecated /get_server_info on a 404
    }

    @Override
    public MountedRoutes mountedRoutes(JsonNode body) {
        JsonNode e = body.get("is_embedding");
        if (e == null || !e.isBoolean()) {
            return null;
        }
        return e.asBoolean() ? MountedRoutes.NONE : MountedRoutes.BOTH;
    }

    /** Its {@code --tool-call-parser} argument (null when it runs none). */
    @Override
    public String toolCallParser(JsonNode body) {
        if (!body.has("tool_call_parser")) {
            return null;
        }
        JsonNode v = body.get("tool_call_parser");
        return v.isTextual() ? v.asText() : v.isNull() ? "" : null;
    }

    /**
     * Newer servers state {@code max_model_len} on the model card ({@code model_config.context_len}, since
     * sgl-project/sglang#4809); older ones only in the server arguments' {@code context_length}, which is null unless
     * {@code --context-length} was given (why the card is read first).
     */
    @Override
    public String contextPath() {
        return "/server_info"; // the prober falls back to the deprecated /get_server_info on a 404
    }

    @Override
    public int contextLength(JsonNode body) {
        return ProbeJson.positive(body.get("context_length"));
    }

    @Override
    public LoadMetrics loadMetrics() {
        return LOAD;
    }

    @Override
    public TemplateRules templates() {
        return TEMPLATES;
    }

    /**
     * A {@code --chat-template FILE.jinja} as SGLang loads it ({@code TemplateManager._load_jinja_template}):
     * {@code "".join(f.readlines()).strip("\n")}, then every literal backslash-n replaced by a newline.
     */
    static String chatTemplateText(String source) {
        int from = 0;
        int to = source.length();
        while (from < to && source.charAt(from) == '\n') {
            from++;
        }
        while (to > from && source.charAt(to - 1) == '\n') {
            to--;
        }
        return source.substring(from, to).replace("\\n", "\n");
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

    /** Its events name no adapter per block: learned keys stay the tokens' alone. */
    @Override
    public boolean namesBlockNamespaces() {
        return false;
    }

    @Override
    public boolean takesCacheSalt() {
        return true;
    }
}
