package io.kvgate.control.config;

import java.util.ArrayList;
import java.util.List;

/** The keys of one rule ({@code rules[]}); its sections ({@code kv}, {@code session}, ...) have their own {@code *Keys}. */
public final class RuleKeys {
    private RuleKeys() {}

    public static final ConfigSection<RuleConfig> SECTION = ConfigSection.listOf(GatewayKeys.SECTION, "rules",
        "routing rules; each model is served by exactly one rule", GatewayConfig::rules);

    public static final ConfigKey<RuleConfig, Object> NAME = SECTION.customKey("name", "string, required")
        .defaultText("required").doc("rule name (unique; `ctl patch` and metrics name it)").readBack(RuleConfig::name);
    public static final ConfigKey<RuleConfig, Object> MODELS = SECTION.customKey("models", "list of names or `models[]` mappings")
        .defaultText("required").doc("client-facing model names the rule serves (`/v1/models` lists them; unique across rules)")
        .readBack(RuleKeys::models);
    public static final ConfigKey<RuleConfig, String> ENGINE = SECTION.enumKey("engine", "vllm", RuleConfig.Engine.class)
        .doc("decides hashing, P/D dialect and what the engine can serve (see [engines](engines.md))").readBack(RuleConfig::engine);
    public static final ConfigKey<RuleConfig, String> POLICY = SECTION.enumKey("policy", "round_robin", RuleConfig.Policy.class)
        .doc("how a request picks an endpoint (see [routing](routing.md))").readBack(RuleConfig::policy);
    public static final ConfigKey<RuleConfig, String> FALLBACK = SECTION.enumKey("fallback", "least_outstanding",
            RuleConfig.Fallback.class)
        .doc("policy used when the main one has no answer (no match, no prompt)").live().readBack(RuleConfig::fallback);
    public static final ConfigKey<RuleConfig, String> TOKENIZER = SECTION.stringKey("tokenizer", null)
        .doc("directory with tokenizer.json[.gz] and tokenizer_config.json (relative to the config file)")
        .readBack(RuleConfig::tokenizer);
    public static final ConfigKey<RuleConfig, String> CHAT_TEMPLATE = SECTION.stringKey("chat_template", null)
        .defaultText("the tokenizer's").doc("the engines' `--chat-template` file (vllm, sglang; needs `tokenizer`)")
        .readBack(r -> r.chatTemplate() == null ? null : r.chatTemplate().path());
    // Validated as a long before narrowing (a huge value must be reported, not wrapped into range), by its own code.
    public static final ConfigKey<RuleConfig, Object> BLOCK_SIZE = SECTION.customKey("block_size", "integer", 1, 4096)
        .defaultText("the engine's: vllm 16, sglang 1, trtllm 32, llamacpp 16")
        .doc("tokens per KV block; must equal the engines' block (page) size").readBack(RuleConfig::blockSize);
    public static final ConfigKey<RuleConfig, String> HASH_SEED = SECTION.stringKey("hash_seed", "0")
        .doc("the engines' `PYTHONHASHSEED`, or `auto` (found from vLLM's events by the parity probe)")
        .readBack(RuleConfig::hashSeed);
    public static final ConfigKey<RuleConfig, String> HASH_ALGO = SECTION.stringKey("hash_algo", null)
        .defaultText("`sha256_cbor` (sglang: `sha256_sglang`, trtllm: `v2_sha256_64`)")
        .doc("block hash: `sha256_cbor` \\| `xxhash_cbor` (vllm, llamacpp), `sha256_sglang` (sglang), `v2_sha256_64`"
            + " (trtllm's streaming KV-event publisher), `v1_block_key` (trtllm's `POST /kv_cache_events`: with"
            + " `kv_key_mode: exact`, salted and LoRA requests get no keys)")
        .readBack(RuleConfig::hashAlgo);
    public static final ConfigKey<RuleConfig, String> KV_KEY_MODE = SECTION.enumKey("kv_key_mode", "exact", RuleConfig.KeyMode.class)
        .defaultText("`exact` (trtllm: `learned`)")
        .doc("`exact`: the engines' block hashes; `learned`: the gateway's hash of the events' tokens")
        .readBack(RuleConfig::kvKeyMode);
    public static final ConfigKey<RuleConfig, Long> KV_CAPACITY_BLOCKS = SECTION.longKey("kv_capacity_blocks", 1_000_000, 1_024,
            RuleConfig.MAX_KV_CAPACITY_BLOCKS)
        .doc("block index capacity (the index holds the largest of the rules')")
        .restartOnly("the index is sized at start-up").readBack(RuleConfig::kvCapacityBlocks);
    public static final ConfigKey<RuleConfig, Boolean> EXPLAIN = SECTION.boolKey("explain", false)
        .doc("log and expose each routing decision's reasons").live().readBack(RuleConfig::explain);
    public static final ConfigKey<RuleConfig, Integer> MAX_N = SECTION.intKey("max_n", RuleConfig.DEFAULT_MAX_N, 1, 4096)
        .doc("choices (`n`) and batched prompts one request may ask for").live().readBack(RuleConfig::maxN);
    public static final ConfigKey<RuleConfig, Integer> MAX_PROMPT_TOKENS = SECTION.intKey("max_prompt_tokens",
            RuleConfig.DEFAULT_MAX_PROMPT_TOKENS, 1, 1 << 24)
        .doc("largest prompt the gateway tokenizes (also bounded by the context length)").live()
        .readBack(RuleConfig::maxPromptTokens);
    public static final ConfigKey<RuleConfig, Integer> MAX_MODEL_LEN = SECTION.optionalIntKey("max_model_len", 1,
            RuleConfig.MAX_MODEL_LEN, "discovered from the endpoints")
        .doc("the model's context length in tokens").live().readBack(r -> r.maxModelLen() > 0 ? r.maxModelLen() : null);
    public static final ConfigKey<RuleConfig, String> ON_CONTEXT_OVERFLOW = SECTION.oneOfKey("on_context_overflow",
            RuleConfig.ON_CONTEXT_OVERFLOW.get(0), RuleConfig.ON_CONTEXT_OVERFLOW)
        .doc("a prompt + budget over the context length: OpenAI's 400, or the budget lowered to fit").live()
        .readBack(RuleConfig::onContextOverflow);
    public static final ConfigKey<RuleConfig, String> GREEDY_N = SECTION.enumKey("greedy_n", "replicate", RuleConfig.GreedyN.class)
        .doc("`n > 1` at temperature 0: one choice answered n times where the engine refuses it, or vLLM's 400").live()
        .readBack(r -> r.greedyN().configValue());
    public static final ConfigKey<RuleConfig, Boolean> SPECULATIVE = SECTION.boolKey("speculative", false)
        .doc("the engines run speculative decoding: `logit_bias` and `min_p` are refused").live().readBack(RuleConfig::speculative);
    public static final ConfigKey<RuleConfig, Integer> MAX_LOGIT_BIAS = SECTION.intKey("max_logit_bias",
            RuleConfig.DEFAULT_MAX_LOGIT_BIAS, 0, RuleConfig.MAX_LOGIT_BIAS)
        .doc("entries one request's `logit_bias` may carry").live().readBack(RuleConfig::maxLogitBias);
    public static final ConfigKey<RuleConfig, String> TOOL_CALL_PARSER = SECTION.stringKey("tool_call_parser", null)
        .defaultText("not declared").doc("the engines' `--tool-call-parser`, or `none` (tool choice `auto` refused)").live()
        .readBack(RuleConfig::toolCallParser);

    /** {@code models}: a plain name as a string, a renamed one (or one with adapters) as its mapping. */
    private static List<Object> models(RuleConfig r) {
        List<Object> out = new ArrayList<>();
        for (ModelEntry e : r.modelEntries()) {
            out.add(e.servedAs() == null && e.adapters().isEmpty() ? e.name() : ModelKeys.SECTION.write(e, true));
        }
        return out;
    }
}
