package io.kvgate.dataplane.engine;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.control.config.RuleConfig;

/**
 * Everything the data plane knows about one engine kind, in one class per engine (issue #39 item 4): the edits that
 * put a request in its dialect, its P/D protocol, how its error messages say "context overflow", where it states its
 * routes and context length and how to read them, its load metric names, how it behaves while loading, and how it
 * resolves a chat template. The use sites ask the profile ({@link EngineProfiles#of}, {@code Rule.profile()}) and
 * keep the mechanism; no code outside this package branches on the engine kind ({@code EngineKindSwitchTest}).
 *
 * <p>Adding an engine: a constant in {@link RuleConfig.Engine} (the configuration vocabulary), one class here
 * implementing every method, and its entry in {@link EngineProfiles#ALL}; see docs/development.md "Adding an engine".
 * Profiles are stateless singletons, read on every thread.
 *
 * <p>This package depends on nothing else in the data plane, so every layer may ask it (the package graph stays
 * acyclic): a profile states facts as values; the code that acts on them stays where it was.
 */
public sealed interface EngineProfile permits VllmProfile, SglangProfile, TrtllmProfile, LlamaCppProfile {
    /** The configuration's {@code engine} value this profile serves. */
    RuleConfig.Engine kind();

    /** The configuration spelling ({@code vllm}, {@code sglang}, ...). */
    String name();

    /**
     * What the configuration checks know about it ({@code control}'s {@link io.kvgate.control.config.EngineRules}:
     * the module below cannot see this profile, so its facts are data there, read here).
     */
    default io.kvgate.control.config.EngineRules configRules() {
        return io.kvgate.control.config.EngineRules.of(name());
    }

    // --- Requests: the edits that make one request mean the same on every engine (request.EngineDialect) ---

    /**
     * Whether it samples a temperature in (0, {@code EngineDialect.MIN_TEMPERATURE}) as sent (SGLang), so the
     * gateway raises it to vLLM's floor and {@code n > 1} at {@code 5e-6} samples n different choices everywhere.
     */
    boolean needsTemperatureFloor();

    /**
     * The member it reads for "keep the stop string in the output": {@code include_stop_str_in_output} (vLLM,
     * TensorRT-LLM), {@code no_stop_trim} (SGLang), or null (llama-server has neither); a client's other spelling is
     * renamed to it.
     */
    String stopStringMember();

    /** Whether an empty {@code logit_bias} must be sent as {@code null} (SGLang builds its dense bias matrix for it). */
    boolean nullsEmptyLogitBias();

    /**
     * Whether it refuses {@code n > 1} at {@code temperature: 0}, so the answer rewrite replicates one greedy choice
     * ({@code greedy_n: replicate}).
     */
    boolean refusesGreedyN();

    /**
     * Whether a LoRA adapter is named in a trailing {@code "lora_path"} member (SGLang), the request keeping the
     * client's {@code model}; otherwise the adapter is the {@code model} itself.
     */
    boolean namesAdapterInLoraPath();

    /**
     * Whether the engine serves {@code /v1/chat/completions/render} and {@code /v1/completions/render} itself (vLLM,
     * with its own answer shape): those paths are then forwarded to the engine, and the gateway's render answers
     * under {@code /kvgate/v1/...} only (issue #36 item 9).
     */
    boolean servesOwnRender();

    /**
     * Whether the engine writes members of its own on a stream's last chunk, which a forced {@code include_usage}
     * makes the usage chunk (llama.cpp's {@code timings}): when the gateway removes that chunk for a client that did
     * not ask for usage, those members move to the last chunk the client gets (issue #36 item 14).
     */
    boolean putsExtrasOnLastChunk();

    /** What to change on the engine when its {@code /metrics} lacks the load families ({@code ctl doctor}'s fix). */
    String metricsFix();

    /**
     * Whether it refuses {@code prompt + budget == context} (SGLang's {@code >=}): a lowered budget then leaves one
     * token of the context free (request.ContextBudget).
     */
    boolean refusesExactContextFill();

    // --- Prefill/decode disaggregation ---

    /** Its P/D protocol ({@link PdProtocol#NONE}: configuration refuses {@code policy: pd}). */
    PdProtocol pdProtocol();

    /**
     * Whether its decode servers can serve a request alone (conditional P/D may skip the prefill leg): not SGLang,
     * whose decode server cannot prefill without its bootstrap rendezvous.
     */
    boolean decodeServesAlone();

    /**
     * Whether the engine continues a chat's final assistant message ({@code continue_final_message: true},
     * {@code add_generation_prompt: false}): vLLM and SGLang; mid-stream failover continues a chat stream that way
     * and refuses chat on engines without it.
     */
    default boolean continuesAssistantMessage() {
        return false;
    }

    // --- Errors ---

    /**
     * Whether {@code message} is one of its context-overflow wordings (relay.EngineErrors maps any engine's to
     * {@code context_length_exceeded}: the error body does not say which engine wrote it).
     */
    boolean statesContextOverflow(String message);

    // --- Health and loading ---

    /**
     * The path its health is probed at unless configuration says otherwise ({@code rules[].health.path}, then
     * {@code health.path}): upstream.HealthChecker. A cheap route that answers 200 while the engine serves.
     */
    String healthPath();

    /**
     * Whether it answers 503 on its health path and on requests while its model loads (llama-server): a state, not a
     * fault (upstream.HealthChecker, the exchanges' connect retry).
     */
    boolean answers503WhileLoading();

    // --- Probes (ready.ModelProbe): model and server info beyond GET /v1/models ---

    /** Whether its {@code GET /v1/models} lists LoRA adapters as cards with a {@code parent} (vLLM). */
    boolean listsAdapterCards();

    /** The path it states its mounted completion routes at, or null (not known: both are assumed served). */
    String routesPath();

    /** What the answer from {@link #routesPath} says it mounts, or null when it does not say. */
    MountedRoutes mountedRoutes(JsonNode body);

    /**
     * The tool-call parser the answer from {@link #routesPath} names: the name, "" when it runs none, or null when
     * the answer does not say (or the engine never states one).
     */
    String toolCallParser(JsonNode body);

    /** The path it states its context length at when its model cards do not, or null. */
    String contextPath();

    /** The context length in the answer from {@link #contextPath}, 0 when it states none. */
    int contextLength(JsonNode body);

    /**
     * Whether the answer from {@link #contextPath} says the server is a router in front of per-model instances
     * (llama.cpp's router mode, {@code role: "router"}): its per-model routes then take {@code ?model=}.
     */
    boolean statesRouterRole(JsonNode body);

    /**
     * Whether one card of its {@code GET /v1/models} is a model it can serve now: true unless the card says the
     * model is loading, unloaded or failed (llama.cpp's router lists every model with its {@code status}).
     */
    boolean cardReady(JsonNode card);

    // --- KV keys (route.RuleHasher) ---

    /**
     * Whether its KV events name each stored block's cache salt and LoRA adapter (TensorRT-LLM's drained events:
     * {@code cache_salt}, {@code lora_id}), so learned keys are rooted in that namespace on both sides
     * ({@code index.block.LearnedNamespace}).
     */
    boolean namesBlockNamespaces();

    // --- Load (load.EngineLoadScraper, load.MetricsPage) ---

    /** The Prometheus families its metrics page states its load in, or null: it serves no such page. */
    LoadMetrics loadMetrics();

    // --- Prompts (prompt.PromptPipeline) ---

    /** How it chooses the chat template it renders with. */
    TemplateRules templates();

    /**
     * Whether the engine keys its prefix cache by a request's {@code cache_salt} (vLLM: the first block's extra keys;
     * SGLang: the first page's hash), so a gateway-owned per-tenant salt separates tenants' caches. Engines without
     * it get no salt (it would be an unknown field, or ignored).
     */
    default boolean takesCacheSalt() {
        return false;
    }
}
