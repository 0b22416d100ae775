package io.kvgate.dataplane.engine;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.control.config.RuleConfig;

/** TensorRT-LLM ({@code trtllm-serve}): vLLM's request spellings, its own P/D protocol, no load page, no probes. */
public final class TrtllmProfile implements EngineProfile {
    public static final TrtllmProfile INSTANCE = new TrtllmProfile();

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
        return "TensorRT-LLM serves no Prometheus load page: nothing to scrape";
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

    /** trtllm-serve's {@code /metrics} is JSON iteration statistics, not Prometheus text: it is not scraped. */
    @Override
    public LoadMetrics loadMetrics() {
        return null;
    }

    /** The tokenizer's templates: it takes no {@code --chat-template} file. */
    @Override
    public TemplateRules templates() {
        return TemplateRules.TOKENIZER_ONLY;
    }
}
