package io.kvgate.tools.sim;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.LongSupplier;

/**
 * Everything one simulated engine needs to know, in one place, validated once by {@link #validate()} (called by
 * {@link EngineSimulator#start}) with messages that name the field, the value and the rule. Mutable builder style
 * (fluent setters) because tests tweak one or two knobs; not thread-safe, hand it over before {@code start}.
 */
public final class SimulatorConfig {
    /** Which engine's wire behaviour to reproduce. */
    public enum Dialect {
        VLLM, SGLANG, TRTLLM, LLAMACPP;

        /** Request/response shapes: TensorRT-LLM's OpenAI protocol is modelled on vLLM's (see CompletionRequest). */
        boolean vllmLike() {
            return this == VLLM || this == TRTLLM;
        }
    }

    /** Error body shape: {@code flat} = {"object":"error",...} (older vLLM, SGLang), {@code openai} = {"error":{...}}. */
    public enum ErrorShape { FLAT, OPENAI }

    /** P/D role of this engine. */
    public enum Role { BOTH, PREFILL, DECODE }

    /** KV event encoding: tag-first positional arrays (older engines) or maps with a "type" key (newer). */
    public enum EventForm { ARRAY, MAP }

    /**
     * vLLM's context-length rule: {@code clamp} (current: {@code max_tokens} silently lowered to what fits, 200 with
     * {@code finish_reason: "length"}) or {@code reject} (builds whose {@code _validate_input} answers 400 when
     * prompt + {@code max_tokens} exceed {@code max_model_len}).
     */
    public enum ContextCheck { CLAMP, REJECT }

    public static final int MAX_DP_RANKS = 8;

    Dialect dialect = Dialect.VLLM;
    String host = "127.0.0.1";
    int port = 0;
    String model = "sim-model";
    long seed = 0;
    double ttftMs = 20;
    double itlMs = 10;
    double prefillUsPerToken = 50;
    int maxConcurrency = 64;
    int queueDepth = 256;
    int contextLen = 8192;
    ErrorShape errorShape;           // null = dialect default (vLLM openai, SGLang flat)
    boolean enableMetrics;           // SGLang, llama.cpp: /metrics mounted; trtllm: /prometheus/metrics (return_perf_metrics)
    int maxBodyBytes = 8 << 20;
    ContextCheck vllmContextCheck = ContextCheck.CLAMP;
    /** LoRA adapters served (vLLM --lora-modules, SGLang --lora-paths); empty = LoRA disabled. */
    java.util.List<String> loraAdapters = new ArrayList<>();
    /** SGLang: SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION set, so /health is the deep probe. */
    boolean sglangHealthGenerates;
    /** SGLang HEALTH_CHECK_TIMEOUT: how long /health_generate waits for the scheduler before 503 (default 20 s). */
    long healthTimeoutMs = 20_000;
    /** vLLM builds that export vllm:gpu_cache_usage_perc instead of vllm:kv_cache_usage_perc. */
    boolean legacyMetrics;
    /** llama.cpp: how long the model "loads" after start; /health and requests answer 503 until then. */
    long loadMs;
    /**
     * llama.cpp router mode (llama-server started without {@code -m}): {@code /props} without {@code ?model=} says
     * {@code role: "router"}; {@code /props}, {@code /slots} and {@code /metrics} need {@code ?model=};
     * {@code /v1/models} states each model's {@code status}; {@code /health} is the router's own (200 while loading).
     */
    boolean llamaRouter;
    /** TensorRT-LLM kv_cache_config.event_buffer_max_size (0 = no events). */
    int kvEventBufferSize = 1024;
    /**
     * TensorRT-LLM's event hash form: {@code legacy} (integers, no {@code hash_algo} key: the C++ manager's
     * serializer), {@code v1_block_key} (KV cache manager V2, integers, {@code hash_algo} named) or {@code v2_sha256}
     * (V2 with {@code kv_cache_event_hash_algo: v2_sha256}: every hash a 64-digit hex string).
     */
    String trtllmHashAlgo = "legacy";
    static final List<String> TRTLLM_HASH_ALGOS = List.of("legacy", "v1_block_key", "v2_sha256");
    /**
     * The engine's {@code --tool-call-parser} (vLLM with {@code --enable-auto-tool-choice}), or null: launched without
     * one, so vLLM refuses {@code tool_choice: "auto"} and SGLang answers tool calls as plain content.
     */
    String toolCallParser;
    /** Fault commands applied when the engine starts ({@code --fault JSON}, the JSON of {@code POST /sim/faults}). */
    final java.util.List<String> startFaults = new java.util.ArrayList<>();
    /**
     * A pooling (embedding) model: vLLM ({@code --runner pooling}) mounts the pooling routes instead of the generation
     * ones; SGLang ({@code --is-embedding}) mounts every route and says {@code is_embedding} in its server info.
     */
    boolean pooling;
    Path modelDir;
    /** The engine's {@code --chat-template FILE} (vLLM: any file, used as read; SGLang: a .jinja file), or null. */
    Path chatTemplate;
    /** Words generated when the request gives no max_tokens: the "EOS" length drawn per request in [min,max]. */
    int naturalMinTokens = 8;
    int naturalMaxTokens = 48;
    /** Epoch seconds for the {@code created} field; injectable so SSE bytes are reproducible in tests. */
    LongSupplier epochSeconds = () -> System.currentTimeMillis() / 1000;

    // ---- phase 2: prefix cache and KV events
    int blockSize = -1;              // -1 = dialect default (vLLM 16, SGLang page size 1)
    int cacheBlocks = 16384;         // capacity per DP rank, in blocks
    String hashAlgo;                 // null = dialect default (sha256_cbor / sha256_sglang)
    String hashSeed = "0";           // vLLM PYTHONHASHSEED string
    int dpRanks = 1;
    String kvEventsEndpoint;         // tcp://host:port, rank r publishes on port + r
    String kvReplayEndpoint;         // tcp://host:port, rank r replays on port + r
    String kvTopic = "kv";
    /** auto = like the engines: bind when the host is a wildcard ({@code *}), connect otherwise. */
    String kvEventsMode = "auto";
    EventForm eventForm = EventForm.ARRAY;
    int replayBufferSteps = 10_000;
    int eventQueueDepth = 65_536;
    /** {@code --kv-flood}: block ops per second of replayed real KV events (0 = off), see {@link KvFlood}. */
    long kvFloodRate;
    /** {@code --kv-batch}: blocks per BlockStored event of the flood. */
    int kvFloodBatch = 32;
    /** {@code --kv-flood-seconds}: how long the flood runs (0 = until the simulator stops). */
    long kvFloodSeconds;
    /**
     * {@code --hybrid-group KIND}: vLLM serving a hybrid model. Its full-attention group (group_idx 0) is the prefix
     * cache; a second group of this {@code kv_cache_spec_kind} (sliding_window, mamba, ...) announces its own copies of
     * the same blocks at {@link #hybridBlockSize}. Null = one group (no group fields beyond group_idx 0).
     */
    String hybridGroupKind;
    /**
     * {@code --hybrid-block-size N}: the second group's block size; the engine then hashes every
     * gcd(block_size, N) tokens and names each full-attention block by its last fine hash
     * (vLLM's {@code BlockHashListWithBlockSize}). 0 = the full group's block size.
     */
    int hybridBlockSize;
    /**
     * SGLang's server-info routes: {@code both} (today's servers: {@code /server_info} and the deprecated
     * {@code /get_server_info}), {@code server_info} (after the alias is removed), {@code get_server_info} (servers
     * before sgl-project/sglang#21463).
     */
    String serverInfoRoutes = "both";
    /** SGLang {@code --speculative-algorithm} as its server info states it (EAGLE keys the radix tree by token pairs). */
    String speculativeAlgorithm;

    // ---- phase 3: P/D
    Role role = Role.BOTH;
    String pdSecret;
    PdRegistry pdRegistry;           // in-process registry shared by simulators (tests); default: JVM-global
    String engineId;                 // vLLM remote_engine_id; default derived from host:port
    int bootstrapPort = -1;          // SGLang prefill bootstrap listener; -1 = none (0 = ephemeral)
    long bootstrapTimeoutMs = 30_000;

    public SimulatorConfig dialect(Dialect v) { dialect = v; return this; }
    public SimulatorConfig host(String v) { host = v; return this; }
    public SimulatorConfig port(int v) { port = v; return this; }
    public SimulatorConfig model(String v) { model = v; return this; }
    public SimulatorConfig seed(long v) { seed = v; return this; }
    public SimulatorConfig ttftMs(double v) { ttftMs = v; return this; }
    public SimulatorConfig itlMs(double v) { itlMs = v; return this; }
    public SimulatorConfig prefillUsPerToken(double v) { prefillUsPerToken = v; return this; }
    public SimulatorConfig maxConcurrency(int v) { maxConcurrency = v; return this; }
    public SimulatorConfig queueDepth(int v) { queueDepth = v; return this; }
    public SimulatorConfig contextLen(int v) { contextLen = v; return this; }
    public SimulatorConfig errorShape(ErrorShape v) { errorShape = v; return this; }
    public SimulatorConfig enableMetrics(boolean v) { enableMetrics = v; return this; }
    public SimulatorConfig maxBodyBytes(int v) { maxBodyBytes = v; return this; }
    public SimulatorConfig toolCallParser(String v) { toolCallParser = v; return this; }
    /** A fault armed from the start (same JSON as {@code POST /sim/faults}; count -1 = every request). */
    public SimulatorConfig fault(String json) { startFaults.add(json); return this; }
    public SimulatorConfig pooling(boolean v) { pooling = v; return this; }
    public SimulatorConfig modelDir(Path v) { modelDir = v; return this; }
    public SimulatorConfig chatTemplate(Path v) { chatTemplate = v; return this; }
    public SimulatorConfig naturalTokens(int min, int max) { naturalMinTokens = min; naturalMaxTokens = max; return this; }
    public SimulatorConfig epochSeconds(LongSupplier v) { epochSeconds = v; return this; }
    public SimulatorConfig blockSize(int v) { blockSize = v; return this; }
    public SimulatorConfig cacheBlocks(int v) { cacheBlocks = v; return this; }
    public SimulatorConfig hashAlgo(String v) { hashAlgo = v; return this; }
    public SimulatorConfig hashSeed(String v) { hashSeed = v; return this; }
    public SimulatorConfig dpRanks(int v) { dpRanks = v; return this; }
    public SimulatorConfig kvEvents(String v) { kvEventsEndpoint = v; return this; }
    public SimulatorConfig kvReplay(String v) { kvReplayEndpoint = v; return this; }
    public SimulatorConfig kvTopic(String v) { kvTopic = v; return this; }
    public SimulatorConfig kvEventsMode(String v) { kvEventsMode = v; return this; }
    public SimulatorConfig eventForm(EventForm v) { eventForm = v; return this; }
    public SimulatorConfig replayBufferSteps(int v) { replayBufferSteps = v; return this; }
    public SimulatorConfig kvFlood(long rate, int batch, long seconds) {
        kvFloodRate = rate;
        kvFloodBatch = batch;
        kvFloodSeconds = seconds;
        return this;
    }
    public SimulatorConfig role(Role v) { role = v; return this; }
    public SimulatorConfig pdSecret(String v) { pdSecret = v; return this; }
    public SimulatorConfig pdRegistry(PdRegistry v) { pdRegistry = v; return this; }
    public SimulatorConfig engineId(String v) { engineId = v; return this; }
    public SimulatorConfig bootstrapPort(int v) { bootstrapPort = v; return this; }
    public SimulatorConfig bootstrapTimeoutMs(long v) { bootstrapTimeoutMs = v; return this; }
    public SimulatorConfig vllmContextCheck(ContextCheck v) { vllmContextCheck = v; return this; }
    public SimulatorConfig lora(String... names) { loraAdapters.addAll(List.of(names)); return this; }
    public SimulatorConfig sglangHealthGenerates(boolean v) { sglangHealthGenerates = v; return this; }
    public SimulatorConfig healthTimeoutMs(long v) { healthTimeoutMs = v; return this; }
    public SimulatorConfig legacyMetrics(boolean v) { legacyMetrics = v; return this; }
    public SimulatorConfig kvEventBuffer(int v) { kvEventBufferSize = v; return this; }
    public SimulatorConfig trtllmHashAlgo(String v) { trtllmHashAlgo = v; return this; }
    public SimulatorConfig loadMs(long v) { loadMs = v; return this; }
    public SimulatorConfig llamaRouter(boolean v) { llamaRouter = v; return this; }
    public SimulatorConfig hybridGroup(String kind, int blockSize) { hybridGroupKind = kind; hybridBlockSize = blockSize; return this; }
    public SimulatorConfig serverInfoRoutes(String v) { serverInfoRoutes = v; return this; }
    public SimulatorConfig speculativeAlgorithm(String v) { speculativeAlgorithm = v; return this; }

    /** The granularity the engine hashes at: the GCD of its groups' block sizes (vLLM hybrid models). */
    int hashBlockSize() {
        int full = effectiveBlockSize();
        if (hybridGroupKind == null || hybridBlockSize <= 0) {
            return full;
        }
        return java.math.BigInteger.valueOf(full).gcd(java.math.BigInteger.valueOf(hybridBlockSize)).intValue();
    }

    /** The second group's block size (vLLM hybrid models; the full group's when not set). */
    int hybridGroupBlockSize() {
        return hybridBlockSize > 0 ? hybridBlockSize : effectiveBlockSize();
    }

    public Dialect dialect() { return dialect; }
    public String model() { return model; }
    public Role role() { return role; }

    ErrorShape effectiveErrorShape() {
        return errorShape != null ? errorShape : (dialect == Dialect.VLLM ? ErrorShape.OPENAI : ErrorShape.FLAT);
    }

    /** TensorRT-LLM's {@code event_buffer_max_size}: KV events kept until {@code POST /kv_cache_events} drains them. */
    int kvEventBuffer() {
        return kvEventBufferSize;
    }

    boolean kvEventsBind() {
        if (!kvEventsMode.equals("auto")) {
            return kvEventsMode.equals("bind");
        }
        if (trtllmStreaming()) {
            return true; // TensorRT-LLM's ZmqEventPublisher always binds, even a concrete host
        }
        Endpoint e = Endpoint.parse(kvEventsEndpoint);
        return e != null && (e.host().equals("*") || e.host().equals("::") || e.host().equals("[::]"));
    }

    int effectiveBlockSize() {
        return blockSize > 0 ? blockSize : switch (dialect) {
            case VLLM -> 16;
            case SGLANG -> 1;
            case TRTLLM -> 32; // tokens_per_block
            case LLAMACPP -> 1; // slot prompt cache: no blocks
        };
    }

    String effectiveHashAlgo() {
        return hashAlgo != null ? hashAlgo : switch (dialect) {
            case VLLM -> "sha256_cbor";
            case SGLANG -> "sha256_sglang";
            case TRTLLM -> trtllmStreaming() ? "v2_sha256_64" : "v1_block_key";
            case LLAMACPP -> "none";
        };
    }

    /**
     * TensorRT-LLM with {@code --kv-events}: its streaming publisher (KV cache manager V2, PR #17023) sends the
     * radix keys over ZeroMQ, per rank on port + rank, and {@code POST /kv_cache_events} returns an empty list.
     */
    boolean trtllmStreaming() {
        return dialect == Dialect.TRTLLM && kvEventsEndpoint != null;
    }

    boolean metricsMounted() {
        return (dialect != Dialect.SGLANG && dialect != Dialect.LLAMACPP) || enableMetrics;
    }

    /** Checks every field once; throws {@link IllegalArgumentException} naming field, value and rule. */
    public SimulatorConfig validate() {
        List<String> errors = new ArrayList<>();
        check(errors, dialect != null, "dialect=null: must be vllm, sglang, trtllm or llamacpp");
        check(errors, port >= 0 && port <= 65535, "port=" + port + ": must be in 0..65535");
        check(errors, model != null && !model.isBlank(), "model=" + model + ": must be a non-empty name");
        check(errors, ttftMs >= 0 && ttftMs <= 600_000, "ttft-ms=" + ttftMs + ": must be in 0..600000");
        check(errors, itlMs >= 0 && itlMs <= 60_000, "itl-ms=" + itlMs + ": must be in 0..60000");
        check(errors, prefillUsPerToken >= 0 && prefillUsPerToken <= 1_000_000,
            "prefill-us-per-token=" + prefillUsPerToken + ": must be in 0..1000000");
        check(errors, maxConcurrency >= 1 && maxConcurrency <= 1_000_000,
            "max-concurrency=" + maxConcurrency + ": must be in 1..1000000");
        check(errors, queueDepth >= 0 && queueDepth <= 1_000_000, "queue=" + queueDepth + ": must be in 0..1000000");
        check(errors, contextLen >= 2 && contextLen <= 10_000_000, "context-len=" + contextLen + ": must be in 2..10000000");
        check(errors, maxBodyBytes >= 1024, "max-body-bytes=" + maxBodyBytes + ": must be >= 1024");
        check(errors, naturalMinTokens >= 1 && naturalMaxTokens >= naturalMinTokens,
            "natural tokens=" + naturalMinTokens + ".." + naturalMaxTokens + ": need 1 <= min <= max");
        check(errors, modelDir == null || Files.isDirectory(modelDir),
            "model-dir=" + modelDir + ": must be an existing directory");
        check(errors, chatTemplate == null || (modelDir != null && Files.isRegularFile(chatTemplate)),
            "chat-template=" + chatTemplate + ": must be an existing file, with --model-dir (the tokenizer renders it)");
        check(errors, chatTemplate == null || (dialect != Dialect.TRTLLM && dialect != Dialect.LLAMACPP),
            "chat-template=" + chatTemplate + ": modelled for vllm and sglang only");
        check(errors, chatTemplate == null || dialect != Dialect.SGLANG || chatTemplate.toString().endsWith(".jinja"),
            "chat-template=" + chatTemplate + ": SGLang reads a file not ending in .jinja as its JSON conversation template,"
                + " which is not modelled");
        check(errors, toolCallParser == null || toolCallParser.matches("[A-Za-z0-9_.-]+"),
            "tool-call-parser=" + toolCallParser + ": must be a parser name ([A-Za-z0-9_.-]+)");
        check(errors, !pooling || dialect == Dialect.VLLM || dialect == Dialect.SGLANG,
            "pooling: modelled for vllm and sglang only");
        int bs = effectiveBlockSize();
        check(errors, bs >= 1 && bs <= 4096, "block-size=" + bs + ": must be in 1..4096");
        check(errors, cacheBlocks >= 1 && cacheBlocks <= 50_000_000, "cache-blocks=" + cacheBlocks + ": must be in 1..50000000");
        String algo = effectiveHashAlgo();
        if (dialect == Dialect.VLLM) {
            check(errors, algo.equals("sha256_cbor") || algo.equals("xxhash_cbor"),
                "hash-algo=" + algo + ": vllm supports sha256_cbor|xxhash_cbor");
        } else if (dialect == Dialect.SGLANG) {
            check(errors, algo.equals("sha256_sglang"), "hash-algo=" + algo + ": sglang supports sha256_sglang");
        } else if (dialect == Dialect.LLAMACPP) {
            check(errors, algo.equals("none"), "hash-algo=" + algo + ": llama.cpp caches prompts per slot, no block hashes");
            check(errors, kvEventsEndpoint == null, "kv-events=" + kvEventsEndpoint + ": llama.cpp publishes no KV events");
            check(errors, role == Role.BOTH, "role=" + role + ": llama.cpp has no prefill/decode disaggregation");
            check(errors, dpRanks == 1, "dp-ranks=" + dpRanks + ": llama.cpp parallelism is --max-concurrency slots");
            check(errors, loraAdapters.isEmpty(), "lora=" + loraAdapters + ": not modelled for llamacpp");
        } else {
            String expected = trtllmStreaming() ? "v2_sha256_64" : "v1_block_key";
            check(errors, algo.equals(expected), "hash-algo=" + algo + ": trtllm " + (trtllmStreaming()
                ? "streams the KV cache manager V2 radix key with --kv-events (v2_sha256_64)"
                : "block hashes drained from POST /kv_cache_events are its C++ BlockKeyHasher's (v1_block_key)"));
            check(errors, loraAdapters.isEmpty(), "lora=" + loraAdapters + ": not modelled for trtllm");
        }
        check(errors, loadMs >= 0 && loadMs <= 3_600_000, "load-ms=" + loadMs + ": must be in 0..3600000");
        check(errors, loadMs == 0 || dialect == Dialect.LLAMACPP, "load-ms=" + loadMs + ": only llamacpp models loading");
        check(errors, !llamaRouter || dialect == Dialect.LLAMACPP, "router: only llama-server has a router mode");
        check(errors, TRTLLM_HASH_ALGOS.contains(trtllmHashAlgo), "trtllm-hash-algo=" + trtllmHashAlgo + ": must be one of "
            + TRTLLM_HASH_ALGOS);
        check(errors, "legacy".equals(trtllmHashAlgo) || dialect == Dialect.TRTLLM,
            "trtllm-hash-algo=" + trtllmHashAlgo + ": only the trtllm dialect publishes TensorRT-LLM events");
        check(errors, kvEventBufferSize >= 0 && kvEventBufferSize <= 10_000_000,
            "kv-event-buffer=" + kvEventBufferSize + ": must be in 0..10000000");
        check(errors, hashSeed != null, "hash-seed=null: must be a string (vLLM PYTHONHASHSEED)");
        check(errors, dpRanks >= 1 && dpRanks <= MAX_DP_RANKS, "dp-ranks=" + dpRanks + ": must be in 1.." + MAX_DP_RANKS);
        check(errors, kvEventsEndpoint == null || Endpoint.parse(kvEventsEndpoint) != null,
            "kv-events=" + kvEventsEndpoint + ": must be tcp://HOST:PORT");
        check(errors, kvReplayEndpoint == null || Endpoint.parse(kvReplayEndpoint) != null,
            "kv-replay=" + kvReplayEndpoint + ": must be tcp://HOST:PORT");
        check(errors, kvReplayEndpoint == null || kvEventsEndpoint != null,
            "kv-replay=" + kvReplayEndpoint + ": needs --kv-events too");
        check(errors, kvEventsMode != null && (kvEventsMode.equals("auto") || kvEventsMode.equals("bind")
            || kvEventsMode.equals("connect")), "kv-events-mode=" + kvEventsMode + ": must be auto|bind|connect");
        check(errors, hybridGroupKind == null || (dialect == Dialect.VLLM && hybridGroupKind.matches("[a-z_]+")),
            "hybrid-group=" + hybridGroupKind + ": a vLLM kv_cache_spec_kind (sliding_window, mamba, ...), vllm only");
        check(errors, hybridBlockSize == 0 || (hybridGroupKind != null && hybridBlockSize >= 1 && hybridBlockSize <= 4096
            && bs % hybridBlockSize == 0), "hybrid-block-size=" + hybridBlockSize + ": needs --hybrid-group, and must divide"
            + " block-size " + bs + " (the full group's blocks are whole multiples of the hash unit)");
        check(errors, List.of("both", "server_info", "get_server_info").contains(serverInfoRoutes),
            "server-info-routes=" + serverInfoRoutes + ": must be both|server_info|get_server_info");
        check(errors, replayBufferSteps >= 1 && replayBufferSteps <= 1_000_000,
            "replay-buffer-steps=" + replayBufferSteps + ": must be in 1..1000000");
        check(errors, kvFloodRate >= 0 && kvFloodRate <= 100_000_000,
            "kv-flood=" + kvFloodRate + ": must be in 0..100000000 block ops/s (0 = off)");
        check(errors, kvFloodBatch >= 1 && kvFloodBatch <= 1024, "kv-batch=" + kvFloodBatch + ": must be in 1..1024");
        check(errors, kvFloodSeconds >= 0 && kvFloodSeconds <= 86_400,
            "kv-flood-seconds=" + kvFloodSeconds + ": must be in 0..86400 (0 = until stopped)");
        check(errors, kvFloodRate == 0 || kvEventsEndpoint != null,
            "kv-flood=" + kvFloodRate + ": needs --kv-events (the flood is published there)");
        check(errors, kvFloodRate == 0 || dialect == Dialect.VLLM,
            "kv-flood=" + kvFloodRate + ": vllm only (its BlockStored events carry many blocks; SGLang announces one"
                + " page per event)");
        check(errors, role != null, "role=null: must be prefill|decode|both");
        check(errors, bootstrapPort >= -1 && bootstrapPort <= 65535, "bootstrap-port=" + bootstrapPort + ": must be in 0..65535");
        check(errors, !(bootstrapPort >= 0 && dialect != Dialect.SGLANG),
            "bootstrap-port=" + bootstrapPort + ": only SGLang P/D has a bootstrap port");
        check(errors, !(dialect == Dialect.SGLANG && role == Role.PREFILL && bootstrapPort < 0),
            "bootstrap-port=none: an SGLang prefill needs --bootstrap-port (0 = ephemeral)");
        check(errors, vllmContextCheck != null, "vllm-context-check=null: must be clamp|reject");
        check(errors, healthTimeoutMs >= 1 && healthTimeoutMs <= 3_600_000,
            "health-timeout-ms=" + healthTimeoutMs + ": must be in 1..3600000");
        for (String a : loraAdapters) {
            check(errors, a != null && !a.isBlank() && !a.equals(model),
                "lora=" + a + ": must be a non-empty adapter name other than the base model");
            check(errors, a == null || dialect != Dialect.SGLANG || !a.contains(":"),
                "lora=" + a + ": SGLang splits `model` on the first ':' (base:adapter), so an adapter name cannot hold one");
        }
        check(errors, bootstrapTimeoutMs >= 1 && bootstrapTimeoutMs <= 3_600_000,
            "bootstrap-timeout-ms=" + bootstrapTimeoutMs + ": must be in 1..3600000");
        if (!errors.isEmpty()) {
            throw new IllegalArgumentException("invalid simulator config: " + String.join("; ", errors));
        }
        return this;
    }

    private static void check(List<String> errors, boolean ok, String message) {
        if (!ok) {
            errors.add(message);
        }
    }

    /** A parsed {@code tcp://host:port}. */
    record Endpoint(String host, int port) {
        static Endpoint parse(String s) {
            if (s == null || !s.startsWith("tcp://")) {
                return null;
            }
            String rest = s.substring(6);
            int colon = rest.lastIndexOf(':');
            if (colon <= 0) {
                return null;
            }
            try {
                int p = Integer.parseInt(rest.substring(colon + 1));
                return p >= 0 && p <= 65535 - MAX_DP_RANKS ? new Endpoint(rest.substring(0, colon), p) : null;
            } catch (NumberFormatException e) {
                return null;
            }
        }

        String withPortOffset(int offset) {
            return "tcp://" + host + ":" + (port + offset);
        }
    }

    /** Usage text of {@code ./kvgate sim}. */
    static final String USAGE = """
        usage: ./kvgate sim --dialect vllm|sglang|trtllm|llamacpp --port P --model NAME [options]
          --host H                     bind address (default 127.0.0.1)
          --fault JSON                 a fault armed at start, the JSON of POST /sim/faults (repeatable), e.g.
                                       '{"die_after_tokens":5,"count":-1}' (stall_after_tokens, error_after_tokens,
                                       slow_first_token_ms likewise; count -1 = every request)
          --seed N                     generated-text seed (default 0)
          --ttft-ms T                  base time to first token (default 20)
          --itl-ms I                   inter-token latency (default 10)
          --prefill-us-per-token U     prefill time per uncached prompt token (default 50)
          --max-concurrency C          running requests per DP rank (default 64); llamacpp: slots (--parallel)
          --queue Q                    FIFO waiting requests per DP rank beyond C; more -> 503 (default 256)
          --context-len L              model context length (default 8192)
          --error-shape flat|openai    error body shape (default: vllm openai, sglang flat)
          --enable-metrics             SGLang, llamacpp: mount /metrics (vLLM always does); trtllm: mount
                                       /prometheus/metrics (return_perf_metrics; its /metrics is JSON)
          --legacy-metrics             vLLM: export vllm:gpu_cache_usage_perc (older builds) instead of kv_cache_usage_perc
          --vllm-context-check M       clamp (default: max_tokens lowered to fit, 200) | reject (older builds: 400)
          --lora NAME                  serve a LoRA adapter NAME (repeatable); vLLM: model=NAME, SGLang: model=BASE:NAME
                                       or lora_path=NAME
          --health-generates           SGLang: /health runs the deep probe (SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION)
          --health-timeout-ms T        SGLang: /health_generate answers 503 after T ms without progress (default 20000)
          --load-ms T                  llamacpp: /health and requests answer 503 "Loading model" for T ms after start
          --router                     llamacpp: router mode (no -m): /props says role "router", /props, /slots and
                                       /metrics take ?model=, /v1/models states status loading|loaded
          --kv-event-buffer N          trtllm: event_buffer_max_size, events kept until POST /kv_cache_events drains
                                       them (default 1024; older events are dropped, so event ids jump)
          --trtllm-hash-algo A         trtllm: legacy (integer hashes, default), v1_block_key (KV cache manager V2,
                                       hash_algo named) or v2_sha256 (V2: hashes are 64-digit hex strings)
          --tool-call-parser NAME      the engine's tool-call parser (vllm: with --enable-auto-tool-choice); without
                                       one vLLM refuses tool_choice "auto" and SGLang returns tool calls as content
          --pooling                    a pooling (embedding) model: vllm mounts /v1/embeddings and not the generation
                                       routes (--runner pooling); sglang says is_embedding (--is-embedding) and
                                       refuses generation
          --model-dir DIR              real tokenizer + chat template (tokenizer.json[.gz], tokenizer_config.json)
          --chat-template FILE         the engine's --chat-template (vllm: any file; sglang: a .jinja file)
          --block-size B               KV block / page size (default vllm 16, sglang 1, trtllm 32)
          --cache-blocks N             prefix cache capacity per DP rank, in blocks (default 16384)
          --hash-algo A                sha256_cbor|xxhash_cbor (vllm), sha256_sglang (sglang), v1_block_key
          --hash-seed S                vLLM PYTHONHASHSEED string (default "0"; "vllm-none-hash" is what a current
                                       vLLM with sha256_cbor and no PYTHONHASHSEED hashes)
          --dp-ranks N                 data-parallel ranks, 1..8 (default 1)
          --kv-events tcp://H:P        ZMQ PUB per rank on P + rank (like the engines: H = * binds, else connects;
                                       trtllm: its streaming publisher, always bound, /kv_cache_events then empty)
          --kv-events-mode M           auto|bind|connect (default auto; bind = bind tcp://H:P even for a concrete H)
          --kv-replay tcp://H:P        bind a ZMQ ROUTER replay buffer per rank on P + rank
          --kv-topic T                 topic frame (default "kv")
          --hybrid-group KIND          vllm: a hybrid model; a second KV-cache group of this kv_cache_spec_kind
                                       (sliding_window, mamba, ...) announces its own copies of the blocks
          --hybrid-block-size N        that group's block size; the engine then hashes every gcd(block-size, N) tokens
          --server-info-routes R       sglang: both (default) | server_info | get_server_info (older servers)
          --speculative-algorithm A    sglang: stated in /server_info (EAGLE: bigram radix keys)
          --kv-flood RATE              vllm: also publish replayed real KV events at RATE block ops/s: 64 prompts of
                                       128 random-token blocks keyed like the engine, each stored (BlockStored events
                                       of --kv-batch blocks) then removed, round robin over ranks (0 = off)
          --kv-batch N                 blocks per BlockStored event of the flood (default 32)
          --kv-flood-seconds S         stop the flood after S s and print its rate and CPU (default 0 = until stopped)
          --event-form array|map       vLLM event encoding (default array)
          --role prefill|decode|both   P/D role (default both)
          --pd-secret S                vLLM and TensorRT-LLM P/D: the decode accepts params signed with this secret
                               (needed when prefill and decode run as separate processes)
          --engine-id ID               vLLM remote_engine_id (default derived from host:port)
          --bootstrap-port P           SGLang prefill bootstrap listener (0 = ephemeral)
          --bootstrap-timeout-ms T     SGLang P/D rendezvous wait (default 30000)
        """;

    /** Parses {@code ./kvgate sim} arguments; throws {@link IllegalArgumentException} naming the bad flag. */
    static SimulatorConfig parse(String[] args) {
        SimulatorConfig c = new SimulatorConfig();
        for (int i = 0; i < args.length; i++) {
            String flag = args[i];
            if (flag.equals("--enable-metrics")) {
                c.enableMetrics = true;
                continue;
            }
            if (flag.equals("--router")) {
                c.llamaRouter = true;
                continue;
            }
            if (flag.equals("--legacy-metrics")) {
                c.legacyMetrics = true;
                continue;
            }
            if (flag.equals("--pooling")) {
                c.pooling = true;
                continue;
            }
            if (flag.equals("--health-generates")) {
                c.sglangHealthGenerates = true;
                continue;
            }
            if (i + 1 >= args.length) {
                throw new IllegalArgumentException(flag + ": missing value");
            }
            String v = args[++i];
            switch (flag) {
                case "--dialect" -> c.dialect = enumValue(Dialect.class, flag, v);
                case "--host" -> c.host = v;
                case "--port" -> c.port = intValue(flag, v);
                case "--model" -> c.model = v;
                case "--seed" -> c.seed = longValue(flag, v);
                case "--ttft-ms" -> c.ttftMs = doubleValue(flag, v);
                case "--itl-ms" -> c.itlMs = doubleValue(flag, v);
                case "--prefill-us-per-token" -> c.prefillUsPerToken = doubleValue(flag, v);
                case "--max-concurrency" -> c.maxConcurrency = intValue(flag, v);
                case "--queue" -> c.queueDepth = intValue(flag, v);
                case "--context-len" -> c.contextLen = intValue(flag, v);
                case "--error-shape" -> c.errorShape = enumValue(ErrorShape.class, flag, v);
                case "--model-dir" -> c.modelDir = Path.of(v);
                case "--chat-template" -> c.chatTemplate = Path.of(v);
                case "--block-size" -> c.blockSize = intValue(flag, v);
                case "--cache-blocks" -> c.cacheBlocks = intValue(flag, v);
                case "--hash-algo" -> c.hashAlgo = v;
                case "--hash-seed" -> c.hashSeed = v;
                case "--dp-ranks" -> c.dpRanks = intValue(flag, v);
                case "--kv-events" -> c.kvEventsEndpoint = v;
                case "--kv-replay" -> c.kvReplayEndpoint = v;
                case "--kv-topic" -> c.kvTopic = v;
                case "--hybrid-group" -> c.hybridGroupKind = v;
                case "--hybrid-block-size" -> c.hybridBlockSize = intValue(flag, v);
                case "--server-info-routes" -> c.serverInfoRoutes = v;
                case "--speculative-algorithm" -> c.speculativeAlgorithm = v;
                case "--kv-events-mode" -> c.kvEventsMode = v;
                case "--kv-flood" -> c.kvFloodRate = longValue(flag, v);
                case "--kv-batch" -> c.kvFloodBatch = intValue(flag, v);
                case "--kv-flood-seconds" -> c.kvFloodSeconds = longValue(flag, v);
                case "--event-form" -> c.eventForm = enumValue(EventForm.class, flag, v);
                case "--role" -> c.role = enumValue(Role.class, flag, v);
                case "--pd-secret" -> c.pdSecret = v;
                case "--engine-id" -> c.engineId = v;
                case "--bootstrap-port" -> c.bootstrapPort = intValue(flag, v);
                case "--bootstrap-timeout-ms" -> c.bootstrapTimeoutMs = longValue(flag, v);
                case "--vllm-context-check" -> c.vllmContextCheck = enumValue(ContextCheck.class, flag, v);
                case "--lora" -> c.loraAdapters.add(v);
                case "--health-timeout-ms" -> c.healthTimeoutMs = longValue(flag, v);
                case "--kv-event-buffer" -> c.kvEventBufferSize = intValue(flag, v);
                case "--trtllm-hash-algo" -> c.trtllmHashAlgo = v;
                case "--load-ms" -> c.loadMs = longValue(flag, v);
                case "--tool-call-parser" -> c.toolCallParser = v;
                case "--fault" -> c.startFaults.add(v);
                default -> throw new IllegalArgumentException(flag + ": unknown flag");
            }
        }
        return c;
    }

    private static <E extends Enum<E>> E enumValue(Class<E> type, String flag, String v) {
        try {
            return Enum.valueOf(type, v.toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            StringBuilder allowed = new StringBuilder();
            for (E e2 : type.getEnumConstants()) {
                allowed.append(allowed.isEmpty() ? "" : "|").append(e2.name().toLowerCase(Locale.ROOT));
            }
            throw new IllegalArgumentException(flag + "=" + v + ": must be one of " + allowed, e);
        }
    }

    private static int intValue(String flag, String v) {
        try {
            return Integer.parseInt(v);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(flag + "=" + v + ": must be an integer", e);
        }
    }

    private static long longValue(String flag, String v) {
        try {
            return Long.parseLong(v);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(flag + "=" + v + ": must be an integer", e);
        }
    }

    private static double doubleValue(String flag, String v) {
        try {
            double d = Double.parseDouble(v);
            if (!Double.isFinite(d)) {
                throw new NumberFormatException("not finite");
            }
            return d;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(flag + "=" + v + ": must be a number", e);
        }
    }
}
