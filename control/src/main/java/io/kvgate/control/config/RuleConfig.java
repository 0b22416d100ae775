package io.kvgate.control.config;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.time.Duration;

/**
 * One routing rule: which models it serves, which engines serve them and how a request picks one.
 * Immutable; a rule set is swapped whole (see {@link GatewayConfig}).
 */
public record RuleConfig(
    String name,
    List<ModelEntry> modelEntries,
    String engine,
    String policy,
    String fallback,
    List<EndpointConfig> endpoints,
    String tokenizer,
    int blockSize,
    String hashSeed,
    String hashAlgo,
    String kvKeyMode,
    long kvCapacityBlocks,
    boolean explain,
    SessionConfig session,
    ChwblConfig chwbl,
    KvExactConfig kvExact,
    PdConfig pd,
    int maxN,
    int maxPromptTokens,
    AdmissionConfig admission,
    HealthOverride health,
    int maxModelLen,
    String onContextOverflow,
    ChatTemplateFile chatTemplate,
    GreedyN greedyN,
    boolean speculative,
    int maxLogitBias,
    String toolCallParser,
    DiscoveryConfig discovery,
    HedgeConfig hedge,
    FailoverConfig failover) {

    /** The shape before {@code hedge} and {@code failover} existed: no hedged first tokens, mid-stream failover off. */
    public RuleConfig(String name, List<ModelEntry> modelEntries, String engine, String policy, String fallback,
                      List<EndpointConfig> endpoints, String tokenizer, int blockSize, String hashSeed, String hashAlgo,
                      String kvKeyMode, long kvCapacityBlocks, boolean explain, SessionConfig session, ChwblConfig chwbl,
                      KvExactConfig kvExact, PdConfig pd, int maxN, int maxPromptTokens, AdmissionConfig admission,
                      HealthOverride health, int maxModelLen, String onContextOverflow, ChatTemplateFile chatTemplate,
                      GreedyN greedyN, boolean speculative, int maxLogitBias, String toolCallParser, DiscoveryConfig discovery) {
        this(name, modelEntries, engine, policy, fallback, endpoints, tokenizer, blockSize, hashSeed, hashAlgo, kvKeyMode,
            kvCapacityBlocks, explain, session, chwbl, kvExact, pd, maxN, maxPromptTokens, admission, health, maxModelLen,
            onContextOverflow, chatTemplate, greedyN, speculative, maxLogitBias, toolCallParser, discovery, HedgeConfig.OFF,
            FailoverConfig.OFF);
    }

    /**
     * {@code max_logit_bias} default: OpenAI's cap on the entries of one request's {@code logit_bias} (it answers 400
     * above 300). The field's cost differs by engine (review row 13): vLLM keeps the biased entries in flat lists,
     * SGLang builds a dense fp32 batch x vocabulary matrix for the whole batch as soon as one request carries it.
     */
    public static final int DEFAULT_MAX_LOGIT_BIAS = 300;
    /** The largest {@code max_logit_bias}: a vocabulary's size, beyond which a bias map cannot grow. */
    public static final int MAX_LOGIT_BIAS = 1 << 20;

    /**
     * {@code tool_call_parser}: the tool-call parser the rule's engines were launched with (vLLM
     * {@code --enable-auto-tool-choice --tool-call-parser NAME}, SGLang {@code --tool-call-parser NAME}), or
     * {@link #NO_TOOL_CALL_PARSER} for engines launched without one; null when the rule does not say (requests pass
     * through as before). Only {@code none} changes what clients get: vLLM refuses {@code tool_choice: "auto"} without
     * a parser while SGLang answers with the calls left in the text, so the gateway answers vLLM's 400 for both.
     */
    public static final String NO_TOOL_CALL_PARSER = "none";

    /**
     * {@code hash_seed: auto}: the gateway finds the seed the rule's vLLM engines hash with by asking them (the parity
     * probe tries {@link #AUTO_HASH_SEED_CANDIDATES} against the keys their events carry) and applies it through a
     * reload. Until then the rule is routed without KV scores.
     */
    public static final String HASH_SEED_AUTO = "auto";

    /**
     * What {@code auto} tries, most likely first: vLLM's seed for sha256_cbor without PYTHONHASHSEED
     * ({@code DEFAULT_NONE_HASH_SEED}, PR #51875), the gateway's default "0", and the two other fixed strings
     * PYTHONHASHSEED is commonly given ("random" is hashed as the string, so it is reproducible; "" likewise).
     */
    public static final List<String> AUTO_HASH_SEED_CANDIDATES = List.of("vllm-none-hash", "0", "random", "");

    /** Whether this rule's seed is to be found from its engines' events ({@code hash_seed: auto}, not yet resolved). */
    public boolean hashSeedAuto() {
        return HASH_SEED_AUTO.equals(hashSeed);
    }

    /** The same rule keyed at {@code size} tokens per block (a learned-key rule adopting its engines' size). */
    public RuleConfig withBlockSize(int size) {
        return new RuleConfig(name, modelEntries, engine, policy, fallback, endpoints, tokenizer, size, hashSeed,
            hashAlgo, kvKeyMode, kvCapacityBlocks, explain, session, chwbl, kvExact, pd, maxN, maxPromptTokens, admission,
            health, maxModelLen, onContextOverflow, chatTemplate, greedyN, speculative, maxLogitBias, toolCallParser, discovery, hedge, failover);
    }

    /** The same rule hashing with {@code seed} (a resolved {@code auto}, applied through a reload). */
    public RuleConfig withHashSeed(String seed) {
        return new RuleConfig(name, modelEntries, engine, policy, fallback, endpoints, tokenizer, blockSize, seed,
            hashAlgo, kvKeyMode, kvCapacityBlocks, explain, session, chwbl, kvExact, pd, maxN, maxPromptTokens, admission,
            health, maxModelLen, onContextOverflow, chatTemplate, greedyN, speculative, maxLogitBias, toolCallParser, discovery, hedge, failover);
    }

    /** The shape before {@code discovery} existed: the rule's own endpoints. */
    public RuleConfig(String name, List<ModelEntry> modelEntries, String engine, String policy, String fallback,
                      List<EndpointConfig> endpoints, String tokenizer, int blockSize, String hashSeed, String hashAlgo,
                      String kvKeyMode, long kvCapacityBlocks, boolean explain, SessionConfig session, ChwblConfig chwbl,
                      KvExactConfig kvExact, PdConfig pd, int maxN, int maxPromptTokens, AdmissionConfig admission,
                      HealthOverride health, int maxModelLen, String onContextOverflow, ChatTemplateFile chatTemplate,
                      GreedyN greedyN, boolean speculative, int maxLogitBias, String toolCallParser) {
        this(name, modelEntries, engine, policy, fallback, endpoints, tokenizer, blockSize, hashSeed, hashAlgo, kvKeyMode,
            kvCapacityBlocks, explain, session, chwbl, kvExact, pd, maxN, maxPromptTokens, admission, health, maxModelLen,
            onContextOverflow, chatTemplate, greedyN, speculative, maxLogitBias, toolCallParser, DiscoveryConfig.STATIC);
    }

    /**
     * The same rule with {@code found} as its endpoints: what discovery reported, applied through a reload. Only a
     * rule whose endpoints are discovered takes them; a static rule keeps its own.
     */
    public RuleConfig withDiscoveredEndpoints(List<EndpointConfig> found) {
        if (discovery.isStatic()) {
            throw new IllegalStateException("rule '" + name + "' lists its own endpoints (discovery.type static)");
        }
        return new RuleConfig(name, modelEntries, engine, policy, fallback, List.copyOf(found), tokenizer, blockSize, hashSeed,
            hashAlgo, kvKeyMode, kvCapacityBlocks, explain, session, chwbl, kvExact, pd, maxN, maxPromptTokens, admission,
            health, maxModelLen, onContextOverflow, chatTemplate, greedyN, speculative, maxLogitBias, toolCallParser, discovery, hedge, failover);
    }

    /** The shape before {@code tool_call_parser} existed: not declared. */
    public RuleConfig(String name, List<ModelEntry> modelEntries, String engine, String policy, String fallback,
                      List<EndpointConfig> endpoints, String tokenizer, int blockSize, String hashSeed, String hashAlgo,
                      String kvKeyMode, long kvCapacityBlocks, boolean explain, SessionConfig session, ChwblConfig chwbl,
                      KvExactConfig kvExact, PdConfig pd, int maxN, int maxPromptTokens, AdmissionConfig admission,
                      HealthOverride health, int maxModelLen, String onContextOverflow, ChatTemplateFile chatTemplate,
                      GreedyN greedyN, boolean speculative, int maxLogitBias) {
        this(name, modelEntries, engine, policy, fallback, endpoints, tokenizer, blockSize, hashSeed, hashAlgo, kvKeyMode,
            kvCapacityBlocks, explain, session, chwbl, kvExact, pd, maxN, maxPromptTokens, admission, health, maxModelLen,
            onContextOverflow, chatTemplate, greedyN, speculative, maxLogitBias, null);
    }

    /** Whether the rule says its engines run without a tool-call parser ({@code tool_call_parser: none}). */
    public boolean withoutToolCallParser() {
        return NO_TOOL_CALL_PARSER.equals(toolCallParser);
    }

    /** The shape before {@code speculative} / {@code max_logit_bias} existed: not speculative, OpenAI's cap. */
    public RuleConfig(String name, List<ModelEntry> modelEntries, String engine, String policy, String fallback,
                      List<EndpointConfig> endpoints, String tokenizer, int blockSize, String hashSeed, String hashAlgo,
                      String kvKeyMode, long kvCapacityBlocks, boolean explain, SessionConfig session, ChwblConfig chwbl,
                      KvExactConfig kvExact, PdConfig pd, int maxN, int maxPromptTokens, AdmissionConfig admission,
                      HealthOverride health, int maxModelLen, String onContextOverflow, ChatTemplateFile chatTemplate,
                      GreedyN greedyN) {
        this(name, modelEntries, engine, policy, fallback, endpoints, tokenizer, blockSize, hashSeed, hashAlgo, kvKeyMode,
            kvCapacityBlocks, explain, session, chwbl, kvExact, pd, maxN, maxPromptTokens, admission, health, maxModelLen,
            onContextOverflow, chatTemplate, greedyN, false, DEFAULT_MAX_LOGIT_BIAS);
    }

    /**
     * {@code greedy_n}: what a request for {@code n > 1} choices at {@code temperature: 0} gets (issue #13 item 2).
     * OpenAI accepts it; SGLang answers n identical choices; vLLM (and TensorRT-LLM) refuse it ("n must be 1 when
     * using greedy sampling"). {@code replicate} (default): accepted on every engine, and on the engines that refuse
     * it the gateway asks for one choice and answers it n times; {@code reject}: the gateway answers vLLM's 400 for
     * every engine, before any engine sees the request.
     */
    public enum GreedyN {
        REPLICATE, REJECT;

        public String configValue() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    /** The shape before {@code greedy_n} existed: greedy {@code n > 1} replicated. */
    public RuleConfig(String name, List<ModelEntry> modelEntries, String engine, String policy, String fallback,
                      List<EndpointConfig> endpoints, String tokenizer, int blockSize, String hashSeed, String hashAlgo,
                      String kvKeyMode, long kvCapacityBlocks, boolean explain, SessionConfig session, ChwblConfig chwbl,
                      KvExactConfig kvExact, PdConfig pd, int maxN, int maxPromptTokens, AdmissionConfig admission,
                      HealthOverride health, int maxModelLen, String onContextOverflow, ChatTemplateFile chatTemplate) {
        this(name, modelEntries, engine, policy, fallback, endpoints, tokenizer, blockSize, hashSeed, hashAlgo, kvKeyMode,
            kvCapacityBlocks, explain, session, chwbl, kvExact, pd, maxN, maxPromptTokens, admission, health, maxModelLen,
            onContextOverflow, chatTemplate, GreedyN.REPLICATE);
    }

    /**
     * {@code health.path} / {@code health.timeout_ms} of one rule (issue #13 item 7): its endpoints are probed there
     * instead of the global {@code health} settings (SGLang's {@code /health} answers 200 without touching the
     * scheduler; {@code /health_generate} is the deep probe, and needs a longer timeout). Null path / 0 timeout: the
     * global value.
     */
    public record HealthOverride(String path, long timeoutMs) {
        public static final HealthOverride NONE = new HealthOverride(null, 0);

        public String pathOr(String global) {
            return path == null ? global : path;
        }

        public long timeoutMsOr(long global) {
            return timeoutMs == 0 ? global : timeoutMs;
        }
    }

    /** The shape before {@code chat_template} existed: the tokenizer directory's template. */
    public RuleConfig(String name, List<ModelEntry> modelEntries, String engine, String policy, String fallback,
                      List<EndpointConfig> endpoints, String tokenizer, int blockSize, String hashSeed, String hashAlgo,
                      String kvKeyMode, long kvCapacityBlocks, boolean explain, SessionConfig session, ChwblConfig chwbl,
                      KvExactConfig kvExact, PdConfig pd, int maxN, int maxPromptTokens, AdmissionConfig admission,
                      HealthOverride health, int maxModelLen, String onContextOverflow) {
        this(name, modelEntries, engine, policy, fallback, endpoints, tokenizer, blockSize, hashSeed, hashAlgo, kvKeyMode,
            kvCapacityBlocks, explain, session, chwbl, kvExact, pd, maxN, maxPromptTokens, admission, health, maxModelLen,
            onContextOverflow, null);
    }

    /** The same rule with its paths resolved: {@code tokenizer} and {@code chat_template} (read by now). */
    RuleConfig withPaths(String resolvedTokenizer, ChatTemplateFile resolvedTemplate) {
        return new RuleConfig(name, modelEntries, engine, policy, fallback, endpoints, resolvedTokenizer, blockSize, hashSeed,
            hashAlgo, kvKeyMode, kvCapacityBlocks, explain, session, chwbl, kvExact, pd, maxN, maxPromptTokens, admission,
            health, maxModelLen, onContextOverflow, resolvedTemplate, greedyN, speculative, maxLogitBias, toolCallParser, discovery, hedge, failover);
    }

    /** The shape before {@code max_model_len} / {@code on_context_overflow} existed: discovered, reject. */
    public RuleConfig(String name, List<ModelEntry> modelEntries, String engine, String policy, String fallback,
                      List<EndpointConfig> endpoints, String tokenizer, int blockSize, String hashSeed, String hashAlgo,
                      String kvKeyMode, long kvCapacityBlocks, boolean explain, SessionConfig session, ChwblConfig chwbl,
                      KvExactConfig kvExact, PdConfig pd, int maxN, int maxPromptTokens, AdmissionConfig admission,
                      HealthOverride health) {
        this(name, modelEntries, engine, policy, fallback, endpoints, tokenizer, blockSize, hashSeed, hashAlgo, kvKeyMode,
            kvCapacityBlocks, explain, session, chwbl, kvExact, pd, maxN, maxPromptTokens, admission, health, 0,
            ON_CONTEXT_OVERFLOW.get(0));
    }

    /** The shape before per-rule {@code health} existed: the global probe settings. */
    public RuleConfig(String name, List<ModelEntry> modelEntries, String engine, String policy, String fallback,
                      List<EndpointConfig> endpoints, String tokenizer, int blockSize, String hashSeed, String hashAlgo,
                      String kvKeyMode, long kvCapacityBlocks, boolean explain, SessionConfig session, ChwblConfig chwbl,
                      KvExactConfig kvExact, PdConfig pd, int maxN, int maxPromptTokens, AdmissionConfig admission) {
        this(name, modelEntries, engine, policy, fallback, endpoints, tokenizer, blockSize, hashSeed, hashAlgo, kvKeyMode,
            kvCapacityBlocks, explain, session, chwbl, kvExact, pd, maxN, maxPromptTokens, admission, HealthOverride.NONE);
    }

    /** The shape before {@code admission} and model entries existed: plain model names, admission control off. */
    public RuleConfig(String name, List<String> models, String engine, String policy, String fallback,
                      List<EndpointConfig> endpoints, String tokenizer, int blockSize, String hashSeed, String hashAlgo,
                      String kvKeyMode, long kvCapacityBlocks, boolean explain, SessionConfig session, ChwblConfig chwbl,
                      KvExactConfig kvExact, PdConfig pd, int maxN, int maxPromptTokens) {
        this(name, models.stream().map(ModelEntry::plain).toList(), engine, policy, fallback, endpoints, tokenizer,
            blockSize, hashSeed, hashAlgo, kvKeyMode, kvCapacityBlocks, explain, session, chwbl, kvExact, pd, maxN,
            maxPromptTokens, AdmissionConfig.OFF);
    }

    /** The client-facing model names this rule serves, in configuration order ({@code /v1/models} lists them). */
    public List<String> models() {
        List<String> names = new ArrayList<>(modelEntries.size());
        for (ModelEntry e : modelEntries) {
            names.add(e.name());
        }
        return names;
    }

    /** The entry a client's model name selects, or null when this rule does not serve it. */
    public ModelEntry entryFor(String clientName) {
        for (ModelEntry e : modelEntries) {
            if (e.name().equals(clientName)) {
                return e;
            }
        }
        return null;
    }

    /**
     * The LoRA adapter a client's model name selects on this rule (it is listed under some entry's
     * {@code adapters}), or null for a base model name or a name this rule does not serve.
     */
    public String loraFor(String clientName) {
        for (ModelEntry e : modelEntries) {
            if (e.adapters().contains(clientName)) {
                return clientName;
            }
        }
        return null;
    }

    /** The adapter names of every entry, in configuration order (clients send them as {@code model}). */
    public List<String> adapterNames() {
        List<String> names = new ArrayList<>();
        for (ModelEntry e : modelEntries) {
            names.addAll(e.adapters());
        }
        return names;
    }

    /** Whether any entry renames its model for the engines ({@code served_as}): those requests and answers are rewritten. */
    public boolean renamesModels() {
        for (ModelEntry e : modelEntries) {
            if (e.renamed()) {
                return true;
            }
        }
        return false;
    }

    /**
     * LoRA adapters per engine. vLLM serves an adapter under its own name as {@code model}, which is what clients
     * send, so it goes unchanged. SGLang's OpenAI server (serving_base {@code _resolve_lora_path}) takes the adapter
     * from {@code model: "base:adapter"} first, else from the body's {@code lora_path}: the gateway sends the
     * client's {@code model} unchanged plus {@code lora_path}, so SGLang echoes the adapter name as vLLM does. A
     * client-facing name with ':' on an SGLang rule would be split by SGLang into base and adapter (selecting an
     * adapter nobody mapped, or the wrong one): refused. TensorRT-LLM and llama.cpp rules refuse adapters until the
     * gateway sends their request forms.
     */
    private static void checkAdapters(ConfigNode n, EngineRules engine, List<ModelEntry> models) {
        for (ModelEntry e : models) {
            if (!e.adapters().isEmpty() && !engine.servesAdapters()) {
                n.problem("models", e.name(), "lists adapters " + e.adapters() + ", which are not supported on engine '"
                    + engine.name() + "': the gateway sends LoRA requests in vLLM's form (the adapter as 'model') and SGLang's"
                    + " ('lora_path') only");
            }
            if (!engine.splitsModelAtColon()) {
                continue;
            }
            // SGLang sees the engine's name (served_as, else the client's): a client name with ':' is fine when it is
            // served as a name without one.
            String seen = e.engineName();
            if (seen.indexOf(':') >= 0) {
                n.problem("models", seen, "contains ':', which SGLang reads as 'base:adapter' (it would run the LoRA"
                    + " adapter '" + seen.substring(seen.indexOf(':') + 1).strip() + "'); name the base model"
                    + " without ':' and list adapters under 'adapters'" + (e.renamed() ? " (served_as of '" + e.name() + "')"
                    : ", or keep the client's name and map it: {name: '" + e.name() + "', served_as: <name without ':'>}"));
            }
            for (String a : e.adapters()) {
                if (a.indexOf(':') >= 0) {
                    n.problem("models", e.name(), "lists adapter '" + a + "' with ':', which SGLang reads as"
                        + " 'base:adapter' before the lora_path the gateway sends (it would run adapter '"
                        + a.substring(a.indexOf(':') + 1).strip() + "'); name the adapter without ':'");
                }
            }
        }
    }

    /**
     * {@code on_context_overflow}: what a request whose prompt + completion budget is over the rule's context length
     * gets. {@code reject} (the default): OpenAI's 400 {@code context_length_exceeded}; {@code clamp}: the completion
     * budget is lowered to what fits, as vLLM does on its own.
     */
    public static final List<String> ON_CONTEXT_OVERFLOW = List.of("reject", "clamp");
    /** The largest {@code max_model_len} accepted: 16 Mi tokens, above any context length served today. */
    public static final int MAX_MODEL_LEN = 1 << 24;

    /** Whether an overflowing completion budget is lowered to fit ({@code on_context_overflow: clamp}). */
    public boolean clampsContextOverflow() {
        return "clamp".equals(onContextOverflow);
    }

    /**
     * {@code chat_template}: the engines' {@code --chat-template} file. Only vLLM's and SGLang's resolution is
     * reproduced; SGLang reads a file whose name does not end in {@code .jinja} as its own JSON conversation format,
     * which the gateway does not render; the gateway renders with it and tokenizes with the rule's tokenizer.
     */
    private static ChatTemplateFile chatTemplate(ConfigNode n, EngineRules engine, String tokenizer) {
        String path = RuleKeys.CHAT_TEMPLATE.read(n);
        if (path == null) {
            return null;
        }
        if (!engine.reproducedTemplates()) {
            n.problem("chat_template", path, "is only supported on engines " + EngineRules.names(EngineRules::reproducedTemplates)
                + " (the gateway reproduces their template resolution; this rule's engine is '" + engine.name() + "')");
        } else if (engine.templateNeedsJinja() && !path.endsWith(".jinja")) {
            n.problem("chat_template", path, "must end in '.jinja' on engine '" + engine.name() + "': SGLang reads any other"
                + " --chat-template file as its own JSON conversation template, which the gateway cannot render");
        }
        if (tokenizer == null) {
            n.problem("chat_template", path, "needs 'tokenizer' on the same rule: the gateway renders with the template"
                + " and tokenizes the result with the rule's tokenizer");
        }
        return new ChatTemplateFile(path, null);
    }

    /** Default {@code max_n}: choices ({@code n}) and batched prompts one request may ask for. */
    public static final int DEFAULT_MAX_N = 128;
    /** Default {@code max_prompt_tokens}: 1 Mi tokens, above any context length served today. */
    public static final int DEFAULT_MAX_PROMPT_TOKENS = 1 << 20;

    public static final List<String> ENGINES = List.of("vllm", "sglang", "trtllm", "llamacpp");
    public static final List<String> POLICIES =
        List.of("round_robin", "weighted", "least_outstanding", "session", "chwbl", "kv_exact", "pd");
    public static final List<String> FALLBACKS = List.of("round_robin", "weighted", "least_outstanding");

    /**
     * Session affinity: which request attribute pins a conversation to an endpoint, and how.
     *
     * @param mode          {@code hash} (default): the conversation's endpoint is a pure function of its key and the
     *                      healthy set (rendezvous hashing), so every gateway replica with the same configuration
     *                      picks the same engine without shared state; {@code table}: a per-gateway TTL table of pins
     *                      made by the fallback policy (before #14: replicas pin independently)
     * @param loadCapFactor hash mode: an endpoint takes a conversation only while its load stays within
     *                      {@code max(load_cap_factor × share, share + load_slack)} of its weighted share of the
     *                      rule's load; over it, the conversation goes to its next endpoint in rendezvous order
     * @param loadSlack     hash mode: the absolute slack of that bound (at low load one request in flight is no hot spot)
     * @param shareCapFactor hash mode: an endpoint whose routed share of the requests (decayed over 3 s) is over this
     *                      factor of its weighted fair share sheds conversations, chosen by key, to their next
     *                      endpoint until it is not; 0 (the default) turns it off (the request-share bound of #14's numbers)
     */
    public record SessionConfig(String key, String header, String cookie, long ttlMs, int maxEntries, boolean pinSlot,
                                int slots, String mode, double loadCapFactor, double loadSlack, double shareCapFactor) {
        public static final double DEFAULT_LOAD_CAP_FACTOR = 1.5;
        public static final double DEFAULT_LOAD_SLACK = 2.0;
        /**
         * Off by default: with it a conversation's turns through different replicas land on one engine nearly always
         * rather than always (each replica's fractions come from its own sample of the traffic), and it adds walks.
         */
        public static final double DEFAULT_SHARE_CAP_FACTOR = 0.0;

        /** The shape before {@code session.share_cap_factor} existed: its default. */
        public SessionConfig(String key, String header, String cookie, long ttlMs, int maxEntries, boolean pinSlot,
                             int slots, String mode, double loadCapFactor, double loadSlack) {
            this(key, header, cookie, ttlMs, maxEntries, pinSlot, slots, mode, loadCapFactor, loadSlack, DEFAULT_SHARE_CAP_FACTOR);
        }

        /** The shape before {@code session.pin_slot} existed: no llama.cpp slot pinning, TTL table. */
        public SessionConfig(String key, String header, String cookie, long ttlMs, int maxEntries) {
            this(key, header, cookie, ttlMs, maxEntries, false, DEFAULT_SESSION_SLOTS);
        }

        /** The shape before {@code session.mode} existed: the TTL table. */
        public SessionConfig(String key, String header, String cookie, long ttlMs, int maxEntries, boolean pinSlot, int slots) {
            this(key, header, cookie, ttlMs, maxEntries, pinSlot, slots, "table", DEFAULT_LOAD_CAP_FACTOR, DEFAULT_LOAD_SLACK);
        }

        public SessionMode modeKind() {
            return SessionMode.valueOf(mode.toUpperCase(Locale.ROOT));
        }

        public SessionKey keyKind() {
            return SessionKey.valueOf(key.toUpperCase(Locale.ROOT));
        }

        public Duration ttl() {
            return Duration.ofMillis(ttlMs);
        }
    }

    /** Consistent hashing with bounded loads on a prompt-prefix key. */
    public record ChwblConfig(int prefixTokens, int prefixBlocks, int virtualNodes, double loadFactor, int prefixChars,
                              boolean skipCommonPrefix) {
        /** The shape before {@code chwbl.prefix_chars} existed: the default text prefix. */
        public ChwblConfig(int prefixTokens, int prefixBlocks, int virtualNodes, double loadFactor) {
            this(prefixTokens, prefixBlocks, virtualNodes, loadFactor, DEFAULT_PREFIX_CHARS);
        }

        /** The shape before {@code chwbl.skip_common_prefix} existed: the prefix every request shares is skipped. */
        public ChwblConfig(int prefixTokens, int prefixBlocks, int virtualNodes, double loadFactor, int prefixChars) {
            this(prefixTokens, prefixBlocks, virtualNodes, loadFactor, prefixChars, true);
        }
    }

    /**
     * Default {@code chwbl.prefix_chars}: without a tokenizer a {@code chwbl} rule keys on this many characters of
     * the request text (chat message contents or the completions prompt, see {@code RequestFields#textPrefix}).
     */
    public static final int DEFAULT_PREFIX_CHARS = 1024;
    /** The largest {@code chwbl.prefix_chars}: the body stage keeps at most this many characters per request. */
    public static final int MAX_PREFIX_CHARS = 16_384;
    /** Default {@code session.slots}: llama-server's default {@code --parallel} is 4 (one slot per parallel sequence). */
    public static final int DEFAULT_SESSION_SLOTS = 4;

    /** Longest-cached-prefix routing knobs. */
    public record KvExactConfig(String mode, double loadCapFactor, double loadSlack, double lambda, int minMatchBlocks,
                                int coldReadmitEvery, long speculativeTtlMs, int watchdogZeroHitStreak,
                                boolean parityProbeAtStartup, long warmupMs, TierWeights tierWeights,
                                double prefillTokenWeight, boolean dpRankHint, double minMatchFraction, String spread,
                                long recentWorkWindowMs) {

        /** The shape before {@code kv.recent_work_window_ms} existed: its default. */
        public KvExactConfig(String mode, double loadCapFactor, double loadSlack, double lambda, int minMatchBlocks,
                             int coldReadmitEvery, long speculativeTtlMs, int watchdogZeroHitStreak,
                             boolean parityProbeAtStartup, long warmupMs, TierWeights tierWeights, double prefillTokenWeight,
                             boolean dpRankHint, double minMatchFraction, String spread) {
            this(mode, loadCapFactor, loadSlack, lambda, minMatchBlocks, coldReadmitEvery, speculativeTtlMs,
                watchdogZeroHitStreak, parityProbeAtStartup, warmupMs, tierWeights, prefillTokenWeight, dpRankHint,
                minMatchFraction, spread, DEFAULT_RECENT_WORK_WINDOW_MS);
        }

        /**
         * Default {@code kv.recent_work_window_ms}: see {@code KvKeys.RECENT_WORK_WINDOW_MS}. 30 s, not 1 s: the blocks
         * a conversation stored must still count when its engine is compared with the others for the next new one,
         * however long the turns take (issue #35 shape 2 through 3 gateways in lockstep: 1.25x the mean with 1 s,
         * 1.00x with 30 s; perf/results/routing-quality-2026-12-08-herding.md).
         */
        public static final long DEFAULT_RECENT_WORK_WINDOW_MS = 30_000;

        /** The shape before {@code kv.spread} existed: its default. */
        public KvExactConfig(String mode, double loadCapFactor, double loadSlack, double lambda, int minMatchBlocks,
                             int coldReadmitEvery, long speculativeTtlMs, int watchdogZeroHitStreak,
                             boolean parityProbeAtStartup, long warmupMs, TierWeights tierWeights, double prefillTokenWeight,
                             boolean dpRankHint, double minMatchFraction) {
            this(mode, loadCapFactor, loadSlack, lambda, minMatchBlocks, coldReadmitEvery, speculativeTtlMs,
                watchdogZeroHitStreak, parityProbeAtStartup, warmupMs, tierWeights, prefillTokenWeight, dpRankHint,
                minMatchFraction, DEFAULT_SPREAD, DEFAULT_RECENT_WORK_WINDOW_MS);
        }

        /**
         * Default {@code kv.spread}: how a request no cached prefix pins (no match, or below {@code min_match_fraction})
         * picks its endpoint. {@code least_loaded}: the rule's fallback policy (no match) or the least loaded endpoint
         * (a weak match), as before. Not {@code recent_work}, though it stops replicas herding on issue #35's two shapes: on
         * mixed prompt lengths it cost 2-5 points of hit ratio (it spreads the unique long prompts' churn over every
         * engine's cache; perf/results/routing-quality-2026-12-08-herding.md), and defaults are chosen on the whole
         * matrix.
         */
        public static final String DEFAULT_SPREAD = "least_loaded";

        public Spread spreadKind() {
            return Spread.valueOf(spread.toUpperCase(Locale.ROOT));
        }

        /** The shape before {@code kv.min_match_fraction} existed: its default. */
        public KvExactConfig(String mode, double loadCapFactor, double loadSlack, double lambda, int minMatchBlocks,
                             int coldReadmitEvery, long speculativeTtlMs, int watchdogZeroHitStreak,
                             boolean parityProbeAtStartup, long warmupMs, TierWeights tierWeights, double prefillTokenWeight,
                             boolean dpRankHint) {
            this(mode, loadCapFactor, loadSlack, lambda, minMatchBlocks, coldReadmitEvery, speculativeTtlMs,
                watchdogZeroHitStreak, parityProbeAtStartup, warmupMs, tierWeights, prefillTokenWeight, dpRankHint,
                DEFAULT_MIN_MATCH_FRACTION);
        }

        /**
         * Default {@code kv.min_match_fraction}: SGLang's router routes by cache only when the best match covers more
         * than its {@code cache_threshold} (0.5) of the prompt, and by load otherwise (chosen over the routing-quality
         * matrix, perf/results/routing-quality-2026-12-07-b.md: multi-turn through 3 gateways, busiest engine 2.42x
         * the mean with 0, 1.50x with 0.5).
         */
        public static final double DEFAULT_MIN_MATCH_FRACTION = 0.5;

        /** The shape before {@code kv.dp_rank_hint} existed: hints where the engine accepts them (vLLM, SGLang). */
        public KvExactConfig(String mode, double loadCapFactor, double loadSlack, double lambda, int minMatchBlocks,
                             int coldReadmitEvery, long speculativeTtlMs, int watchdogZeroHitStreak,
                             boolean parityProbeAtStartup, long warmupMs, TierWeights tierWeights, double prefillTokenWeight) {
            this(mode, loadCapFactor, loadSlack, lambda, minMatchBlocks, coldReadmitEvery, speculativeTtlMs,
                watchdogZeroHitStreak, parityProbeAtStartup, warmupMs, tierWeights, prefillTokenWeight, true);
        }

        /**
         * Default {@code kv.prefill_token_weight}: 0, request counts alone. Charging in-flight uncached prefill tokens
         * (0.001: a 20,000-token prompt counts as 20 requests until its first byte) pushed each prompt family's next
         * request off its holder while a long prompt prefilled there, and did not win the routing-quality matrix
         * (issue #35; perf/results/routing-quality-2026-12-07-b.md: mixed lengths on the independent engine 0.61x the
         * oracle with 0.001, 0.87x with 0; elsewhere within 2 points either way). The knob stays for fleets whose
         * prefills dominate.
         */
        public static final double DEFAULT_PREFILL_TOKEN_WEIGHT = 0.0;

        /** The shape before {@code kv.prefill_token_weight} existed: the default weight. */
        public KvExactConfig(String mode, double loadCapFactor, double loadSlack, double lambda, int minMatchBlocks,
                             int coldReadmitEvery, long speculativeTtlMs, int watchdogZeroHitStreak,
                             boolean parityProbeAtStartup, long warmupMs, TierWeights tierWeights) {
            this(mode, loadCapFactor, loadSlack, lambda, minMatchBlocks, coldReadmitEvery, speculativeTtlMs,
                watchdogZeroHitStreak, parityProbeAtStartup, warmupMs, tierWeights, DEFAULT_PREFILL_TOKEN_WEIGHT);
        }

        /** The shape before {@code kv.tier_weights} existed: default tier weights. */
        public KvExactConfig(String mode, double loadCapFactor, double loadSlack, double lambda, int minMatchBlocks,
                             int coldReadmitEvery, long speculativeTtlMs, int watchdogZeroHitStreak,
                             boolean parityProbeAtStartup, long warmupMs) {
            this(mode, loadCapFactor, loadSlack, lambda, minMatchBlocks, coldReadmitEvery, speculativeTtlMs,
                watchdogZeroHitStreak, parityProbeAtStartup, warmupMs, TierWeights.DEFAULTS);
        }

        public KvMode modeKind() {
            return KvMode.valueOf(mode.toUpperCase(Locale.ROOT));
        }

        /** How long after its expected KV subscribers connected a rule counts as warm for {@code GET /ready}. */
        public Duration warmup() {
            return Duration.ofMillis(warmupMs);
        }
    }

    /**
     * {@code kv.tier_weights}: what a cached block is worth by the memory tier the engine reported it in
     * ({@code medium}): a block in CPU memory must be copied back to the GPU, one on disk read first. Keys are the
     * tiers the index distinguishes: {@code GPU} (also events without a medium), {@code CPU_TIER} (vLLM "CPU", SGLang
     * "CPU_PINNED") and {@code DISK} (vLLM "STORAGE", SGLang "DISK", "EXTERNAL", unknown names); values in [0, 1].
     */
    public record TierWeights(double gpu, double cpu, double disk) {
        public static final TierWeights DEFAULTS = new TierWeights(1.0, 0.8, 0.5);

        /** Weight of an index tier code (0 = GPU, 1 = CPU, 2 = DISK). */
        public double of(int tier) {
            return switch (tier) {
                case 0 -> gpu;
                case 1 -> cpu;
                default -> disk;
            };
        }
    }

    /** The largest index the block index accepts ({@code BlockIndexConfig}); larger values fail at start-up. */
    public static final long MAX_KV_CAPACITY_BLOCKS = 1_000_000_000L;

    /**
     * Typed vocabularies: each constant's lower-case name is the configuration value. What the data plane knows about
     * each engine is its profile's ({@code io.kvgate.dataplane.engine.EngineProfile}).
     */
    public enum Engine { VLLM, SGLANG, TRTLLM, LLAMACPP }

    /**
     * TensorRT-LLM's v1 block key ({@code BlockKeyHasher::hash}, Python {@code hash_v1_block_key}): the hash of the
     * events drained from its {@code POST /kv_cache_events}. Not a digest algorithm of {@code index.hash.HashAlgo}:
     * a 64-bit integer chain ({@code index.block.TrtllmV1BlockKey}).
     */
    public static final String TRTLLM_V1_BLOCK_KEY = "v1_block_key";

    public enum Policy { ROUND_ROBIN, WEIGHTED, LEAST_OUTSTANDING, SESSION, CHWBL, KV_EXACT, PD }

    public enum Fallback { ROUND_ROBIN, WEIGHTED, LEAST_OUTSTANDING }

    public enum KvMode { BOUNDED, SOFT }

    /** {@code kv.spread}: how kv_exact places a request no cached prefix pins (see {@code KvKeys.SPREAD}). */
    public enum Spread { LEAST_LOADED, TWO_CHOICES, RECENT_WORK }

    public enum KeyMode { EXACT, LEARNED }

    public enum SessionKey { USER, CONVERSATION, HEADER, COOKIE }

    public enum SessionMode { HASH, TABLE }

    public static final List<String> SESSION_MODES = List.of("hash", "table");

    private static final Map<String, Engine> ENGINE_KINDS = byLowerCaseName(Engine.values());
    private static final Map<String, Policy> POLICY_KINDS = byLowerCaseName(Policy.values());
    private static final Map<String, Fallback> FALLBACK_KINDS = byLowerCaseName(Fallback.values());
    private static final Map<String, KeyMode> KEY_MODE_KINDS = byLowerCaseName(KeyMode.values());

    // These run on the request path (the routing stage and the front door ask per request): the configuration's
    // lower-case spellings are found without building an upper-case copy of the value each time.
    public Engine engineKind() {
        return kind(Engine.class, ENGINE_KINDS, engine);
    }

    public Policy policyKind() {
        return kind(Policy.class, POLICY_KINDS, policy);
    }

    public Fallback fallbackKind() {
        return kind(Fallback.class, FALLBACK_KINDS, fallback);
    }

    public KeyMode kvKeyModeKind() {
        return kind(KeyMode.class, KEY_MODE_KINDS, kvKeyMode);
    }

    private static <E extends Enum<E>> Map<String, E> byLowerCaseName(E[] values) {
        Map<String, E> m = new java.util.HashMap<>();
        for (E v : values) {
            m.put(v.name().toLowerCase(Locale.ROOT), v);
        }
        return Map.copyOf(m);
    }

    private static <E extends Enum<E>> E kind(Class<E> type, Map<String, E> byLowerCase, String value) {
        E e = byLowerCase.get(value);
        return e != null ? e : Enum.valueOf(type, value.toUpperCase(Locale.ROOT));
    }

    /** The priority classes of admission control, highest first; the lower-case name is the configuration value. */
    public static final List<String> PRIORITY_CLASSES = List.of("interactive", "standard", "batch");

    /**
     * Admission control: when every eligible endpoint of the rule is saturated, requests wait in a bounded queue
     * instead of an immediate 503. An endpoint is saturated when a configured threshold is passed: the engine's
     * waiting queue ({@code max_waiting}), its KV-cache usage ({@code max_kv_usage}, 0..1), or this gateway's
     * requests in flight to it ({@code max_outstanding}). A threshold that is absent (stored as -1) is off; with
     * every threshold off the rule has no admission control ({@link #enabled()} false).
     *
     * @param interactiveReserve of the count thresholds ({@code max_outstanding}, {@code max_waiting}), how much
     *                         only interactive requests may use: standard and batch see them this much lower
     * @param apiKeyPriorities SHA-256 (lower-case hex) of an API key to its priority class: the configuration holds
     *                         fingerprints, never the keys themselves
     */
    public record AdmissionConfig(int maxQueue, long maxWaitMs, int maxWaiting, double maxKvUsage, int maxOutstanding,
                                  int interactiveReserve, Map<String, String> apiKeyPriorities) {
        public static final int DEFAULT_MAX_QUEUE = 1024;
        public static final long DEFAULT_MAX_WAIT_MS = 5_000;
        public static final AdmissionConfig OFF = new AdmissionConfig(DEFAULT_MAX_QUEUE, DEFAULT_MAX_WAIT_MS, -1, -1, -1, 0, Map.of());

        public AdmissionConfig {
            apiKeyPriorities = Map.copyOf(apiKeyPriorities);
        }

        public boolean enabled() {
            return maxWaiting >= 0 || maxKvUsage >= 0 || maxOutstanding >= 0;
        }
    }

    private static AdmissionConfig admission(ConfigNode a) {
        int maxQueue = AdmissionKeys.MAX_QUEUE.read(a);
        long maxWaitMs = AdmissionKeys.MAX_WAIT_MS.read(a);
        // Absent: that threshold is off (no value in range means "off").
        int maxWaiting = AdmissionKeys.MAX_WAITING.readIfSet(a, -1);
        double maxKvUsage = AdmissionKeys.MAX_KV_USAGE.readIfSet(a, -1.0);
        int maxOutstanding = AdmissionKeys.MAX_OUTSTANDING.readIfSet(a, -1);
        int reserve = AdmissionKeys.INTERACTIVE_RESERVE.read(a);
        if (reserve > 0 && maxOutstanding >= 0 && reserve >= maxOutstanding) {
            a.problem("interactive_reserve", reserve, "must be < admission.max_outstanding (" + maxOutstanding
                + "): standard and batch requests would never be admitted");
        }
        if (maxWaiting >= 0 && reserve > maxWaiting) {
            a.problem("interactive_reserve", reserve, "must be <= admission.max_waiting (" + maxWaiting
                + "): standard and batch requests would never be admitted while the engine reports its queue");
        }
        if (reserve > 0 && maxOutstanding < 0 && maxWaiting < 0) {
            a.problem("interactive_reserve", reserve, "lowers max_outstanding / max_waiting for standard and batch requests:"
                + " set one of them");
        }
        Map<String, String> priorities = AdmissionKeys.API_KEY_PRIORITIES.read(a);
        for (Map.Entry<String, String> e : priorities.entrySet()) {
            if (!e.getKey().matches("[0-9a-f]{64}")) {
                a.problems().add(a.where("api_key_priorities") + ": key '" + e.getKey() + "' must be the SHA-256 of an API"
                    + " key in lower-case hex (64 characters; printf %s \"$KEY\" | sha256sum), not the key itself");
            }
            if (!PRIORITY_CLASSES.contains(e.getValue())) {
                a.problems().add(a.where("api_key_priorities") + "." + e.getKey() + ": value '" + e.getValue()
                    + "' must be one of " + String.join("|", PRIORITY_CLASSES));
            }
        }
        AdmissionConfig c = new AdmissionConfig(maxQueue, maxWaitMs, maxWaiting, maxKvUsage, maxOutstanding, reserve, priorities);
        if (!c.enabled() && (a.has("max_queue") || a.has("max_wait_ms") || !priorities.isEmpty())) {
            a.problems().add(a.where("max_queue") + ": admission settings without a saturation threshold do nothing; set"
                + " at least one of max_waiting, max_kv_usage, max_outstanding");
        }
        a.finish();
        return c;
    }

    /**
     * Hedged first token (issue #41 item 3, docs/hedging.md): an {@code interactive} request whose first token has not
     * arrived {@code afterMs} after it was sent goes to the next-best endpoint too; the first leg with a token wins.
     * With {@code ttftFactor} above 0 the wait is {@code max(afterMs, ttftFactor x the endpoint's recent TTFT)}, the
     * recent TTFT capped at the rule's fleet value (the router's per-endpoint estimate; {@code afterMs} alone while
     * the endpoint has none). The hedge legs' prompt tokens are capped at {@code maxExtraRatio} of the rule's
     * interactive prompt tokens over the last {@code windowMs}. {@code afterMs} 0: off.
     */
    public record HedgeConfig(long afterMs, double maxExtraRatio, long windowMs, double ttftFactor) {
        public static final double DEFAULT_MAX_EXTRA_RATIO = 0.1;
        public static final long DEFAULT_WINDOW_MS = 60_000;
        public static final HedgeConfig OFF = new HedgeConfig(0, DEFAULT_MAX_EXTRA_RATIO, DEFAULT_WINDOW_MS, 0);

        /** Without {@code ttft_factor}: a fixed wait of {@code afterMs}. */
        public HedgeConfig(long afterMs, double maxExtraRatio, long windowMs) {
            this(afterMs, maxExtraRatio, windowMs, 0);
        }

        public boolean enabled() {
            return afterMs > 0;
        }

        /**
         * The wait before hedging a request sent to an endpoint whose recent TTFT (capped at the fleet's) is
         * {@code recentTtftNs} (-1: no estimate yet), in ns.
         */
        public long waitNs(long recentTtftNs) {
            long floor = afterMs * 1_000_000L;
            if (ttftFactor <= 0 || recentTtftNs < 0) {
                return floor;
            }
            return Math.max(floor, (long) Math.min(Long.MAX_VALUE / 2.0, ttftFactor * recentTtftNs));
        }
    }

    private static HedgeConfig hedge(ConfigNode h) {
        int afterMs = HedgeKeys.AFTER_MS.readIfSet(h, 0);
        double ratio = HedgeKeys.MAX_EXTRA_RATIO.read(h);
        long windowMs = HedgeKeys.WINDOW_MS.read(h);
        double ttftFactor = HedgeKeys.TTFT_FACTOR.readIfSet(h, 0.0);
        if (afterMs == 0 && h.has("ttft_factor")) {
            h.problems().add(h.where("after_ms") + ": hedge.ttft_factor needs after_ms: it is the least wait, and the"
                + " wait while the endpoint has no TTFT estimate yet; set after_ms");
        } else if (afterMs == 0 && (h.has("max_extra_ratio") || h.has("window_ms"))) {
            h.problems().add(h.where("after_ms") + ": hedge settings without after_ms do nothing; set after_ms (the"
                + " wait for a first token before the request also goes to the next-best endpoint)");
        }
        h.finish();
        return new HedgeConfig(afterMs, ratio, windowMs, ttftFactor);
    }

    /**
     * Prefill/decode disaggregation knobs.
     *
     * @param minUncachedTokens conditional P/D: a request whose prompt the chosen decode endpoint already holds, or
     *                          whose part the decode endpoint does not hold is shorter than this, skips the prefill
     *                          leg and is served by the decode endpoint alone (0: only when it holds the prompt).
     *                          Sequential dialects (vLLM, TensorRT-LLM) only: an SGLang decode server cannot prefill
     *                          without its bootstrap rendezvous
     */
    public record PdConfig(long prefillTimeoutMs, long decodeTimeoutMs, String prefillPolicy, boolean sessionAffinity,
                           int minUncachedTokens) {
        public static final int DEFAULT_MIN_UNCACHED_TOKENS = 256;
    }

    public boolean isSglang() {
        return "sglang".equals(engine);
    }

    public static String defaultHashAlgo(String engine) {
        return EngineRules.of(engine).defaultHashAlgo();
    }

    /** The policies an engine cannot serve: kv_exact routes on KV events, pd needs a disaggregation protocol. */
    private static void engineSupportsPolicy(ConfigNode n, EngineRules engine, String policy) {
        boolean noEvents = "kv_exact".equals(policy) && !engine.publishesKvEvents();
        if (noEvents || ("pd".equals(policy) && !engine.disaggregates())) {
            n.problem("policy", policy, "engine '" + engine.name() + "' cannot serve it: llama-server publishes no KV-cache events"
                + ("pd".equals(policy) ? " and has no prefill/decode disaggregation" : " (kv_exact routes on them)")
                + "; use round_robin, weighted, least_outstanding, session or chwbl");
        }
    }

    private static TierWeights tierWeights(ConfigNode t) {
        TierWeights d = TierWeights.DEFAULTS;
        TierWeights w = new TierWeights(TierWeightKeys.GPU.read(t), TierWeightKeys.CPU_TIER.read(t), TierWeightKeys.DISK.read(t));
        t.finish();
        return w;
    }

    static RuleConfig read(ConfigNode n) {
        String name = n.requiredString(RuleKeys.NAME.name());
        List<ModelEntry> models = ModelEntry.readAll(n);
        if (models.isEmpty()) {
            n.problems().add(n.where("models") + ": must list at least one model name this rule serves");
        }
        String engine = RuleKeys.ENGINE.read(n);
        EngineRules rules = EngineRules.of(engine);
        checkAdapters(n, rules, models);
        String policy = RuleKeys.POLICY.read(n);
        engineSupportsPolicy(n, rules, policy);
        String fallback = RuleKeys.FALLBACK.read(n);
        List<EndpointConfig> endpoints = new ArrayList<>();
        for (ConfigNode e : n.children(EndpointKeys.SECTION.name())) {
            endpoints.add(EndpointConfig.read(e, rules.bootstrapPort()));
        }
        DiscoveryConfig discovery = n.has(DiscoveryKeys.SECTION.name())
            ? DiscoveryConfig.read(n.child(DiscoveryKeys.SECTION.name()), policy, engine) : DiscoveryConfig.STATIC;
        if (endpoints.isEmpty() && discovery.isStatic()) {
            n.problems().add(n.where("endpoints") + ": must list at least one endpoint (or set discovery: dns, kubernetes"
                + " or inference_pool)");
        }
        if (!endpoints.isEmpty() && !discovery.isStatic()) {
            n.problems().add(n.where("endpoints") + ": must be absent with discovery.type " + discovery.type()
                + ": the rule's endpoints are discovered");
        }
        String tokenizer = RuleKeys.TOKENIZER.read(n);
        ChatTemplateFile chatTemplate = chatTemplate(n, rules, tokenizer);
        // Validated as a long before narrowing: a huge value must be reported, not wrapped into range.
        // Defaults are the engines' own (EngineRules): vLLM may pick another size per attention backend when its
        // --block-size flag is absent: pass it.
        long defaultBlockSize = rules.defaultBlockSize();
        String blockSizeKey = RuleKeys.BLOCK_SIZE.name();
        long blockSizeValue = n.has(blockSizeKey) ? n.longValue(blockSizeKey, defaultBlockSize, Long.MIN_VALUE, Long.MAX_VALUE)
            : defaultBlockSize;
        int blockSize = (int) blockSizeValue;
        if (blockSizeValue < RuleKeys.BLOCK_SIZE.min().longValue() || blockSizeValue > RuleKeys.BLOCK_SIZE.max().longValue()) {
            n.problem(blockSizeKey, blockSizeValue, "must be in [" + RuleKeys.BLOCK_SIZE.min() + ", " + RuleKeys.BLOCK_SIZE.max()
                + "] and equal to the engines' block (page) size");
            blockSize = 16;
        }
        String hashSeed = RuleKeys.HASH_SEED.read(n);
        String hashAlgo = RuleKeys.HASH_ALGO.read(n, rules.defaultHashAlgo());
        List<String> algos = rules.hashAlgos();
        if (!algos.contains(hashAlgo)) {
            n.problem("hash_algo", hashAlgo, "cannot match engine '" + engine + "' (" + engine
                + " publishes " + String.join("|", algos) + rules.hashAlgoHint() + ")");
        }
        String keyMode = RuleKeys.KV_KEY_MODE.read(n, rules.defaultKeyMode());
        if (HASH_SEED_AUTO.equals(hashSeed) && rules.findsHashSeed() && "exact".equals(keyMode)
            && !"sha256_cbor".equals(hashAlgo)) {
            n.problem("hash_seed", hashSeed, "needs hash_algo sha256_cbor: vLLM with " + hashAlgo + " and no PYTHONHASHSEED"
                + " draws a random seed per process (os.urandom), so there is nothing to find; start the engines with"
                + " PYTHONHASHSEED and set hash_seed to it");
        }
        // TensorRT-LLM's streaming ZeroMQ publisher (PR #17023) sends the KV cache manager V2 radix key, which the
        // gateway reproduces (v2_sha256_64); the events drained from POST /kv_cache_events carry its C++
        // BlockKeyHasher's v1 block key (hash_algo v1_block_key), which the gateway reproduces too.
        if (rules.exactKeysHashAlgo() != null && "exact".equals(keyMode) && !rules.exactKeysHashAlgo().equals(hashAlgo)
            && !hashAlgo.equals(rules.httpExactKeysHashAlgo())) {
            n.problem("kv_key_mode", keyMode, "cannot match engine '" + engine + "' with hash_algo " + hashAlgo + ": exact keys"
                + " need hash_algo " + rules.exactKeysHashAlgo() + " with kv_events tcp:// (TensorRT-LLM's streaming publisher,"
                + " KV cache manager V2)" + (rules.httpExactKeysHashAlgo() == null ? ""
                : " or " + rules.httpExactKeysHashAlgo() + " with kv_events http:// (POST /kv_cache_events)"));
        }
        long capacity = RuleKeys.KV_CAPACITY_BLOCKS.read(n);
        boolean explain = RuleKeys.EXPLAIN.read(n);
        // Front-door bounds: each choice and each batched prompt costs the engine (and, on SGLang P/D, a bootstrap
        // room built by the gateway), and every prompt token is rendered, tokenized and hashed by the gateway.
        int maxN = RuleKeys.MAX_N.read(n);
        int maxPromptTokens = RuleKeys.MAX_PROMPT_TOKENS.read(n);
        // The model's context length: configured here, else (0) discovered from the endpoints at run time.
        int maxModelLen = RuleKeys.MAX_MODEL_LEN.read(n, 0);
        String onContextOverflow = RuleKeys.ON_CONTEXT_OVERFLOW.read(n);

        ConfigNode s = n.child(SessionKeys.SECTION.name());
        // hash became the default in #14; a configuration written before it that tunes the TTL table (ttl_ms or
        // max_entries) without naming a mode keeps the table it asked for, rather than being refused or changing
        // meaning (add, don't break). Naming mode: hash with table knobs is refused below.
        String defaultSessionMode = !s.has(SessionKeys.MODE.name())
            && (s.has(SessionKeys.TTL_MS.name()) || s.has(SessionKeys.MAX_ENTRIES.name())) ? "table" : SessionKeys.MODE.defaultValue();
        SessionConfig session = new SessionConfig(SessionKeys.KEY.read(s), SessionKeys.HEADER.read(s), SessionKeys.COOKIE.read(s),
            SessionKeys.TTL_MS.read(s), SessionKeys.MAX_ENTRIES.read(s), SessionKeys.PIN_SLOT.read(s), SessionKeys.SLOTS.read(s),
            SessionKeys.MODE.read(s, defaultSessionMode), SessionKeys.LOAD_CAP_FACTOR.read(s), SessionKeys.LOAD_SLACK.read(s),
            SessionKeys.SHARE_CAP_FACTOR.read(s));
        if (session.shareCapFactor() > 0 && session.shareCapFactor() < 1) {
            s.problem("share_cap_factor", session.shareCapFactor(), "must be 0 (off) or at least 1.0: it is a multiple of"
                + " an endpoint's fair share of the conversations, and below 1 every endpoint would shed");
        }
        if (session.pinSlot() && !rules.pinsSlots()) {
            s.problem("pin_slot", true, "pins a llama.cpp slot (id_slot): only valid with engine 'llamacpp' (this rule's engine is '"
                + engine + "')");
        }
        if (session.pinSlot() && !"session".equals(policy)) {
            s.problem("pin_slot", true, "pins the slot of a session-affine request: only valid under policy 'session' (this rule's policy is '"
                + policy + "')");
        }
        // Each mode's own knobs: one set for the other mode would be silently ignored.
        Map<String, Object> tableKnobs = Map.of("ttl_ms", session.ttlMs(), "max_entries", session.maxEntries());
        Map<String, Object> hashKnobs = Map.of("load_cap_factor", session.loadCapFactor(), "load_slack", session.loadSlack(),
            "share_cap_factor", session.shareCapFactor());
        for (String k : List.of("ttl_ms", "max_entries")) {
            if (s.has(k) && session.modeKind() != SessionMode.TABLE) {
                s.problem(k, tableKnobs.get(k), "applies to the pin table only (session.mode: table); this rule's session.mode is '"
                    + session.mode() + "' (the default since #14: the endpoint follows from the session key by consistent"
                    + " hashing, no table); set session.mode: table to keep the TTL table, or remove " + k);
            }
        }
        for (String k : List.of("load_cap_factor", "load_slack", "share_cap_factor")) {
            if (s.has(k) && session.modeKind() != SessionMode.HASH) {
                s.problem(k, hashKnobs.get(k), "bounds the load of hashed sessions (session.mode: hash); this rule's session.mode is '"
                    + session.mode() + "', whose pins follow the fallback policy's choice");
            }
        }
        if ("header".equals(session.key()) && session.header() == null) {
            s.problems().add(s.where("header") + ": is required when session.key is 'header'");
        }
        if ("cookie".equals(session.key()) && session.cookie() == null) {
            s.problems().add(s.where("cookie") + ": is required when session.key is 'cookie'");
        }
        s.finish();

        ConfigNode c = n.child(ChwblKeys.SECTION.name());
        ChwblConfig chwbl = new ChwblConfig(ChwblKeys.PREFIX_TOKENS.read(c), ChwblKeys.PREFIX_BLOCKS.read(c),
            ChwblKeys.VIRTUAL_NODES.read(c), ChwblKeys.LOAD_FACTOR.read(c), ChwblKeys.PREFIX_CHARS.read(c),
            ChwblKeys.SKIP_COMMON_PREFIX.read(c));
        c.finish();

        ConfigNode k = n.child(KvKeys.SECTION.name());
        // vLLM (X-data-parallel-rank, OpenAIServing._get_data_parallel_rank) and SGLang (the same header, read by
        // OpenAIServingBase.extract_routed_dp_rank_from_header before the body's routed_dp_rank) pin a request to the
        // DP rank it names; TensorRT-LLM's attention DP and llama.cpp take no rank.
        boolean rankHintEngine = rules.readsDpRankHeader();
        boolean dpRankHint = KvKeys.DP_RANK_HINT.read(k, rankHintEngine);
        if (dpRankHint && !rankHintEngine) {
            k.problem("dp_rank_hint", true, "engine '" + engine + "' takes no DP rank hint (only vllm and sglang read"
                + " X-data-parallel-rank): its ranks are scored as one endpoint");
        }
        KvExactConfig kv = new KvExactConfig(KvKeys.MODE.read(k), KvKeys.LOAD_CAP_FACTOR.read(k), KvKeys.LOAD_SLACK.read(k),
            KvKeys.LAMBDA.read(k), KvKeys.MIN_MATCH_BLOCKS.read(k), KvKeys.COLD_READMIT_EVERY.read(k),
            KvKeys.SPECULATIVE_TTL_MS.read(k), KvKeys.WATCHDOG_ZERO_HIT_STREAK.read(k), KvKeys.PARITY_PROBE_AT_STARTUP.read(k),
            KvKeys.WARMUP_MS.read(k), tierWeights(k.child(TierWeightKeys.SECTION.name())), KvKeys.PREFILL_TOKEN_WEIGHT.read(k),
            dpRankHint, KvKeys.MIN_MATCH_FRACTION.read(k), KvKeys.SPREAD.read(k),
            KvKeys.RECENT_WORK_WINDOW_MS.read(k));
        k.finish();

        ConfigNode p = n.child(PdKeys.SECTION.name());
        PdConfig pd = new PdConfig(PdKeys.PREFILL_TIMEOUT_MS.read(p), PdKeys.DECODE_TIMEOUT_MS.read(p),
            PdKeys.PREFILL_POLICY.read(p), PdKeys.SESSION_AFFINITY.read(p),
            PdKeys.MIN_UNCACHED_TOKENS.read(p, rules.decodeServesAlone() ? PdKeys.MIN_UNCACHED_TOKENS.defaultValue() : 0));
        if (!rules.decodeServesAlone() && rules.disaggregates() && pd.minUncachedTokens() > 0) {
            p.problem("min_uncached_tokens", pd.minUncachedTokens(), "cannot apply to engine '" + engine + "': an SGLang decode server"
                + " (--disaggregation-mode decode) serves a request only through the bootstrap rendezvous with a prefill server,"
                + " so the prefill leg can never be skipped");
        }
        p.finish();

        AdmissionConfig admission = admission(n.child(AdmissionKeys.SECTION.name()));
        HedgeConfig hedge = hedge(n.child(HedgeKeys.SECTION.name()));

        // Cross-field rules.
        long prefills = endpoints.stream().filter(e -> "prefill".equals(e.role())).count();
        long decodes = endpoints.stream().filter(e -> "decode".equals(e.role())).count();
        if ("pd".equals(policy) && discovery.isStatic()) {
            if (prefills == 0) {
                n.problems().add(n.where("endpoints") + ": policy 'pd' needs at least one endpoint with role: prefill");
            }
            if (decodes == 0) {
                n.problems().add(n.where("endpoints") + ": policy 'pd' needs at least one endpoint with role: decode");
            }
            for (EndpointConfig e : endpoints) {
                if (e.role() == null) {
                    n.problems().add(n.where("endpoints") + " (url=" + e.url() + "): role is required under policy 'pd' (prefill|decode)");
                }
            }
        } else if (prefills + decodes > 0) {
            n.problems().add(n.where("endpoints") + ": role is only valid under policy 'pd' (this rule's policy is '" + policy + "')");
        }
        for (EndpointConfig e : endpoints) {
            if (e.kvEvents() == null) {
                continue;
            }
            if (!rules.publishesKvEvents()) {
                n.problems().add(n.where("endpoints") + " (url=" + e.url() + "): kv_events " + e.kvEvents() + " is only valid"
                    + " for engines that publish KV events (vllm, sglang over ZeroMQ; trtllm over HTTP or ZeroMQ); engine '"
                    + engine + "' publishes none");
            } else if (rules.drainsKvEventsOverHttp() && e.kvEventsOverHttp() && "exact".equals(keyMode)
                && !hashAlgo.equals(rules.httpExactKeysHashAlgo())) {
                n.problems().add(n.where("endpoints") + " (url=" + e.url() + "): kv_events " + e.kvEvents() + " cannot"
                    + " serve kv_key_mode exact with hash_algo " + hashAlgo + ": the events of POST /kv_cache_events carry"
                    + " TensorRT-LLM's v1 block key, not the radix key; set hash_algo: " + rules.httpExactKeysHashAlgo()
                    + ", subscribe to its streaming publisher (tcp://host:port), or use kv_key_mode learned");
            } else if (rules.drainsKvEventsOverHttp() && !e.kvEventsOverHttp() && "exact".equals(keyMode)
                && hashAlgo.equals(rules.httpExactKeysHashAlgo())) {
                n.problems().add(n.where("endpoints") + " (url=" + e.url() + "): kv_events " + e.kvEvents() + " cannot"
                    + " serve kv_key_mode exact with hash_algo " + hashAlgo + ": TensorRT-LLM's streaming publisher sends the"
                    + " KV cache manager V2 radix key (hash_algo " + rules.exactKeysHashAlgo() + "); v1 block keys are drained"
                    + " over http://host:port/kv_cache_events");
            } else if (!rules.drainsKvEventsOverHttp() && e.kvEventsOverHttp()) {
                n.problems().add(n.where("endpoints") + " (url=" + e.url() + "): kv_events " + e.kvEvents() + " must be"
                    + " tcp://host:port for engine '" + engine + "' (it publishes over ZeroMQ; http:// is TensorRT-LLM's"
                    + " draining endpoint)");
            }
        }
        for (EndpointConfig e : endpoints) {
            if (e.bootstrapPort() > 0 && !(rules.bootstrapPort() && "pd".equals(policy) && "prefill".equals(e.role()))) {
                n.problems().add(n.where("endpoints") + " (url=" + e.url() + "): bootstrap_port " + e.bootstrapPort()
                    + " is only valid on SGLang prefill endpoints of a 'pd' rule");
            }
        }
        ConfigNode h = n.child(RuleHealthKeys.SECTION.name());
        HealthOverride health = new HealthOverride(RuleHealthKeys.PATH.read(h), RuleHealthKeys.TIMEOUT_MS.read(h));
        if (health.path() != null && !health.path().startsWith("/")) {
            h.problem("path", health.path(), "must start with '/' (e.g. /health_generate, SGLang's deep probe)");
        }
        h.finish();
        GreedyN greedyN = GreedyN.valueOf(RuleKeys.GREEDY_N.read(n).toUpperCase(Locale.ROOT));
        // The engines run speculative decoding behind a server flag the gateway cannot see: vLLM then ignores
        // logit_bias and min_p (a start-up warning is the only notice), so the rule says so and the gateway refuses
        // those fields instead of letting them be a silent no-op (review row 14).
        boolean speculative = RuleKeys.SPECULATIVE.read(n);
        int maxLogitBias = RuleKeys.MAX_LOGIT_BIAS.read(n);
        String toolCallParser = RuleKeys.TOOL_CALL_PARSER.read(n);
        if (toolCallParser != null && !toolCallParser.matches("[A-Za-z0-9_.-]+")) {
            n.problem("tool_call_parser", toolCallParser, "must be the parser name the engines were launched with"
                + " (--tool-call-parser, e.g. hermes, llama3_json) or none (launched without one)");
            toolCallParser = null;
        }
        FailoverConfig failover = FailoverConfig.read(n.child(FailoverKeys.SECTION.name()), policy);
        n.finish();
        return new RuleConfig(name, List.copyOf(models), engine, policy, fallback, List.copyOf(endpoints), tokenizer, blockSize,
            hashSeed, hashAlgo, keyMode, capacity, explain, session, chwbl, kv, pd, maxN, maxPromptTokens, admission, health,
            maxModelLen, onContextOverflow, chatTemplate, greedyN, speculative, maxLogitBias, toolCallParser, discovery, hedge, failover);
    }
}
