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
    public boolean hasStreamOptions;
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
    /** After {@link EngineFieldStripper#strip}: how many of {@link #engineFieldRanges} are the ranges it removed. */
    int removedRangeCount;
    /** Offset of the body's closing brace (valid once the body parsed). */
    public int objectEnd = -1;
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
    /** {@link #textPrefix} came from {@code messages} (chat), not from {@code prompt}. */
    public boolean textPrefixFromMessages;
    /** {@code tools} is present and not null (the engines then pass the tools to the template, which may switch it). */
    public boolean hasTools;
    /** A top-level {@code lora_path} is present and not null (SGLang would run that adapter). */
    public boolean hasLoraPath;
    /**
     * The member names of {@code chat_template_kwargs} (an object), in body order; empty when absent or not an
     * object. Reused per connection: names are only collected for requests that send the field.
     */
    public final java.util.List<String> templateKwargs = new java.util.ArrayList<>(0);

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
        hasStreamOptions = false;
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
        removedRangeCount = 0;
        objectEnd = -1;
        textPrefix.setLength(0);
        textPrefixFromMessages = false;
        hasTools = false;
        hasLoraPath = false;
        templateKwargs.clear();
    }

    /** Appends request text to {@link #textPrefix} up to its bound (the rest is not needed to key on a prefix). */
    void appendText(char[] chars, int offset, int length) {
        int room = MAX_TEXT_PREFIX_CHARS - textPrefix.length();
        if (room > 0) {
            textPrefix.append(chars, offset, Math.min(room, length));
        }
    }

    void appendText(char c) {
        if (textPrefix.length() < MAX_TEXT_PREFIX_CHARS) {
            textPrefix.append(c);
        }
    }

    void addEngineFieldRange(int start, int end) {
        if (engineFieldRangeCount * 2 + 2 > engineFieldRanges.length) {
            engineFieldRanges = java.util.Arrays.copyOf(engineFieldRanges, engineFieldRanges.length * 2);
        }
        engineFieldRanges[engineFieldRangeCount * 2] = start;
        engineFieldRanges[engineFieldRangeCount * 2 + 1] = end;
        engineFieldRangeCount++;
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
