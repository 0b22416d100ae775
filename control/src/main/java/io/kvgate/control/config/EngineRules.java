package io.kvgate.control.config;

import java.util.List;

/**
 * What the configuration checks need to know about one engine, as data: the rule checks in {@link RuleConfig} read
 * these fields instead of comparing engine names, so an engine's configuration facts live in one place (here, in
 * {@code control}, which the data plane's engine profiles build on: each {@code EngineProfile} answers its own
 * {@link #of(String)} entry, and {@code EngineRulesProfileTest} keeps the two in agreement). Immutable.
 *
 * @param name               the engine's configuration name ({@code engine:})
 * @param defaultBlockSize   the engine's own default block (page) size: SGLang's page size 1, TensorRT-LLM's
 *                           {@code tokens_per_block} 32, vLLM's {@code --block-size} 16
 * @param hashAlgos          the {@code hash_algo} values whose keys can match the engine's; the first is the default
 * @param hashAlgoHint       what the {@code hash_algo} error adds after the list (how to start the engine to match)
 * @param defaultKeyMode     {@code kv_key_mode} when the rule does not say ({@code learned} where the gateway cannot
 *                           reproduce every event's key)
 * @param exactKeysHashAlgo  the only {@code hash_algo} that gives exact keys over ZeroMQ ({@code kv_events: tcp://}),
 *                           or null when any listed one does
 * @param httpExactKeysHashAlgo the only {@code hash_algo} that gives exact keys for events drained over HTTP
 *                           ({@code kv_events: http://}), or null when drained events never give exact keys
 * @param findsHashSeed      {@code hash_seed: auto} is meaningful (vLLM's seed found from its events)
 * @param publishesKvEvents  the engine publishes KV-cache events ({@code kv_exact}, {@code kv_events})
 * @param drainsKvEventsOverHttp the engine's events may also be drained over HTTP ({@code kv_events: http://})
 * @param disaggregates      the engine has a prefill/decode disaggregation protocol ({@code policy: pd})
 * @param decodeServesAlone  a P/D decode server can serve a request without its prefill (conditional P/D)
 * @param servesAdapters     LoRA adapters may be listed ({@code adapters}) for this engine
 * @param splitsModelAtColon the engine reads {@code model: "base:adapter"} (a ':' in a served name selects an adapter)
 * @param reproducedTemplates the gateway reproduces the engine's {@code --chat-template} resolution
 * @param templateNeedsJinja a {@code chat_template} file must end in {@code .jinja} (any other is the engine's own format)
 * @param readsDpRankHeader  the engine pins a request to the DP rank named by {@code X-data-parallel-rank}
 * @param pinsSlots          the engine's slots can be pinned per session ({@code session.pin_slot}: llama.cpp's id_slot)
 * @param bootstrapPort      P/D prefill endpoints take a {@code bootstrap_port} (SGLang's rendezvous)
 */
public record EngineRules(String name, int defaultBlockSize, List<String> hashAlgos, String hashAlgoHint,
                          String defaultKeyMode, String exactKeysHashAlgo, String httpExactKeysHashAlgo, boolean findsHashSeed, boolean publishesKvEvents,
                          boolean drainsKvEventsOverHttp, boolean disaggregates, boolean decodeServesAlone,
                          boolean servesAdapters, boolean splitsModelAtColon, boolean reproducedTemplates,
                          boolean templateNeedsJinja, boolean readsDpRankHeader, boolean pinsSlots, boolean bootstrapPort) {
    public static final EngineRules VLLM = new EngineRules("vllm", 16, List.of("sha256_cbor", "xxhash_cbor"),
        "; start vLLM with --prefix-caching-hash-algo sha256_cbor", "exact", null, null, true, true, false, true, true, true, false,
        true, false, true, false, false);
    public static final EngineRules SGLANG = new EngineRules("sglang", 1, List.of("sha256_sglang"), "", "exact", null, null, false,
        true, false, true, false, true, true, true, true, true, false, true);
    /**
     * TensorRT-LLM: {@code v2_sha256_64} is the radix key its streaming ZeroMQ publisher sends, {@code v1_block_key}
     * the hash of the events drained from its {@code POST /kv_cache_events}; {@code sha256_cbor} and
     * {@code xxhash_cbor} stay accepted because configurations written before them named them (learned mode ignores
     * them).
     */
    public static final EngineRules TRTLLM = new EngineRules("trtllm", 32,
        List.of("v2_sha256_64", RuleConfig.TRTLLM_V1_BLOCK_KEY, "sha256_cbor", "xxhash_cbor"),
        "; v2_sha256_64 is the key of its streaming KV-event publisher, v1_block_key the hash of its POST /kv_cache_events",
        "learned", "v2_sha256_64", RuleConfig.TRTLLM_V1_BLOCK_KEY, false, true, true, true,
        true, false, false, false, false, false, false, false);
    public static final EngineRules LLAMACPP = new EngineRules("llamacpp", 16, List.of("sha256_cbor", "xxhash_cbor"),
        "; start vLLM with --prefix-caching-hash-algo sha256_cbor", "exact", null, null, false, false, false, false, false, false,
        false, false, false, false, true, false);

    public static final List<EngineRules> ALL = List.of(VLLM, SGLANG, TRTLLM, LLAMACPP);

    public EngineRules {
        hashAlgos = List.copyOf(hashAlgos);
    }

    /** The rules of {@code engine} (a name of {@link RuleConfig#ENGINES}; the engine key refuses any other). */
    public static EngineRules of(String engine) {
        for (EngineRules r : ALL) {
            if (r.name.equals(engine)) {
                return r;
            }
        }
        throw new IllegalArgumentException("no engine '" + engine + "'");
    }

    /** The {@code hash_algo} a rule of this engine gets when it does not name one. */
    public String defaultHashAlgo() {
        return hashAlgos.get(0);
    }

    /** The engines whose rules have {@code property}, as the configuration errors name them ("'vllm' and 'sglang'"). */
    static String names(java.util.function.Predicate<EngineRules> property) {
        List<String> names = ALL.stream().filter(property).map(r -> "'" + r.name + "'").toList();
        return names.size() <= 1 ? String.join("", names)
            : String.join(", ", names.subList(0, names.size() - 1)) + " and " + names.get(names.size() - 1);
    }
}
