package io.kvgate.dataplane.request;

/**
 * The routing fields of one OpenAI request body, pulled out by {@link RequestFieldExtractor} without building a
 * tree. With duplicate keys the last occurrence wins for every field (as in Python's {@code json}, which the engines
 * use), so the gateway routes on what the engine will read. Mutable and reused per connection; event-loop only.
 */
public final class RequestFields {
    /** Top-level fields only engines may set (P/D sets its own): a client's copy is removed before forwarding. */
    public static final String[] ENGINE_INTERNAL_FIELDS =
        {"kv_transfer_params", "bootstrap_host", "bootstrap_port", "bootstrap_room", "disaggregated_params"};
    /**
     * vLLM's per-request "full report mode", inside the top-level {@code vllm_xargs} object: the OpenAI protocol copies
     * {@code vllm_xargs} into {@code SamplingParams.extra_args} ({@code to_sampling_params}), {@code vllm/v1/request.py}
     * reads {@code extra_args.get("kv_cache_report_mode", "incremental")}, and with {@code "full"}
     * {@code KVCacheManager.get_computed_blocks} emits a BlockStored for every prefix-cache-REUSED block (vLLM PR
     * #45261) with no BlockRemoved to match it, so the index's per-copy reference counts never return to 0.
     */
    public static final String REPORT_MODE_XARG = "kv_cache_report_mode";

    /**
     * Top-level members whose value the gateway may rewrite before forwarding ({@link RequestEdits}): the byte range
     * of each one's (last) value is recorded while the body streams in, so an edit needs no second parse.
     */
    public enum Member {
        MODEL("model"), N("n"), STREAM_OPTIONS("stream_options"), TEMPERATURE("temperature"), MAX_TOKENS("max_tokens"),
        MAX_COMPLETION_TOKENS("max_completion_tokens"), INCLUDE_STOP_STR_IN_OUTPUT("include_stop_str_in_output"),
        NO_STOP_TRIM("no_stop_trim"), LOGIT_BIAS("logit_bias"), STREAM("stream"), MIN_TOKENS("min_tokens"),
        MIN_COMPLETION_TOKENS("min_completion_tokens"), PROMPT("prompt"), PROMPT_TOKEN_IDS("prompt_token_ids"),
        CACHE_SALT("cache_salt");

        /** The member's JSON name. */
        public final String jsonName;
        static final Member[] ALL = values();

        Member(String jsonName) {
            this.jsonName = jsonName;
        }

        /** The member a top-level name is, or null (no allocation: a switch on the name). */
        static Member of(String name) {
            return switch (name) {
                case "model" -> MODEL;
                case "n" -> N;
                case "stream_options" -> STREAM_OPTIONS;
                case "temperature" -> TEMPERATURE;
                case "max_tokens" -> MAX_TOKENS;
                case "max_completion_tokens" -> MAX_COMPLETION_TOKENS;
                case "include_stop_str_in_output" -> INCLUDE_STOP_STR_IN_OUTPUT;
                case "no_stop_trim" -> NO_STOP_TRIM;
                case "logit_bias" -> LOGIT_BIAS;
                case "stream" -> STREAM;
                case "min_tokens" -> MIN_TOKENS;
                case "min_completion_tokens" -> MIN_COMPLETION_TOKENS;
                case "prompt" -> PROMPT;
                case "prompt_token_ids" -> PROMPT_TOKEN_IDS;
                case "cache_salt" -> CACHE_SALT;
                default -> null;
            };
        }
    }

    public String model;
    public boolean modelNotString;
    public boolean stream;
    public String user;
    public boolean hasMessages;
    public boolean messagesNotArray;
    public boolean hasPrompt;
    public boolean promptIsTokenIds;
    /** Prompts in a completions body: 1 for a string or one token-id list, the list length for a batch. */
    public int promptCount;
    /** Ids of the longest token-id prompt (a list of ints, or one list of a batch); 0 for text prompts. */
    public int promptTokenIdsMax;
    /** The first token-id prompt's ids, as many as some rule routes on ({@link PromptIds}). */
    public final PromptIds promptIds = new PromptIds();
    /** The last top-level {@code cache_salt} when it is a string, else null. */
    public String cacheSalt;
    public boolean hasStreamOptions;
    /** {@code stream_options} is an object (the last occurrence): only then can the gateway merge a member into it. */
    public boolean streamOptionsObject;
    /** Members of that object (so a merged member knows whether it needs a comma). */
    public int streamOptionsMembers;
    /** That object's last {@code include_usage} is {@code true}: the client asked for the usage chunk. */
    public boolean includeUsageTrue;
    /** Byte range of that object's last {@code include_usage} value ({@code -1}: none), as {@link #valueStart}. */
    public int includeUsageStart = -1;
    public int includeUsageEnd = -1;
    /** {@code temperature} is a number equal to 0 (greedy sampling in both engines). */
    public boolean temperatureZero;
    /** The (last) {@code temperature} when it is a number, else NaN (absent, null, anything else). */
    public double temperature = Double.NaN;
    /** Completions' {@code suffix} is present and neither null nor the empty string. */
    public boolean hasSuffix;
    /** The stop-string switch in each engine's spelling: one of {@link #ABSENT}, {@link #TRUE}, {@link #FALSE}, {@link #OTHER}. */
    public int includeStopStr;
    public int noStopTrim;
    public static final int ABSENT = 0;
    public static final int TRUE = 1;
    public static final int FALSE = 2;
    /** Present with a value that is neither a boolean nor null (the engine judges it). */
    public static final int OTHER = 3;
    /** {@code logit_bias} is present and not null. */
    public boolean hasLogitBias;
    /** Members of that {@code logit_bias} object. */
    public int logitBiasEntries;
    /** Its largest token-id key ({@link Long#MAX_VALUE} past 18 digits; -1: none). */
    public long logitBiasMaxKey = -1;
    /** The first thing wrong with that {@code logit_bias} ({@link LogitBiasFault}), or null. */
    public LogitBiasFault logitBiasFault;
    /** The key the fault is about (null for {@link LogitBiasFault#NOT_AN_OBJECT}); set only for a faulty body. */
    public String logitBiasFaultKey;
    /** The JSON type of the faulty value ({@code "string"}, ...), or the number as written for {@link LogitBiasFault#OUT_OF_RANGE}. */
    public String logitBiasFaultValue;
    /** The faulty number's sign: above 100 (true) or below -100 (false). */
    public boolean logitBiasFaultAbove;
    /** {@code min_p} is present and not null, and not the number 0 (which filters nothing). */
    public boolean minPSet;
    /** The last {@code response_format}: one of {@link #ABSENT}, {@link #RF_OBJECT}, {@link #RF_NOT_OBJECT}. */
    public int responseFormat;
    public static final int RF_OBJECT = 1;
    public static final int RF_NOT_OBJECT = 2;
    /** Its {@code type} ({@link ResponseFormatType}), null when it has none. */
    public ResponseFormatType responseFormatType;
    /** The JSON type of {@code response_format} (or its {@code type}) when that is the fault, or an unknown type's text. */
    public String responseFormatFault;
    /** Its {@code json_schema}: one of {@link #ABSENT} (or null), {@link #JS_NAMED}, {@link #JS_UNNAMED}, {@link #JS_NOT_OBJECT}. */
    public int jsonSchema;
    public static final int JS_NAMED = 1;
    /** An object without a string {@code name}. */
    public static final int JS_UNNAMED = 2;
    public static final int JS_NOT_OBJECT = 3;
    /** The JSON type of a {@code json_schema} that is not an object ({@code "a string"}, ...). */
    public String jsonSchemaFault;
    public static final int JS_NAME_NOT_STRING = 4;
    /** Chat's {@code add_generation_prompt} as {@link #ABSENT} (the engines' default: true), {@link #TRUE}, ... */
    public int addGenerationPrompt;
    /** Chat's {@code continue_final_message} is {@code true}. */
    public boolean continueFinalMessageTrue;
    public int n = 1;
    /** {@code n} was present with a value that is not an integer (a string, a fraction, a container...). */
    public boolean nInvalid;
    public boolean hasKvTransferParams;
    /** {@code logprobs} is {@code true} (chat's boolean form; completions' integer form is not {@code true}). */
    public boolean logprobsTrue;
    /** {@code top_logprobs} is present and not null. */
    public boolean hasTopLogprobs;
    /** {@code max_tokens} is an integer (clamped to int range): then {@link #maxTokens} holds it. */
    public boolean hasMaxTokens;
    public int maxTokens;
    /** {@code max_completion_tokens} is an integer (clamped to int range): then {@link #maxCompletionTokens} holds it. */
    public boolean hasMaxCompletionTokens;
    public int maxCompletionTokens;
    /**
     * {@code max_tokens} / {@code max_completion_tokens} is present and not null but not an integer (a fraction, a
     * string...): the engine reads a value the gateway did not, so the gateway does not judge its context budget.
     */
    public boolean maxTokensUnreadable;
    public boolean maxCompletionTokensUnreadable;
    /**
     * Every top-level integer value of {@code max_tokens} and {@code max_completion_tokens}, duplicates included, in
     * body order, as {@code [at, at + length)}: {@code at} is where the parser located the number (at or just past
     * its first digit), {@code length} its text's; where the context clamp writes the lowered budget
     * ({@link ContextBudget#lowerBudget}). Offsets as in {@link #engineFieldRanges}.
     */
    public int[] budgetValueRanges = new int[4];
    public int budgetValueRangeCount;
    /**
     * Byte ranges {@code [start, end)} of the top-level engine-internal members, in body order: {@code start} is the
     * member name's opening quote, {@code end} the start of the next top-level token (the next member's name, or the
     * closing brace for the last member), so removing a range keeps the JSON valid except for a last member's
     * leading comma, which {@link EngineFieldStripper} takes care of.
     */
    public int[] engineFieldRanges = new int[8];
    public int engineFieldRangeCount;
    /**
     * Per range of {@link #engineFieldRanges}: {@link #RANGE_TOP_LEVEL}, or a {@link #REPORT_MODE_XARG} member inside
     * {@code vllm_xargs} ({@link #RANGE_NESTED}; {@link #RANGE_NESTED_LAST} when its end is just past the last value
     * of that object, so its leading comma goes with it).
     */
    int[] engineFieldKinds = new int[4];
    static final int RANGE_TOP_LEVEL = 0;
    static final int RANGE_NESTED = 1;
    static final int RANGE_NESTED_LAST = 2;
    /** {@link #keepReportModeXarg} was called: a re-read of the body ({@link RequestEdits#refreshIfEdited}) keeps it. */
    boolean reportModeXargKept;
    /** After {@link EngineFieldStripper#strip}: how many of {@link #engineFieldRanges} are the ranges it removed. */
    int removedRangeCount;
    /**
     * Offset just past the last member's value (or the opening brace of an empty object), before any whitespace and
     * the closing brace: where a member is added (valid once the body parsed).
     */
    public int objectEnd = -1;
    /**
     * Bytes of body the extractor was fed: every recorded offset refers to a body of exactly this length, so an
     * edit that changed the body in between would be caught ({@link RequestEdits#apply}) instead of splicing at
     * stale offsets.
     */
    public int bodyLength;
    /**
     * Per {@link Member}: where the byte range of the member's last value starts, as the parser reports it (-1:
     * absent). The non-blocking parser places a token one byte past its first byte; {@link RequestEdits} resolves
     * the exact start ({@link #valueStart}) against the body.
     */
    public final int[] valueFrom = new int[Member.ALL.length];
    /** Per {@link Member}: the offset just past the member's last value (exact). */
    public final int[] valueEnd = new int[Member.ALL.length];
    /**
     * Per {@link Member}: where the parser located the name of the member's last occurrence (at or just past its
     * opening quote; -1: absent), so {@link RequestEdits#rename} can respell it.
     */
    public final int[] nameFrom = new int[Member.ALL.length];
    /**
     * What the gateway rewrites in the answers to this request (model alias, greedy replication, forced usage), or
     * null when it relays them byte for byte. Set by the front door with the request edits that go with it.
     */
    public AnswerRewrite answerRewrite;
    /** The most characters of request text the body stage keeps ({@code chwbl.prefix_chars} is bounded by it). */
    public static final int MAX_TEXT_PREFIX_CHARS = io.kvgate.control.config.RuleConfig.MAX_PREFIX_CHARS;
    /** Ends each chat message's text in {@link #textPrefix}: "ab" + "c" and "a" + "bc" are different conversations. */
    public static final char MESSAGE_END = '\u001e';
    /**
     * The first {@link #MAX_TEXT_PREFIX_CHARS} characters of the request's text in one canonical form, captured while
     * the body streams in (no second parse): for chat, each message's {@code content} (a string, or the {@code text}
     * of its parts, in order) followed by {@link #MESSAGE_END}; for completions, the prompt string (the first one of
     * a batch). What {@code chwbl} keys on when the rule has no tokenizer. Reused per connection.
     */
    public final StringBuilder textPrefix = new StringBuilder();
    /**
     * How many characters of {@link #textPrefix} this request keeps: {@link #MAX_TEXT_PREFIX_CHARS} unless the body
     * stage was told fewer are needed ({@link RequestFieldExtractor#textPrefixChars}: the longest
     * {@code chwbl.prefix_chars} of the routing table, 0 when no rule keys on text). {@link #reset()} restores the
     * maximum; a re-read of an edited body ({@code RequestEdits.refreshIfEdited}) keeps the bound it had.
     */
    public int textPrefixLimit = MAX_TEXT_PREFIX_CHARS;
    /** {@link #textPrefix} came from {@code messages} (chat), not from {@code prompt}. */
    public boolean textPrefixFromMessages;
    /** {@code tools} is present and not null (the engines then pass the tools to the template, which may switch it). */
    public boolean hasTools;
    /** {@code tools} is an array with at least one element (an empty list is the engines' own 400). */
    public boolean toolsNonEmpty;
    /** The last top-level {@code tool_choice}: one of the {@code TOOL_CHOICE_*} values. */
    public byte toolChoice;
    public static final byte TOOL_CHOICE_ABSENT = 0;
    public static final byte TOOL_CHOICE_NULL = 1;
    public static final byte TOOL_CHOICE_NONE = 2;
    public static final byte TOOL_CHOICE_AUTO = 3;
    public static final byte TOOL_CHOICE_REQUIRED = 4;
    /** An object (a named function) or any other value. */
    public static final byte TOOL_CHOICE_OTHER = 5;
    /** A top-level {@code lora_path} is present and not null (SGLang would run that adapter). */
    public boolean hasLoraPath;
    /**
     * The member names of {@code chat_template_kwargs} (an object), in body order; empty when absent or not an
     * object. Reused per connection: names are only collected for requests that send the field.
     */
    public final java.util.List<String> templateKwargs = new java.util.ArrayList<>(0);

    public RequestFields() {
        java.util.Arrays.fill(valueFrom, -1);
        java.util.Arrays.fill(valueEnd, -1);
        java.util.Arrays.fill(nameFrom, -1);
    }

    /** What is wrong with a {@code logit_bias} (OpenAI's shape: token-id keys, numbers in [-100, 100]). */
    public enum LogitBiasFault { NOT_AN_OBJECT, KEY_NOT_A_TOKEN_ID, VALUE_NOT_A_NUMBER, OUT_OF_RANGE }

    /** {@code response_format.type}: the four both engines accept, or something else. */
    public enum ResponseFormatType { TEXT, JSON_OBJECT, JSON_SCHEMA, STRUCTURAL_TAG, UNKNOWN, NOT_A_STRING }

    public void reset() {
        model = null;
        modelNotString = false;
        stream = false;
        user = null;
        hasMessages = false;
        messagesNotArray = false;
        hasPrompt = false;
        promptIsTokenIds = false;
        promptCount = 0;
        promptTokenIdsMax = 0;
        promptIds.reset();
        cacheSalt = null;
        hasStreamOptions = false;
        streamOptionsObject = false;
        streamOptionsMembers = 0;
        includeUsageTrue = false;
        includeUsageStart = -1;
        includeUsageEnd = -1;
        temperatureZero = false;
        temperature = Double.NaN;
        hasSuffix = false;
        includeStopStr = ABSENT;
        noStopTrim = ABSENT;
        hasLogitBias = false;
        logitBiasEntries = 0;
        logitBiasMaxKey = -1;
        logitBiasFault = null;
        logitBiasFaultKey = null;
        logitBiasFaultValue = null;
        logitBiasFaultAbove = false;
        minPSet = false;
        responseFormat = ABSENT;
        responseFormatType = null;
        responseFormatFault = null;
        jsonSchema = ABSENT;
        jsonSchemaFault = null;
        addGenerationPrompt = ABSENT;
        continueFinalMessageTrue = false;
        n = 1;
        nInvalid = false;
        hasKvTransferParams = false;
        logprobsTrue = false;
        hasTopLogprobs = false;
        hasMaxTokens = false;
        maxTokens = 0;
        hasMaxCompletionTokens = false;
        maxCompletionTokens = 0;
        maxTokensUnreadable = false;
        maxCompletionTokensUnreadable = false;
        budgetValueRangeCount = 0;
        engineFieldRangeCount = 0;
        reportModeXargKept = false;
        removedRangeCount = 0;
        objectEnd = -1;
        bodyLength = 0;
        java.util.Arrays.fill(valueFrom, -1);
        java.util.Arrays.fill(valueEnd, -1);
        java.util.Arrays.fill(nameFrom, -1);
        answerRewrite = null;
        textPrefix.setLength(0);
        textPrefixLimit = MAX_TEXT_PREFIX_CHARS;
        textPrefixFromMessages = false;
        hasTools = false;
        toolsNonEmpty = false;
        toolChoice = TOOL_CHOICE_ABSENT;
        hasLoraPath = false;
        templateKwargs.clear();
    }

    /** Appends request text to {@link #textPrefix} up to its bound (the rest is not needed to key on a prefix). */
    void appendText(char[] chars, int offset, int length) {
        int room = textPrefixLimit - textPrefix.length();
        if (room > 0) {
            textPrefix.append(chars, offset, Math.min(room, length));
        }
    }

    void appendText(char c) {
        if (textPrefix.length() < textPrefixLimit) {
            textPrefix.append(c);
        }
    }

    /** Whether the body has {@code m} (its last occurrence is recorded). */
    public boolean has(Member m) {
        return valueFrom[m.ordinal()] >= 0;
    }

    /**
     * The exact start of {@code m}'s recorded value in {@code body} (offsets relative to its reader index): from one
     * byte before the parser's location, past the colon and whitespace that precede every member value. Works
     * whichever way the parser reports a token's location (at its first byte or one past it).
     */
    public int valueStart(io.netty.buffer.ByteBuf body, Member m) {
        return exactStart(body, valueFrom[m.ordinal()]);
    }

    static int exactStart(io.netty.buffer.ByteBuf body, int reported) {
        int base = body.readerIndex();
        int i = Math.max(0, reported - 1);
        while (i < body.readableBytes()) {
            byte b = body.getByte(base + i);
            if (b != ':' && b != ' ' && b != '\t' && b != '\n' && b != '\r') {
                break;
            }
            i++;
        }
        return i;
    }

    void addEngineFieldRange(int start, int end) {
        addRange(start, end, RANGE_TOP_LEVEL);
    }

    void addNestedEngineFieldRange(int start, int end, boolean lastOfObject) {
        addRange(start, end, lastOfObject ? RANGE_NESTED_LAST : RANGE_NESTED);
    }

    private void addRange(int start, int end, int kind) {
        if (engineFieldRangeCount * 2 + 2 > engineFieldRanges.length) {
            engineFieldRanges = java.util.Arrays.copyOf(engineFieldRanges, engineFieldRanges.length * 2);
        }
        if (engineFieldRangeCount >= engineFieldKinds.length) {
            engineFieldKinds = java.util.Arrays.copyOf(engineFieldKinds, engineFieldKinds.length * 2);
        }
        engineFieldRanges[engineFieldRangeCount * 2] = start;
        engineFieldRanges[engineFieldRangeCount * 2 + 1] = end;
        engineFieldKinds[engineFieldRangeCount] = kind;
        engineFieldRangeCount++;
    }

    /**
     * Keeps the client's {@code vllm_xargs.kv_cache_report_mode} (drops its ranges): only a {@code kv_exact} rule's
     * index counts the copies vLLM announces, elsewhere the client's extension argument is none of the gateway's
     * business. Call before stripping.
     */
    public void keepReportModeXarg() {
        reportModeXargKept = true;
        int out = 0;
        for (int k = 0; k < engineFieldRangeCount; k++) {
            if (engineFieldKinds[k] == RANGE_TOP_LEVEL) {
                engineFieldRanges[out * 2] = engineFieldRanges[k * 2];
                engineFieldRanges[out * 2 + 1] = engineFieldRanges[k * 2 + 1];
                engineFieldKinds[out] = RANGE_TOP_LEVEL;
                out++;
            }
        }
        engineFieldRangeCount = out;
    }

    void addBudgetValueRange(int start, int end) {
        if (budgetValueRangeCount * 2 + 2 > budgetValueRanges.length) {
            budgetValueRanges = java.util.Arrays.copyOf(budgetValueRanges, budgetValueRanges.length * 2);
        }
        budgetValueRanges[budgetValueRangeCount * 2] = start;
        budgetValueRanges[budgetValueRangeCount * 2 + 1] = end;
        budgetValueRangeCount++;
    }

    static boolean isEngineInternal(String name) {
        for (String f : ENGINE_INTERNAL_FIELDS) {
            if (f.equals(name)) {
                return true;
            }
        }
        return false;
    }
}
