package io.kvgate.tools.sim;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.tools.sim.SimulatorConfig.ContextCheck;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import java.util.ArrayList;
import java.util.List;

/**
 * One generation request, validated with the rules of the configured dialect (engine-contracts §1). Validation
 * runs in the engine's own order: body shape (pydantic in the engines), then the model name, then sampling
 * parameters, then — once the prompt is tokenized — the context length ({@link #applyContext}). Immutable after
 * {@link #applyContext}; confined to the engine loop.
 */
final class CompletionRequest {
    final boolean chat;
    final ObjectNode body;
    final String requestedModel;
    final boolean stream;
    final boolean includeUsage;
    final boolean continuousUsage;
    final int n;
    final boolean greedy;
    /** Temperature after the dialect's floor (vLLM raises (0, 0.01) to 0.01). */
    final double temperature;
    final Dialect dialect;
    /** The LoRA adapter this request runs with, or null for the base model. */
    LoraAdapters.Adapter lora;
    /** llama.cpp: the slot the request pins ({@code id_slot}), or -1. */
    int idSlot = -1;
    /** llama.cpp: reuse the slot's cached prefix ({@code cache_prompt}, default true). */
    boolean cachePrompt = true;
    static final int NO_LIMIT = Integer.MIN_VALUE;
    static final double VLLM_MIN_TEMPERATURE = 0.01;
    static final double VLLM_SAMPLING_EPS = 1e-5;
    static final double SGLANG_SAMPLING_EPS = 1e-6;
    /** max tokens from the request, or {@link #NO_LIMIT}; {@link #maxTokensField} says which field was used. */
    final int requestedMaxTokens;
    final String maxTokensField;
    final List<String> stop;
    final boolean keepStop;
    final long requestSeed;
    /** vLLM {@code kv_transfer_params}, or null. */
    final JsonNode kvTransferParams;
    /** SGLang bootstrap fields, or null/-1 when absent. */
    final String bootstrapHost;
    final int bootstrapPort;
    final long bootstrapRoom;
    final boolean hasBootstrap;

    /** Prompts (one per batch entry; chat has one), filled by {@link #applyContext}. */
    List<int[]> prompts = new ArrayList<>();
    /** Per prompt: tokens to generate at most (after vLLM clamping), or NO_LIMIT = the model's natural length. */
    int[] maxTokens;
    /** Per prompt: context room left after the prompt (a natural-length answer is cut there, "length"). */
    int[] contextRoom;
    /** Per prompt, greedy only: the greedy context after the prompt ({@link TextGenerator}). */
    long[] greedyContext;
    /** Per prompt, greedy only: the first generated token takes a leading blank (the prompt ends in a word). */
    boolean[] blankFirst;
    /** vLLM {@code return_token_ids}: choices carry {@code token_ids}, the answer the prompt's ids. */
    final boolean returnTokenIds;
    /** Chat: the last (assistant) message is continued, not answered ({@code continue_final_message}). */
    final boolean continueFinalMessage;

    private CompletionRequest(boolean chat, ObjectNode body, Dialect dialect) {
        this.chat = chat;
        this.body = body;
        this.dialect = dialect;
        JsonNode model = body.get("model");
        this.requestedModel = model == null || model.isNull() ? null : model.asText();
        this.stream = bool(body, "stream", false);
        JsonNode so = body.get("stream_options");
        boolean hasStreamOptions = so != null && !so.isNull();
        if (hasStreamOptions && !so.isObject()) {
            throw SimError.badRequest("stream_options: must be an object", "stream_options");
        }
        if (dialect.vllmLike()) {
            if (hasStreamOptions && !stream) {
                throw requestValidation("Stream options can only be defined when `stream=True`.", "stream_options");
            }
            // vLLM's StreamOptions.include_usage defaults to True once the object is present, and
            // continuous_usage_stats only counts when include_usage is on.
            this.includeUsage = hasStreamOptions && bool(so, "include_usage", true);
            this.continuousUsage = includeUsage && bool(so, "continuous_usage_stats", false);
        } else {
            this.includeUsage = stream && hasStreamOptions && bool(so, "include_usage", false);
            this.continuousUsage = stream && hasStreamOptions && bool(so, "continuous_usage_stats", false);
        }
        this.n = intField(body, "n", 1);
        if (n < 1 || n > 128) {
            throw SimError.badRequest("n must be in 1..128, got " + n + ".", "n");
        }
        double t = number(body, "temperature", 1.0);
        if (dialect.vllmLike()) {
            if (t < 0) {
                throw SimError.badRequest("temperature must be non-negative, got " + t + ".");
            }
            // vllm/sampling_params.py: 0 < t < _MAX_TEMP (0.01) is raised to 0.01 with a warning, and greedy means
            // t < _SAMPLING_EPS (1e-5) after that, so only an exact 0 is greedy.
            if (t > 0 && t < VLLM_MIN_TEMPERATURE) {
                t = VLLM_MIN_TEMPERATURE;
            }
            this.greedy = t < VLLM_SAMPLING_EPS;
        } else {
            if (t < 0 || !Double.isFinite(t)) {
                throw SimError.badRequest("temperature must be a non-negative finite number, got " + t + ".");
            }
            // sglang/srt/sampling/sampling_params.py: t < _SAMPLING_EPS (1e-6) becomes temperature 1, top_k 1.
            this.greedy = t < SGLANG_SAMPLING_EPS;
        }
        this.temperature = t;
        if (chat && dialect.vllmLike()) {
            JsonNode top = body.get("top_logprobs");
            if (top != null && !top.isNull()) {
                int k = intField(body, "top_logprobs", 0);
                // ChatCompletionRequest.check_logprobs: 0 is allowed without logprobs; -1 means "all".
                if (k < 0 && k != -1) {
                    throw requestValidation("`top_logprobs` must be a positive value or -1.", "top_logprobs");
                }
                if ((k == -1 || k > 0) && !bool(body, "logprobs", false)) {
                    throw requestValidation("when using `top_logprobs`, `logprobs` must be set to true.",
                        "top_logprobs");
                }
            }
        }
        if (chat) {
            validateMessages(body);
            validateTools(body, dialect);
        } else if (!body.has("prompt") || body.get("prompt").isNull()) {
            throw SimError.badRequest("Field required: prompt", "prompt");
        }
        JsonNode mct = body.get("max_completion_tokens");
        JsonNode mt = body.get("max_tokens");
        boolean hasMct = chat && mct != null && !mct.isNull();
        boolean hasMt = mt != null && !mt.isNull();
        int mctValue = hasMct ? intField(body, "max_completion_tokens", -1) : 0;
        int mtValue = hasMt ? intField(body, "max_tokens", -1) : 0;
        // Both engines read `max_completion_tokens or max_tokens` (Python `or`): a 0 in max_completion_tokens
        // falls through to max_tokens.
        if (hasMct && mctValue != 0) {
            this.maxTokensField = "max_completion_tokens";
            this.requestedMaxTokens = mctValue;
        } else if (hasMt) {
            this.maxTokensField = "max_tokens";
            this.requestedMaxTokens = mtValue;
        } else {
            this.maxTokensField = "max_tokens";
            this.requestedMaxTokens = NO_LIMIT;
        }
        if (!chat && dialect == Dialect.SGLANG && hasMt && mtValue <= 0) {
            // SGLang's CompletionRequest validator: pydantic rejects it, and SGLang's RequestValidationError
            // handler answers 400 with type "Bad Request".
            throw new SimError(400, "Bad Request", "max_tokens must be positive", null);
        }
        if (dialect.vllmLike()) {
            // vLLM (to_sampling_params): a json_schema response_format without its json_schema object is a 400;
            // SGLang has no such check (its grammar backend gets whatever came).
            JsonNode rf = body.get("response_format");
            if (rf != null && rf.isObject() && "json_schema".equals(rf.path("type").asText(null))
                && (rf.get("json_schema") == null || rf.get("json_schema").isNull())) {
                throw SimError.badRequest("When response_format type is 'json_schema', the 'json_schema' field must be"
                    + " provided.", "response_format");
            }
        }
        this.returnTokenIds = dialect == Dialect.VLLM && bool(body, "return_token_ids", false);
        this.continueFinalMessage = chat && dialect != Dialect.TRTLLM && bool(body, "continue_final_message", false);
        if (continueFinalMessage) {
            // vLLM ChatCompletionRequest.check_generation_prompt; SGLang applies the template the same way.
            if (bool(body, "add_generation_prompt", true)) {
                throw requestValidation("Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
                    "continue_final_message");
            }
            JsonNode msgs = body.get("messages");
            if (!"assistant".equals(msgs.get(msgs.size() - 1).path("role").asText())) {
                throw SimError.badRequest("continue_final_message: the final message must be the assistant's (its "
                    + "content is the prefix to continue), got role '" + msgs.get(msgs.size() - 1).path("role").asText()
                    + "'", "continue_final_message");
            }
        }
        this.stop = parseStop(body.get("stop"));
        this.keepStop = dialect.vllmLike() ? bool(body, "include_stop_str_in_output", false)
            : bool(body, "no_stop_trim", false);
        JsonNode seed = body.get("seed");
        // vLLM turns seed -1 into None (unseeded); the simulator treats both as "no seed".
        this.requestSeed = seed != null && seed.isIntegralNumber() && seed.asLong() != -1 ? seed.asLong() : 0;
        JsonNode ktp = body.get("kv_transfer_params");
        this.kvTransferParams = ktp == null || ktp.isNull() ? null : ktp;
        this.hasBootstrap = body.has("bootstrap_room") && !body.get("bootstrap_room").isNull();
        // SGLang's GenerateReqInput takes each bootstrap field as a value or a list with one per sequence
        // (bootstrap_host: Optional[Union[List[str], str]]); the gateway sends lists for chat n > 1 and batched
        // prompts. The simulator transfers one KV per request, keyed by the first room, so it reads the first entry.
        JsonNode host = firstOfList(body.get("bootstrap_host"));
        JsonNode port = firstOfList(body.get("bootstrap_port"));
        JsonNode room = firstOfList(body.get("bootstrap_room"));
        this.bootstrapHost = host != null && host.isTextual() ? host.asText() : null;
        this.bootstrapPort = port != null && port.canConvertToInt() ? port.asInt() : -1;
        this.bootstrapRoom = room != null && room.isNumber() ? room.asLong() : -1;
    }

    /** A list's first entry (null when empty), or the value itself when it is not a list. */
    private static JsonNode firstOfList(JsonNode v) {
        return v != null && v.isArray() ? (v.isEmpty() ? null : v.get(0)) : v;
    }

    /**
     * vLLM's request-model validators ({@code @model_validator(mode="before")}) raise VLLMValidationError inside
     * pydantic, so FastAPI answers through vLLM's RequestValidationError handler: 400 with type
     * {@code "Bad Request"} (the status phrase, not "BadRequestError") and the validator's parameter as
     * {@code param}. The real message wraps the validator's text in pydantic's error listing ("... Value error,
     * &lt;text&gt; ..."); the simulator keeps only {@code "Value error, <text>"}.
     */
    private static SimError requestValidation(String message, String param) {
        return new SimError(400, "Bad Request", "Value error, " + message, param);
    }

    /** Parses and validates everything that does not need the tokenizer; resolves the model and LoRA adapter. */
    static CompletionRequest parse(boolean chat, JsonNode json, SimulatorConfig config, LoraAdapters loras) {
        if (json == null || !json.isObject()) {
            throw SimError.badRequest("request body must be a JSON object");
        }
        if (config.dialect == Dialect.TRTLLM) {
            rejectUnknownTrtllmFields(chat, (ObjectNode) json); // pydantic runs before anything else
        }
        CompletionRequest r = new CompletionRequest(chat, (ObjectNode) json, config.dialect);
        if (config.dialect == Dialect.VLLM) {
            // OpenAIServing._check_model: an empty model means the base model; a LoRA adapter is served under its
            // own name; anything else is a 404.
            String m = r.requestedModel;
            if (m != null && !m.isEmpty() && !m.equals(config.model)) {
                r.lora = loras.get(m);
                if (r.lora == null) {
                    throw new SimError(404, "NotFoundError", "The model `" + m + "` does not exist.", "model");
                }
            }
            if (chat && config.toolCallParser == null && "auto".equals(r.toolChoice())) {
                // serving_chat create_chat_completion, before the prompt is rendered: without a parser vLLM cannot
                // read tool calls back out of the text, so it refuses to let the model choose (create_error_response:
                // 400 BadRequestError, no param). SGLang has no such check: it answers, tool calls left in the content.
                throw new SimError(400, "BadRequestError",
                    "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set", null);
            }
        } else if (config.dialect == Dialect.SGLANG) {
            r.lora = sglangLora(r, loras);
        } else if (config.dialect == Dialect.LLAMACPP) {
            // server_task::params_from_json_cmpl: n_cmpl = n, up to the slot count (a child slot per extra choice);
            // older servers answered "Only one completion choice is allowed".
            if (r.n > config.maxConcurrency) {
                throw SimError.badRequest("n_cmpl cannot be greater than the number of slots, please increase -np");
            }
            r.idSlot = intField(r.body, "id_slot", -1);
            if (r.idSlot < -1) {
                throw SimError.badRequest("Invalid id_slot: " + r.idSlot + " (the server has " + config.maxConcurrency
                    + " slots)");
            }
            if (r.idSlot >= config.maxConcurrency) {
                r.idSlot %= config.maxConcurrency; // get_slot_by_id wraps an id past the last slot
            }
            r.cachePrompt = bool(r.body, "cache_prompt", true);
        }
        return r;
    }

    /**
     * TensorRT-LLM's request models forbid unknown fields (pydantic {@code extra="forbid"}), and trtllm-serve answers
     * a RequestValidationError with {@code 400 {"error": "<the validation error as text>"}} — so a vLLM
     * {@code kv_transfer_params} or an SGLang bootstrap field leaking into a TensorRT-LLM request fails loudly.
     */
    private static void rejectUnknownTrtllmFields(boolean chat, ObjectNode body) {
        java.util.Set<String> known = chat ? TRTLLM_CHAT_FIELDS : TRTLLM_COMPLETION_FIELDS;
        var names = body.fieldNames();
        while (names.hasNext()) {
            String f = names.next();
            if (!known.contains(f) && !TRTLLM_COMMON_FIELDS.contains(f)) {
                ObjectNode err = com.fasterxml.jackson.databind.node.JsonNodeFactory.instance.objectNode();
                String text = "[{'type': 'extra_forbidden', 'loc': ('body', '" + f + "'), 'msg': 'Extra inputs are not "
                    + "permitted', 'input': " + body.get(f) + "}]";
                err.put("error", text);
                throw SimError.withBody(400, text, err);
            }
        }
    }

    /** Fields of TensorRT-LLM's CompletionRequest/ChatCompletionRequest (openai_protocol.py) the sim accepts. */
    private static final java.util.Set<String> TRTLLM_COMMON_FIELDS = java.util.Set.of("model", "frequency_penalty",
        "logit_bias", "logprobs", "max_tokens", "n", "presence_penalty", "response_format", "seed", "stop", "stream",
        "stream_options", "temperature", "top_p", "user", "use_beam_search", "top_k", "top_p_min", "min_p",
        "repetition_penalty", "length_penalty", "early_stopping", "stop_token_ids", "include_stop_str_in_output",
        "ignore_eos", "min_tokens", "skip_special_tokens", "spaces_between_special_tokens", "truncate_prompt_tokens",
        "return_context_logits", "return_generation_logits", "lora_request", "disaggregated_params", "prompt_logprobs",
        "add_special_tokens", "detokenize", "cache_salt");
    private static final java.util.Set<String> TRTLLM_CHAT_FIELDS = java.util.Set.of("messages", "top_logprobs",
        "max_completion_tokens", "tools", "tool_choice", "parallel_tool_calls", "echo", "add_generation_prompt",
        "documents", "chat_template", "chat_template_kwargs", "reasoning_effort", "mm_processor_kwargs", "prompt_token_ids");
    private static final java.util.Set<String> TRTLLM_COMPLETION_FIELDS = java.util.Set.of("prompt", "best_of", "echo",
        "suffix");

    /**
     * SGLang (serving_base._resolve_lora_path): {@code model: "base:adapter"} (split on the first colon, stripped;
     * an empty adapter means none) wins over the request's {@code lora_path}; the base part is never checked.
     */
    private static LoraAdapters.Adapter sglangLora(CompletionRequest r, LoraAdapters loras) {
        String name = null;
        String m = r.requestedModel;
        int colon = m == null ? -1 : m.indexOf(':');
        if (colon >= 0) {
            String a = m.substring(colon + 1).strip();
            name = a.isEmpty() ? null : a;
        }
        if (name == null) {
            JsonNode lp = r.body.get("lora_path");
            if (lp != null && lp.isArray() && !lp.isEmpty()) {
                lp = lp.get(0);
            }
            if (lp != null && lp.isTextual() && !lp.asText().isEmpty()) {
                name = lp.asText();
            }
        }
        if (name == null) {
            return null;
        }
        if (!loras.enabled()) {
            throw SimError.badRequest("LoRA adapter '" + name + "' was requested, but LoRA is not enabled. Please "
                + "launch the server with --enable-lora flag and preload adapters using --lora-paths or "
                + "/load_lora_adapter endpoint.");
        }
        LoraAdapters.Adapter a = loras.get(name);
        if (a == null) {
            throw SimError.badRequest("Got LoRA adapter that has never been loaded: " + name);
        }
        return a;
    }

    /**
     * The tool choice vLLM's request model ends up with: the client's string ({@code "none"}, {@code "auto"},
     * {@code "required"}), {@code "named"} for an object, null when null; absent with a non-empty {@code tools} list
     * it is {@code "auto"} (ChatCompletionRequest.check_tool_usage sets that default), else {@code "none"}.
     */
    String toolChoice() {
        JsonNode choice = body.get("tool_choice");
        if (choice == null) {
            JsonNode tools = body.get("tools");
            return tools != null && tools.isArray() && !tools.isEmpty() ? "auto" : "none";
        }
        if (choice.isNull()) {
            return null;
        }
        return choice.isObject() ? "named" : choice.asText();
    }

    /** Model name echoed in responses: vLLM its own (or the adapter's); SGLang echoes what was asked. */
    String responseModel(SimulatorConfig config) {
        if (dialect == Dialect.SGLANG) {
            return requestedModel != null ? requestedModel : config.model;
        }
        return lora != null ? lora.name() : config.model;
    }

    /** Tokenizes the prompt(s) and applies the dialect's context-length rule. */
    void applyContext(PromptTokenizer tokenizer, SimulatorConfig config) {
        if (chat && dialect == Dialect.TRTLLM && body.path("prompt_token_ids").isArray() && !body.get("prompt_token_ids").isEmpty()) {
            // TensorRT-LLM's chat server runs prompt_token_ids as given (its P/D orchestrator sends the context's).
            prompts.add(tokenIds(body.get("prompt_token_ids")));
        } else if (chat) {
            prompts.add(tokenizer.encodeChat(body));
        } else {
            JsonNode p = body.get("prompt");
            if (p.isTextual()) {
                prompts.add(tokenizer.encodeText(p.asText()));
            } else if (p.isArray() && !p.isEmpty() && p.get(0).isIntegralNumber()) {
                prompts.add(tokenIds(p));
            } else if (p.isArray() && !p.isEmpty()) {
                if (p.size() > 64) {
                    throw SimError.badRequest("prompt: at most 64 prompts per request, got " + p.size(), "prompt");
                }
                for (JsonNode e : p) {
                    if (e.isTextual()) {
                        prompts.add(tokenizer.encodeText(e.asText()));
                    } else if (e.isArray() && !e.isEmpty()) {
                        prompts.add(tokenIds(e));
                    } else {
                        throw SimError.badRequest("prompt: entries must be strings or token id arrays", "prompt");
                    }
                }
            } else {
                throw SimError.badRequest("prompt: must be a string, a token id array, or a list of them", "prompt");
            }
        }
        if (greedy) {
            greedyContexts(config);
        }
        maxTokens = new int[prompts.size()];
        contextRoom = new int[prompts.size()];
        int ctx = config.contextLen;
        for (int i = 0; i < prompts.size(); i++) {
            int promptTokens = prompts.get(i).length;
            if (promptTokens == 0) {
                throw SimError.badRequest("The prompt cannot be empty.", "prompt");
            }
            contextRoom[i] = Math.max(0, ctx - promptTokens);
            if (dialect == Dialect.LLAMACPP) {
                maxTokens[i] = llamaCheck(promptTokens, Math.max(1, ctx / config.maxConcurrency));
                contextRoom[i] = Math.max(0, ctx / config.maxConcurrency - promptTokens);
            } else if (dialect.vllmLike()) {
                maxTokens[i] = config.vllmContextCheck == ContextCheck.CLAMP ? vllmClamp(promptTokens, ctx)
                    : vllmReject(promptTokens, ctx);
            } else {
                maxTokens[i] = sglangCheck(promptTokens, ctx);
            }
        }
        if (dialect.vllmLike() && n > 1 && greedy) {
            // SamplingParams._verify_greedy_sampling, after the context rule
            throw SimError.badRequest("n must be 1 when using greedy sampling, got " + n + ".", "n");
        }
    }

    /**
     * Greedy decoding continues its context (see {@link TextGenerator}): the context is read from the prompt's text
     * where there is one (a string prompt, the chat rendered ChatML style whatever tokenizer counts the tokens), else
     * from its token ids.
     */
    private void greedyContexts(SimulatorConfig config) {
        long start = TextGenerator.greedyStart(config.seed);
        greedyContext = new long[prompts.size()];
        blankFirst = new boolean[prompts.size()];
        List<JsonNode> sources = new ArrayList<>();
        JsonNode p = body.get("prompt");
        if (chat) {
            sources.add(null);
        } else if (p.isTextual() || (p.isArray() && !p.isEmpty() && p.get(0).isIntegralNumber())) {
            sources.add(p);
        } else {
            p.forEach(sources::add);
        }
        for (int i = 0; i < prompts.size(); i++) {
            JsonNode src = i < sources.size() ? sources.get(i) : null;
            String text = chat ? (body.path("prompt_token_ids").isArray() && dialect == Dialect.TRTLLM ? null
                : WordTokenizer.renderChatMl(body)) : src != null && src.isTextual() ? src.asText() : null;
            if (text != null) {
                greedyContext[i] = WordTokenizer.greedyContext(text, start);
                blankFirst[i] = !text.isEmpty() && !Character.isWhitespace(text.charAt(text.length() - 1));
            } else {
                greedyContext[i] = WordTokenizer.greedyContext(prompts.get(i), start);
                blankFirst[i] = WordTokenizer.endsInGeneratedWord(prompts.get(i));
            }
        }
    }

    /**
     * vLLM (serving get_max_tokens): a prompt longer than the context is refused; otherwise max_tokens becomes
     * min(context - prompt, requested) silently (finish_reason "length" tells the client), and SamplingParams then
     * refuses anything below 1 — including a prompt that fills the context exactly.
     */
    private int vllmClamp(int promptTokens, int ctx) {
        if (promptTokens > ctx) {
            throw SimError.badRequest("Input length (" + promptTokens + ") exceeds model's maximum context length ("
                + ctx + ").");
        }
        int room = ctx - promptTokens;
        int max = requestedMaxTokens == NO_LIMIT ? room : Math.min(room, requestedMaxTokens);
        if (max < 1) {
            throw SimError.badRequest("max_tokens must be at least 1, got " + max + ".");
        }
        return requestedMaxTokens == NO_LIMIT ? NO_LIMIT : max;
    }

    /**
     * llama.cpp: a prompt that does not fit the slot's context is refused with its own error type and the two
     * numbers; max_tokens is the generation budget and the answer stops at the context end ("length").
     */
    private int llamaCheck(int promptTokens, int slotCtx) {
        if (promptTokens >= slotCtx) {
            ObjectNode body = com.fasterxml.jackson.databind.node.JsonNodeFactory.instance.objectNode();
            ObjectNode e = body.putObject("error");
            String message = "request (" + promptTokens + " tokens) exceeds the available context size (" + slotCtx
                + " tokens), try increasing it";
            e.put("code", 400);
            e.put("message", message);
            e.put("type", "exceed_context_size_error");
            e.put("n_prompt_tokens", promptTokens);
            e.put("n_ctx", slotCtx);
            throw SimError.withBody(400, message, body);
        }
        if (requestedMaxTokens == NO_LIMIT || requestedMaxTokens < 0) {
            return NO_LIMIT; // n_predict -1: until EOS or the context end
        }
        return Math.min(requestedMaxTokens, slotCtx - promptTokens);
    }

    /** vLLM builds with OpenAIServing._validate_input: 400s for a full context or an oversized max_tokens. */
    private int vllmReject(int promptTokens, int ctx) {
        if (promptTokens >= ctx) {
            throw SimError.badRequest("This model's maximum context length is " + ctx + " tokens. However, your "
                + "request has " + promptTokens + " input tokens. Please reduce the length of the input messages.",
                "input_tokens");
        }
        if (requestedMaxTokens != NO_LIMIT && promptTokens + requestedMaxTokens > ctx) {
            throw SimError.badRequest("'max_tokens' or 'max_completion_tokens' is too large: " + requestedMaxTokens
                + ". This model's maximum context length is " + ctx + " tokens and your request has " + promptTokens
                + " input tokens (" + requestedMaxTokens + " > " + ctx + " - " + promptTokens + ").", "max_tokens");
        }
        if (requestedMaxTokens != NO_LIMIT && requestedMaxTokens < 1) {
            throw SimError.badRequest("max_tokens must be at least 1, got " + requestedMaxTokens + ".");
        }
        return requestedMaxTokens;
    }

    /**
     * SGLang (TokenizerManager._validate_one_request, then SamplingParams.verify): the prompt alone must be shorter
     * than the context, prompt + max_new_tokens must stay below it ({@code >= self.context_len} is refused: one token
     * stricter than vLLM, which serves prompt + max_tokens = context), and max_new_tokens may be 0 (nothing generated)
     * but not negative.
     */
    private int sglangCheck(int promptTokens, int ctx) {
        if (promptTokens >= ctx) {
            throw SimError.badRequest("The input (" + promptTokens + " tokens) is longer than the model's context "
                + "length (" + ctx + " tokens).");
        }
        if (requestedMaxTokens != NO_LIMIT) {
            int total = promptTokens + requestedMaxTokens;
            if (total >= ctx) {
                throw SimError.badRequest("Requested token count exceeds the model's maximum context length of "
                    + ctx + " tokens. You requested a total of " + total + " tokens: " + promptTokens
                    + " tokens from the input messages and " + requestedMaxTokens + " tokens for the completion. "
                    + "Please reduce the number of tokens in the input messages or the completion to fit within the "
                    + "limit.");
            }
            if (requestedMaxTokens < 0) {
                throw SimError.badRequest("max_new_tokens must be at least 0, got " + requestedMaxTokens + ".");
            }
        }
        return requestedMaxTokens;
    }

    private static int[] tokenIds(JsonNode arr) {
        int[] ids = new int[arr.size()];
        for (int i = 0; i < ids.length; i++) {
            JsonNode t = arr.get(i);
            if (!t.isIntegralNumber() || !t.canConvertToInt() || t.asInt() < 0) {
                throw SimError.badRequest("prompt: token ids must be non-negative integers, got " + t, "prompt");
            }
            ids[i] = t.asInt();
        }
        return ids;
    }

    private static void validateMessages(ObjectNode body) {
        JsonNode messages = body.get("messages");
        if (messages == null || messages.isNull()) {
            throw SimError.badRequest("Field required: messages", "messages");
        }
        if (!messages.isArray() || messages.isEmpty()) {
            throw SimError.badRequest("messages: must be a non-empty array", "messages");
        }
        for (JsonNode m : messages) {
            if (!m.isObject() || !m.path("role").isTextual()) {
                throw SimError.badRequest("messages: every message needs a string `role`", "messages");
            }
        }
    }

    private static void validateTools(ObjectNode body, Dialect dialect) {
        JsonNode tools = body.get("tools");
        JsonNode choice = body.get("tool_choice");
        boolean hasTools = tools != null && !tools.isNull();
        if (hasTools && (!tools.isArray() || tools.isEmpty())) {
            if (dialect == Dialect.VLLM) {
                // ChatCompletionRequest.check_tool_usage, a request-model validator (protocol.py L899-983)
                throw requestValidation("`tools` must not be an empty array.", "tools");
            }
            throw SimError.badRequest("tools: must be a non-empty list when present", "tools");
        }
        if (choice == null || choice.isNull()) {
            return;
        }
        if (!hasTools && !(choice.isTextual() && choice.asText().equals("none"))) {
            throw SimError.badRequest("When using `tool_choice`, `tools` must be set.", "tool_choice");
        }
        if (choice.isObject()) {
            String name = choice.path("function").path("name").asText(null);
            boolean found = false;
            for (JsonNode t : tools) {
                if (name != null && name.equals(t.path("function").path("name").asText(null))) {
                    found = true;
                }
            }
            if (!found) {
                throw SimError.badRequest("Tool '" + name + "' has not been passed in `tools`.", "tool_choice");
            }
        }
    }

    private static List<String> parseStop(JsonNode stop) {
        List<String> out = new ArrayList<>();
        if (stop == null || stop.isNull()) {
            return out;
        }
        if (stop.isTextual()) {
            if (!stop.asText().isEmpty()) {
                out.add(stop.asText());
            }
            return out;
        }
        if (!stop.isArray() || stop.size() > 16) {
            throw SimError.badRequest("stop: must be a string or a list of at most 16 strings", "stop");
        }
        for (JsonNode s : stop) {
            if (!s.isTextual()) {
                throw SimError.badRequest("stop: entries must be strings", "stop");
            }
            if (!s.asText().isEmpty()) {
                out.add(s.asText());
            }
        }
        return out;
    }

    private static boolean bool(JsonNode node, String field, boolean dflt) {
        JsonNode v = node.get(field);
        if (v == null || v.isNull()) {
            return dflt;
        }
        if (!v.isBoolean()) {
            throw SimError.badRequest(field + ": must be a boolean, got " + v, field);
        }
        return v.asBoolean();
    }

    private static int intField(JsonNode node, String field, int dflt) {
        JsonNode v = node.get(field);
        if (v == null || v.isNull()) {
            return dflt;
        }
        if (!v.isIntegralNumber() || !v.canConvertToInt()) {
            throw SimError.badRequest(field + ": must be an integer, got " + v, field);
        }
        return v.asInt();
    }

    private static double number(JsonNode node, String field, double dflt) {
        JsonNode v = node.get(field);
        if (v == null || v.isNull()) {
            return dflt;
        }
        if (!v.isNumber()) {
            throw SimError.badRequest(field + ": must be a number, got " + v, field);
        }
        return v.asDouble();
    }
}
