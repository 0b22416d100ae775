package io.kvgate.dataplane.engine;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.control.config.RuleConfig;
import java.util.List;

/** llama.cpp ({@code llama-server}): no KV events, no P/D, a 503 while loading, its context per slot in /props. */
public final class LlamaCppProfile implements EngineProfile {
    public static final LlamaCppProfile INSTANCE = new LlamaCppProfile();
    // With --metrics; unlabelled (one rank). kv_cache_usage_ratio: older builds only.
    private static final LoadMetrics LOAD = new LoadMetrics(List.of("llamacpp:requests_processing"),
        List.of("llamacpp:requests_deferred"), List.of("llamacpp:kv_cache_usage_ratio"), null);

    private LlamaCppProfile() {}

    @Override
    public RuleConfig.Engine kind() {
        return RuleConfig.Engine.LLAMACPP;
    }

    @Override
    public String name() {
        return "llamacpp";
    }

    @Override
    public boolean needsTemperatureFloor() {
        return false;
    }

    /** It has neither spelling of the switch. */
    @Override
    public String stopStringMember() {
        return null;
    }

    @Override
    public boolean nullsEmptyLogitBias() {
        return false;
    }

    /**
     * It refuses every {@code n} other than 1, greedy or not: replicating only the greedy case would not make it
     * OpenAI's.
     */
    @Override
    public boolean refusesGreedyN() {
        return false;
    }

    @Override
    public boolean putsExtrasOnLastChunk() {
        return true;
    }

    @Override
    public String metricsFix() {
        return "start llama-server with --metrics";
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
        return PdProtocol.NONE;
    }

    /** It has no decode servers (configuration refuses {@code policy: pd}). */
    @Override
    public boolean decodeServesAlone() {
        return false;
    }

    /**
     * The server's "request (X tokens) exceeds the available context size (Y tokens), try increasing it" (type
     * {@code exceed_context_size_error}, a numeric code).
     */
    @Override
    public boolean statesContextOverflow(String message) {
        return message.contains("exceeds the available context size");
    }

    /** {@code /health}: llama-server's route: 503 while the model loads, 200 once it is ready. */
    @Override
    public String healthPath() {
        return "/health";
    }

    /** llama-server answers 503 on {@code /health} and on requests while its model loads. */
    @Override
    public boolean answers503WhileLoading() {
        return true;
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

    /** Its {@code /v1/models} has no context length; {@code /props} states one slot's (what one request gets). */
    @Override
    public String contextPath() {
        return "/props";
    }

    @Override
    public int contextLength(JsonNode body) {
        return ProbeJson.positive(body.path("default_generation_settings").get("n_ctx"));
    }

    @Override
    public LoadMetrics loadMetrics() {
        return LOAD;
    }

    /** The tokenizer's templates: it takes no {@code chat_template} file from the gateway's configuration. */
    @Override
    public TemplateRules templates() {
        return TemplateRules.TOKENIZER_ONLY;
    }

    /**
     * Router mode (llama-server started without {@code -m}): {@code GET /props} without {@code ?model=} answers
     * {@code role: "router"} and {@code n_ctx: 0} (tools/server/server-models.cpp {@code get_router_props}).
     */
    @Override
    public boolean statesRouterRole(JsonNode body) {
        return "router".equals(body.path("role").asText(null));
    }

    /**
     * A router lists every model it knows with its {@code status}, an object whose {@code value} is
     * {@code loaded}, {@code loading}, {@code unloaded} (or {@code sleeping}, {@code failed} in some builds): only a
     * loaded (or sleeping: loaded, woken by a request) model is ready. A card without a status (a single-model
     * server) is its loaded model.
     */
    @Override
    public boolean cardReady(JsonNode card) {
        JsonNode status = card.path("status");
        if (status.isMissingNode() || status.isNull()) {
            return true;
        }
        String value = status.isTextual() ? status.asText() : status.path("value").asText("");
        return value.equals("loaded") || value.equals("sleeping");
    }

    /** It publishes no KV events. */
    @Override
    public boolean namesBlockNamespaces() {
        return false;
    }
}
