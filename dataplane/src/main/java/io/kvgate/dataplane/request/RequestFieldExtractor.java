package io.kvgate.dataplane.request;

import io.kvgate.dataplane.request.JsonLexer.JsonToken;
import io.netty.buffer.ByteBuf;
import java.io.IOException;
import java.nio.ByteBuffer;

/**
 * Extraction of the routing fields from a JSON request body in one pass of the body stage's own lexer
 * ({@link JsonLexer}, this thread's): no tree is built and the raw bytes are forwarded unchanged. The whole body is
 * scanned, so malformed JSON anywhere is refused before anything reaches an engine.
 *
 * <p>The scan runs at {@link #finish()} over the complete body, not chunk by chunk: the front door buffers the body
 * whole anyway (bounded by {@code limits.max_body_bytes}) and hands it over with {@link #body(ByteBuf)}, read in
 * place; callers that have the body in pieces {@link #feed} them (copied). That keeps the lexer free of state
 * across chunks. One instance per request; event-loop only.
 */
public final class RequestFieldExtractor {
    /** Outcome of {@link #finish()}. */
    public enum Result { OK, MALFORMED, NOT_OBJECT, EMPTY }

    /** This thread's lexer while {@link #finish()} scans; null otherwise. */
    private JsonLexer parser;
    private final RequestFields fields;
    /** The complete body, read in place at {@link #finish()} ({@link #body(ByteBuf)}), or null. */
    private ByteBuffer whole;
    /** The chunks {@link #feed} was given, copied, or null. */
    private byte[] fed;
    private int fedLength;
    private boolean finished;
    private int depth;
    private String topField;
    private boolean started;
    private boolean done;
    private String error;
    private Result failure;
    /** Start offset of the engine-internal member being read, or -1; its range ends at the next top-level token. */
    private long internalMemberStart = -1;
    /** The top-level prompt is an array: its elements are counted (a batch) unless they are token ids. */
    private boolean promptArray;
    private int promptElements;
    private boolean promptHasInts;
    /** Ints in the token-id list of a batch being read ({@code "prompt":[[1,2],[3]]}). */
    private int subListInts;
    /** Member name inside the chat message being read (depth 3) and inside one of its content parts (depth 5). */
    private String messageField;
    private String partField;
    /** The top-level {@code chat_template_kwargs} being read is an object (its member names are collected). */
    private boolean kwargsObject;
    /** The top-level {@code vllm_xargs} being read is an object: its members are checked (depth 2). */
    private boolean xargsObject;
    /** Where the {@code vllm_xargs} member being read that only engines may set began, or -1. */
    private int xargsInternalStart = -1;
    /** The editable member whose value comes next (its name was just read), or null. */
    private RequestFields.Member pendingMember;
    /** The editable member whose container value is being read (its range ends with the container), or null. */
    private RequestFields.Member containerMember;
    /** Member name inside the top-level {@code stream_options} object (depth 2). */
    private String streamOptionsField;
    /** A container value of {@code stream_options.include_usage} is being read (its range ends with it). */
    private boolean includeUsageContainer;
    /** The top-level {@code logit_bias} being read is an object; the key whose value comes next. */
    private boolean logitBiasObject;
    private String logitBiasKey;
    /** The top-level {@code response_format} being read is an object; the member name inside it (depth 2). */
    private boolean responseFormatObject;
    private String responseFormatField;
    /** Inside {@code response_format.json_schema} (an object, depth 3); the member name there. */
    private boolean inJsonSchema;
    private String jsonSchemaField;

    public RequestFieldExtractor(RequestFields fields) {
        this.fields = fields;
        fields.reset();
    }

    /**
     * Keeps at most {@code chars} characters of request text in {@link RequestFields#textPrefix} (clamped to
     * [0, {@link RequestFields#MAX_TEXT_PREFIX_CHARS}], the default): the front door passes what its routing table can
     * key on ({@code RouteTable#textPrefixChars}), so text no rule reads is skipped by the lexer, never decoded.
     * Before {@link #finish()}.
     */
    public RequestFieldExtractor textPrefixChars(int chars) {
        fields.textPrefixLimit = Math.max(0, Math.min(RequestFields.MAX_TEXT_PREFIX_CHARS, chars));
        return this;
    }

    /**
     * Keeps at most {@code ids} token ids of the first token-id prompt in {@link RequestFields#promptIds} (0, the
     * default, keeps none): the front door passes the most a rule of its routing table routes on
     * ({@code RouteTable#promptIdsKept}). Before {@link #finish()}.
     */
    public RequestFieldExtractor promptIdsKept(int ids) {
        fields.promptIds.limit(ids);
        return this;
    }

    /**
     * The complete body, from its reader index to its writer index: scanned in place by {@link #finish()}, so it
     * must not change until then. Instead of {@link #feed}, not with it.
     */
    public void body(ByteBuf body) {
        int n = body.readableBytes();
        fields.bodyLength = n;
        whole = body.nioBufferCount() == 1 ? body.internalNioBuffer(body.readerIndex(), n) : body.nioBuffer();
    }

    /** Feeds the next chunk of the body (copied: the buffer is consumed before this returns). */
    public void feed(ByteBuffer chunk) {
        int n = chunk.remaining();
        fields.bodyLength += n;
        if (fed == null || fed.length < fedLength + n) {
            fed = java.util.Arrays.copyOf(fed == null ? new byte[0] : fed, Math.max(fedLength + n, fedLength * 2));
        }
        chunk.get(fed, fedLength, n);
        fedLength += n;
    }

    /** Scans the body and reports whether it was one well-formed JSON object (once; later calls repeat the verdict). */
    public Result finish() {
        if (finished) {
            return failure != null ? failure : !started ? Result.EMPTY : Result.OK;
        }
        finished = true;
        parser = JsonLexer.forThisThread();
        parser.start(whole != null ? whole : ByteBuffer.wrap(fed == null ? new byte[0] : fed, 0, fedLength));
        try {
            drain();
        } catch (IOException e) {
            fail(Result.MALFORMED, e.getMessage());
        } finally {
            parser.clear();
            parser = null;
            whole = null;
        }
        if (failure != null) {
            return failure;
        }
        if (!started) {
            return Result.EMPTY;
        }
        if (!done) {
            fail(Result.MALFORMED, "unexpected end of input at byte " + fields.bodyLength);
            return failure;
        }
        return Result.OK;
    }

    /** What the parser objected to, for the client's error message. */
    public String error() {
        return error;
    }

    private void fail(Result r, String message) {
        failure = r;
        error = message;
    }

    private void drain() throws IOException {
        JsonToken t;
        while ((t = parser.nextToken()) != null) {
            if (done) {
                fail(Result.MALFORMED, "trailing content after the JSON object at byte " + offset());
                return;
            }
            if (!started) {
                started = true;
                if (t != JsonToken.START_OBJECT) {
                    fail(Result.NOT_OBJECT, "the request body must be a JSON object");
                    return;
                }
                depth = 1;
                continue;
            }
            switch (t) {
                case START_OBJECT, START_ARRAY -> {
                    if (depth == 1) {
                        onTopLevelContainer(t);
                        if (pendingMember != null) {
                            fields.valueFrom[pendingMember.ordinal()] = offset();
                            containerMember = pendingMember;
                            pendingMember = null;
                        }
                    } else if (depth == 2 && "stream_options".equals(topField) && "include_usage".equals(streamOptionsField)
                        && fields.streamOptionsObject) {
                        fields.includeUsageTrue = false;
                        fields.includeUsageStart = offset();
                        includeUsageContainer = true;
                        streamOptionsField = null;
                    } else if (depth == 2 && logitBiasObject && "logit_bias".equals(topField)) {
                        onLogitBiasValue(t);
                    } else if (depth == 2 && responseFormatObject && "response_format".equals(topField)) {
                        onResponseFormatMember(t);
                    } else if (depth == 3 && inJsonSchema && "name".equals(jsonSchemaField)) {
                        fields.jsonSchema = RequestFields.JS_NAME_NOT_STRING;
                        jsonSchemaField = null;
                    } else if (depth == 2 && "tools".equals(topField)) {
                        fields.toolsNonEmpty = true;
                    } else if (depth == 2 && "prompt".equals(topField) && t == JsonToken.START_ARRAY) {
                        fields.promptIsTokenIds = true; // [[1,2],[3]]: a list of token-id prompts
                        promptElements++;
                        promptIdsElement(t, -1);
                    } else if (depth == 2 && "prompt".equals(topField)) {
                        promptElements++;
                        promptIdsElement(t, -1);
                    } else if (depth == 3 && "prompt".equals(topField) && promptArray) {
                        fields.promptIds.listElement(-1); // a container is not a token id
                    }
                    depth++;
                }
                case END_OBJECT, END_ARRAY -> {
                    depth--;
                    if (depth == 1 && containerMember != null) {
                        fields.valueEnd[containerMember.ordinal()] = end();
                        containerMember = null;
                    } else if (depth == 2 && includeUsageContainer) {
                        fields.includeUsageEnd = end();
                        includeUsageContainer = false;
                    } else if (depth == 2 && inJsonSchema) {
                        inJsonSchema = false;
                    }
                    if (depth == 1 && xargsObject && "vllm_xargs".equals(topField)) {
                        closeXargsMember(parser.previousTokenEnd(), true);
                        xargsObject = false;
                    }
                    if (depth == 1 && "prompt".equals(topField) && promptArray) {
                        fields.promptCount = promptHasInts ? 1 : promptElements;
                        if (promptHasInts) {
                            fields.promptTokenIdsMax = promptElements;
                        }
                        promptArray = false;
                    } else if (depth == 2 && "prompt".equals(topField) && promptArray) {
                        fields.promptTokenIdsMax = Math.max(fields.promptTokenIdsMax, subListInts);
                        subListInts = 0;
                        fields.promptIds.endList();
                    } else if (depth == 2 && "messages".equals(topField) && t == JsonToken.END_OBJECT) {
                        fields.appendText(RequestFields.MESSAGE_END);
                        messageField = null;
                    } else if (depth == 4 && "messages".equals(topField)) {
                        partField = null; // a content part ended
                    }
                    if (depth == 0) {
                        done = true;
                        // Just past the last member's value (before any whitespace): where a member is added.
                        fields.objectEnd = parser.previousTokenEnd();
                        closeInternalMember(fields.objectEnd);
                    }
                }
                case FIELD_NAME -> {
                    if (depth == 1) {
                        closeInternalMember(offset());
                        topField = parser.currentName();
                        if (RequestFields.isEngineInternal(topField)) {
                            internalMemberStart = offset();
                        }
                        pendingMember = RequestFields.Member.of(topField);
                        if (pendingMember != null) {
                            fields.nameFrom[pendingMember.ordinal()] = offset();
                        }
                        if (pendingMember == RequestFields.Member.STREAM_OPTIONS) {
                            // the last stream_options wins: what an earlier one held no longer counts
                            fields.streamOptionsObject = false;
                            fields.streamOptionsMembers = 0;
                            fields.includeUsageTrue = false;
                            fields.includeUsageStart = -1;
                            fields.includeUsageEnd = -1;
                            streamOptionsField = null;
                        }
                    } else if (depth == 2 && "stream_options".equals(topField) && fields.streamOptionsObject) {
                        streamOptionsField = parser.currentName();
                        fields.streamOptionsMembers++;
                    } else if (depth == 3 && "messages".equals(topField)) {
                        messageField = parser.currentName();
                    } else if (depth == 5 && "messages".equals(topField)) {
                        partField = parser.currentName();
                    } else if (depth == 2 && kwargsObject && "chat_template_kwargs".equals(topField)) {
                        fields.templateKwargs.add(parser.currentName());
                    } else if (depth == 2 && xargsObject && "vllm_xargs".equals(topField)) {
                        closeXargsMember(offset(), false);
                        if (RequestFields.REPORT_MODE_XARG.equals(parser.currentName())) {
                            xargsInternalStart = offset();
                        }
                    } else if (depth == 2 && logitBiasObject && "logit_bias".equals(topField)) {
                        onLogitBiasKey(parser.currentName());
                    } else if (depth == 2 && responseFormatObject && "response_format".equals(topField)) {
                        responseFormatField = parser.currentName();
                    } else if (depth == 3 && inJsonSchema) {
                        jsonSchemaField = parser.currentName();
                    }
                }
                default -> {
                    if (depth == 1) {
                        onTopLevelScalar(t);
                        if (pendingMember != null) {
                            fields.valueFrom[pendingMember.ordinal()] = offset();
                            fields.valueEnd[pendingMember.ordinal()] = end();
                            pendingMember = null;
                        }
                    } else if (depth == 2 && "stream_options".equals(topField) && "include_usage".equals(streamOptionsField)
                        && fields.streamOptionsObject) {
                        fields.includeUsageTrue = t == JsonToken.VALUE_TRUE;
                        fields.includeUsageStart = offset();
                        fields.includeUsageEnd = end();
                        streamOptionsField = null;
                    } else if (depth == 2 && "tools".equals(topField)) {
                        fields.toolsNonEmpty = true; // not a tool object: the engines refuse it, the list is not empty
                    } else if (depth == 2 && "prompt".equals(topField)) {
                        promptElements++;
                        if (t == JsonToken.VALUE_STRING && promptElements == 1) {
                            appendCurrentText(); // a batch keys on its first prompt, as the tokenizer path does
                        }
                        if (t == JsonToken.VALUE_NUMBER_INT) {
                            fields.promptIsTokenIds = true;
                            promptHasInts = true;
                        }
                        promptIdsElement(t, t == JsonToken.VALUE_NUMBER_INT ? parser.tokenId() : -1);
                    } else if (depth == 2 && logitBiasObject && "logit_bias".equals(topField)) {
                        onLogitBiasValue(t);
                    } else if (depth == 2 && responseFormatObject && "response_format".equals(topField)) {
                        onResponseFormatMember(t);
                    } else if (depth == 3 && inJsonSchema && "name".equals(jsonSchemaField)) {
                        // the last "name" wins; null is no name, as pydantic's required str sees it
                        fields.jsonSchema = t == JsonToken.VALUE_STRING ? RequestFields.JS_NAMED
                            : t == JsonToken.VALUE_NULL ? RequestFields.JS_UNNAMED : RequestFields.JS_NAME_NOT_STRING;
                        jsonSchemaField = null;
                    } else if (depth == 3 && "prompt".equals(topField) && promptArray) {
                        if (t == JsonToken.VALUE_NUMBER_INT) {
                            subListInts++;
                        }
                        fields.promptIds.listElement(t == JsonToken.VALUE_NUMBER_INT ? parser.tokenId() : -1);
                    } else if (t == JsonToken.VALUE_STRING && "messages".equals(topField)
                        && "content".equals(messageField) && (depth == 3 || (depth == 5 && "text".equals(partField)))) {
                        appendCurrentText();
                    }
                }
            }
        }
    }

    /** The current token's first byte (see {@link RequestFields#valueFrom}). */
    private int offset() {
        return parser.tokenStart();
    }

    /** Just past the current token. */
    private int end() {
        return parser.tokenEnd();
    }

    /** Appends the current string to the text prefix, decoding only what its bound keeps. */
    private void appendCurrentText() {
        parser.appendText(fields.textPrefix, fields.textPrefixLimit - fields.textPrefix.length());
    }

    /** An element of the top-level prompt, when the prompt is an array (an object's members are not elements). */
    private void promptIdsElement(JsonToken t, int id) {
        if (promptArray) {
            fields.promptIds.element(t, id);
        }
    }

    /**
     * Records the {@code vllm_xargs} member that only engines may set, once its end is known: the next member's name,
     * or ({@code last}) just past the last value of the object, whose comma the stripper then takes.
     */
    private void closeXargsMember(int end, boolean last) {
        if (xargsInternalStart >= 0) {
            fields.addNestedEngineFieldRange(xargsInternalStart, end, last);
            xargsInternalStart = -1;
        }
    }

    /** Records the range of the engine-internal member that ends where the current top-level token starts. */
    private void closeInternalMember(int end) {
        if (internalMemberStart >= 0) {
            fields.addEngineFieldRange((int) internalMemberStart, end);
            internalMemberStart = -1;
        }
    }

    private void onTopLevelContainer(JsonToken t) {
        if (topField == null) {
            return;
        }
        switch (topField) {
            case "messages" -> {
                fields.hasMessages = true;
                fields.messagesNotArray = t != JsonToken.START_ARRAY;
                fields.textPrefix.setLength(0); // the last "messages" wins
                fields.textPrefixFromMessages = true;
                messageField = null;
                partField = null;
            }
            case "prompt" -> {
                fields.textPrefix.setLength(0);
                fields.textPrefixFromMessages = false;
                fields.hasPrompt = true;
                fields.promptIsTokenIds = false;
                fields.promptCount = 1;
                fields.promptTokenIdsMax = 0;
                promptArray = t == JsonToken.START_ARRAY;
                promptElements = 0;
                promptHasInts = false;
                subListInts = 0;
                fields.promptIds.startPrompt();
            }
            case "cache_salt" -> fields.cacheSalt = null;
            case "stream_options" -> {
                fields.hasStreamOptions = true;
                fields.streamOptionsObject = t == JsonToken.START_OBJECT;
            }
            case "kv_transfer_params" -> fields.hasKvTransferParams = true;
            case "tools" -> {
                fields.hasTools = true;
                fields.toolsNonEmpty = false; // the last "tools" wins; its elements set it
            }
            case "tool_choice" -> fields.toolChoice = RequestFields.TOOL_CHOICE_OTHER;
            case "lora_path" -> fields.hasLoraPath = true;
            case "chat_template_kwargs" -> { // the last occurrence wins
                fields.templateKwargs.clear();
                kwargsObject = t == JsonToken.START_OBJECT;
            }
            case "vllm_xargs" -> xargsObject = t == JsonToken.START_OBJECT;
            case "model" -> {
                fields.model = null; // the last "model" wins: a container after a string leaves no model to route on
                fields.modelNotString = true;
            }
            case "n" -> {
                fields.n = 1;
                fields.nInvalid = true;
            }
            case "temperature" -> {
                fields.temperatureZero = false;
                fields.temperature = Double.NaN;
            }
            case "suffix" -> fields.hasSuffix = true;
            case "include_stop_str_in_output" -> fields.includeStopStr = RequestFields.OTHER;
            case "no_stop_trim" -> fields.noStopTrim = RequestFields.OTHER;
            case "min_p" -> fields.minPSet = true;
            case "add_generation_prompt" -> fields.addGenerationPrompt = RequestFields.OTHER;
            case "continue_final_message" -> fields.continueFinalMessageTrue = false;
            case "logit_bias" -> {
                startLogitBias(t == JsonToken.START_OBJECT);
                if (t != JsonToken.START_OBJECT) {
                    logitBiasFault(RequestFields.LogitBiasFault.NOT_AN_OBJECT, null, typeName(t));
                }
            }
            case "response_format" -> startResponseFormat(t, t == JsonToken.START_OBJECT);
            // The last occurrence wins: a container after a value leaves a value the engine will refuse itself.
            case "logprobs" -> fields.logprobsTrue = false;
            case "top_logprobs" -> fields.hasTopLogprobs = true;
            case "max_tokens" -> {
                fields.hasMaxTokens = false;
                fields.maxTokensUnreadable = true;
            }
            case "max_completion_tokens" -> {
                fields.hasMaxCompletionTokens = false;
                fields.maxCompletionTokensUnreadable = true;
            }
            default -> { }
        }
    }

    /** A boolean switch's value as {@link RequestFields#TRUE} / {@code FALSE} / {@code ABSENT} (null) / {@code OTHER}. */
    private static int switchValue(JsonToken t) {
        return switch (t) {
            case VALUE_TRUE -> RequestFields.TRUE;
            case VALUE_FALSE -> RequestFields.FALSE;
            case VALUE_NULL -> RequestFields.ABSENT;
            default -> RequestFields.OTHER;
        };
    }

    /** A JSON value's type as OpenAI's messages name it ("expected an object, but got a string instead"). */
    private static String typeName(JsonToken t) {
        return switch (t) {
            case VALUE_STRING -> "a string";
            case VALUE_NUMBER_INT, VALUE_NUMBER_FLOAT -> "a number";
            case VALUE_TRUE, VALUE_FALSE -> "a boolean";
            case VALUE_NULL -> "null";
            case START_ARRAY -> "an array";
            default -> "an object";
        };
    }

    /** The current string token equals {@code s} (compared in the parser's buffer: no String is made). */
    private boolean textIs(String s) throws IOException {
        int len = parser.getTextLength();
        if (len != s.length()) {
            return false;
        }
        char[] c = parser.getTextCharacters();
        int off = parser.getTextOffset();
        for (int i = 0; i < len; i++) {
            if (c[off + i] != s.charAt(i)) {
                return false;
            }
        }
        return true;
    }

    /** A top-level {@code logit_bias} starts: the last occurrence wins, what an earlier one held no longer counts. */
    private void startLogitBias(boolean object) {
        fields.hasLogitBias = true;
        fields.logitBiasEntries = 0;
        fields.logitBiasMaxKey = -1;
        fields.logitBiasFault = null;
        fields.logitBiasFaultKey = null;
        fields.logitBiasFaultValue = null;
        fields.logitBiasFaultAbove = false;
        logitBiasObject = object;
        logitBiasKey = null;
    }

    /** Records the first fault of the {@code logit_bias} being read (only a faulty body pays for the strings). */
    private void logitBiasFault(RequestFields.LogitBiasFault fault, String key, String value) {
        if (fields.logitBiasFault == null) {
            fields.logitBiasFault = fault;
            fields.logitBiasFaultKey = key;
            fields.logitBiasFaultValue = value;
        }
    }

    /**
     * A key of {@code logit_bias}: a token id, written as a non-negative decimal integer (the engines read
     * {@code int(key)}; whether the id is in the vocabulary is the engine's to judge).
     */
    private void onLogitBiasKey(String key) {
        fields.logitBiasEntries++;
        logitBiasKey = key;
        boolean digits = !key.isEmpty();
        long id = 0;
        for (int i = 0; i < key.length() && digits; i++) {
            char c = key.charAt(i);
            digits = c >= '0' && c <= '9';
            id = id > (Long.MAX_VALUE - 9) / 10 ? Long.MAX_VALUE : id * 10 + (c - '0');
        }
        if (!digits) {
            logitBiasFault(RequestFields.LogitBiasFault.KEY_NOT_A_TOKEN_ID, key, null);
        } else if (id > fields.logitBiasMaxKey) {
            fields.logitBiasMaxKey = id;
        }
    }

    /** A value of {@code logit_bias}: a number in [-100, 100] (OpenAI's range; vLLM clamps, SGLang adds it as is). */
    private void onLogitBiasValue(JsonToken t) throws IOException {
        if (t == JsonToken.VALUE_NUMBER_INT || t == JsonToken.VALUE_NUMBER_FLOAT) {
            double d = parser.getDoubleValue();
            if ((d > 100 || d < -100) && fields.logitBiasFault == null) {
                logitBiasFault(RequestFields.LogitBiasFault.OUT_OF_RANGE, logitBiasKey, parser.getText());
                fields.logitBiasFaultAbove = d > 100;
            }
        } else {
            logitBiasFault(RequestFields.LogitBiasFault.VALUE_NOT_A_NUMBER, logitBiasKey, typeName(t));
        }
    }

    /** A top-level {@code response_format} starts (the last occurrence wins). */
    private void startResponseFormat(JsonToken t, boolean object) {
        fields.responseFormat = object ? RequestFields.RF_OBJECT
            : t == JsonToken.VALUE_NULL ? RequestFields.ABSENT : RequestFields.RF_NOT_OBJECT;
        fields.responseFormatType = null;
        fields.responseFormatFault = object || t == JsonToken.VALUE_NULL ? null : typeName(t);
        fields.jsonSchema = RequestFields.ABSENT;
        fields.jsonSchemaFault = null;
        responseFormatObject = object;
        responseFormatField = null;
        inJsonSchema = false;
        jsonSchemaField = null;
    }

    /** The value of a member of the {@code response_format} object: its {@code type} and {@code json_schema}. */
    private void onResponseFormatMember(JsonToken t) throws IOException {
        String name = responseFormatField;
        responseFormatField = null;
        if ("type".equals(name)) {
            fields.responseFormatFault = null;
            if (t == JsonToken.VALUE_NULL) {
                fields.responseFormatType = null;
            } else if (t != JsonToken.VALUE_STRING) {
                fields.responseFormatType = RequestFields.ResponseFormatType.NOT_A_STRING;
                fields.responseFormatFault = typeName(t);
            } else if (textIs("text")) {
                fields.responseFormatType = RequestFields.ResponseFormatType.TEXT;
            } else if (textIs("json_object")) {
                fields.responseFormatType = RequestFields.ResponseFormatType.JSON_OBJECT;
            } else if (textIs("json_schema")) {
                fields.responseFormatType = RequestFields.ResponseFormatType.JSON_SCHEMA;
            } else if (textIs("structural_tag")) {
                fields.responseFormatType = RequestFields.ResponseFormatType.STRUCTURAL_TAG;
            } else {
                fields.responseFormatType = RequestFields.ResponseFormatType.UNKNOWN;
                fields.responseFormatFault = parser.getText();
            }
        } else if ("json_schema".equals(name)) {
            fields.jsonSchemaFault = null;
            inJsonSchema = false;
            if (t == JsonToken.START_OBJECT) {
                fields.jsonSchema = RequestFields.JS_UNNAMED;
                inJsonSchema = true;
                jsonSchemaField = null;
            } else if (t == JsonToken.VALUE_NULL) {
                fields.jsonSchema = RequestFields.ABSENT;
            } else {
                fields.jsonSchema = RequestFields.JS_NOT_OBJECT;
                fields.jsonSchemaFault = typeName(t);
            }
        }
    }

    /** Where an integer completion budget's digits are, so the context clamp can lower it in place. */
    private void recordBudgetValue(JsonToken t) {
        if (t == JsonToken.VALUE_NUMBER_INT) {
            int start = offset();
            fields.addBudgetValueRange(start, start + parser.getTextLength());
        }
    }

    /** An integer token as an int, clamped to int range (a huge negative stays negative, a huge positive positive). */
    private int clampedInt() {
        return parser.getIntClamped();
    }

    /**
     * {@code n}: an integer (or a number with no fraction, which engines accept as one); values beyond int range
     * count as {@link Integer#MAX_VALUE} so the rule's {@code max_n} refuses them. Anything else is invalid: engines
     * would coerce {@code "5"}, so the gateway must not route (and size P/D rooms) on a value it did not read.
     */
    private void onN(JsonToken t) throws IOException {
        fields.nInvalid = false;
        switch (t) {
            case VALUE_NULL -> fields.n = 1;
            case VALUE_NUMBER_INT -> fields.n = clampedInt();
            case VALUE_NUMBER_FLOAT -> {
                double d = parser.getDoubleValue();
                if (Double.isFinite(d) && d == Math.rint(d)) {
                    fields.n = (int) Math.max(Integer.MIN_VALUE, Math.min(Integer.MAX_VALUE, d));
                } else {
                    fields.n = 1;
                    fields.nInvalid = true;
                }
            }
            default -> {
                fields.n = 1;
                fields.nInvalid = true;
            }
        }
    }

    /** A scalar {@code tool_choice}: null, or one of OpenAI's three strings (compared without allocating). */
    private byte toolChoice(JsonToken t) throws IOException {
        if (t == JsonToken.VALUE_NULL) {
            return RequestFields.TOOL_CHOICE_NULL;
        }
        if (t != JsonToken.VALUE_STRING) {
            return RequestFields.TOOL_CHOICE_OTHER;
        }
        char[] c = parser.getTextCharacters();
        int off = parser.getTextOffset();
        int len = parser.getTextLength();
        if (is(c, off, len, "auto")) {
            return RequestFields.TOOL_CHOICE_AUTO;
        }
        if (is(c, off, len, "none")) {
            return RequestFields.TOOL_CHOICE_NONE;
        }
        return is(c, off, len, "required") ? RequestFields.TOOL_CHOICE_REQUIRED : RequestFields.TOOL_CHOICE_OTHER;
    }

    private static boolean is(char[] c, int off, int len, String s) {
        if (len != s.length()) {
            return false;
        }
        for (int i = 0; i < len; i++) {
            if (c[off + i] != s.charAt(i)) {
                return false;
            }
        }
        return true;
    }

    private void onTopLevelScalar(JsonToken t) throws IOException {
        if (topField == null) {
            return;
        }
        switch (topField) {
            case "model" -> { // the last occurrence wins, whatever its type ("model":"a","model":null has no model)
                fields.model = t == JsonToken.VALUE_STRING ? parser.getText() : null;
                fields.modelNotString = t != JsonToken.VALUE_STRING && t != JsonToken.VALUE_NULL;
            }
            case "stream" -> fields.stream = t == JsonToken.VALUE_TRUE;
            case "user" -> fields.user = t == JsonToken.VALUE_STRING ? parser.getText() : null;
            case "prompt" -> {
                fields.textPrefix.setLength(0);
                fields.textPrefixFromMessages = false;
                if (t == JsonToken.VALUE_STRING) {
                    appendCurrentText();
                }
                fields.hasPrompt = t != JsonToken.VALUE_NULL;
                fields.promptIsTokenIds = false;
                fields.promptCount = fields.hasPrompt ? 1 : 0;
                fields.promptTokenIdsMax = 0;
                fields.promptIds.startPrompt();
            }
            case "cache_salt" -> fields.cacheSalt = t == JsonToken.VALUE_STRING ? parser.getText() : null;
            case "messages" -> {
                fields.textPrefix.setLength(0);
                fields.textPrefixFromMessages = true;
                fields.hasMessages = t != JsonToken.VALUE_NULL;
                fields.messagesNotArray = fields.hasMessages;
            }
            case "stream_options" -> fields.hasStreamOptions = t != JsonToken.VALUE_NULL;
            case "tools" -> {
                fields.hasTools = t != JsonToken.VALUE_NULL;
                fields.toolsNonEmpty = false;
            }
            case "tool_choice" -> fields.toolChoice = toolChoice(t);
            case "lora_path" -> fields.hasLoraPath = t != JsonToken.VALUE_NULL;
            case "chat_template_kwargs" -> {
                fields.templateKwargs.clear();
                kwargsObject = false;
            }
            case "n" -> onN(t);
            case "logprobs" -> fields.logprobsTrue = t == JsonToken.VALUE_TRUE;
            case "top_logprobs" -> fields.hasTopLogprobs = t != JsonToken.VALUE_NULL;
            case "temperature" -> {
                boolean number = t == JsonToken.VALUE_NUMBER_INT || t == JsonToken.VALUE_NUMBER_FLOAT;
                fields.temperature = number ? parser.getDoubleValue() : Double.NaN;
                fields.temperatureZero = number && fields.temperature == 0.0;
            }
            // "" is no suffix (OpenAI's default is null): only text to insert is refused
            case "suffix" -> fields.hasSuffix = t != JsonToken.VALUE_NULL
                && !(t == JsonToken.VALUE_STRING && parser.getTextLength() == 0);
            case "include_stop_str_in_output" -> fields.includeStopStr = switchValue(t);
            case "no_stop_trim" -> fields.noStopTrim = switchValue(t);
            case "min_p" -> fields.minPSet = t != JsonToken.VALUE_NULL
                && !((t == JsonToken.VALUE_NUMBER_INT || t == JsonToken.VALUE_NUMBER_FLOAT) && parser.getDoubleValue() == 0.0);
            case "add_generation_prompt" -> fields.addGenerationPrompt = switchValue(t);
            case "continue_final_message" -> fields.continueFinalMessageTrue = t == JsonToken.VALUE_TRUE;
            case "logit_bias" -> {
                startLogitBias(false);
                fields.hasLogitBias = t != JsonToken.VALUE_NULL;
                if (fields.hasLogitBias) {
                    logitBiasFault(RequestFields.LogitBiasFault.NOT_AN_OBJECT, null, typeName(t));
                }
            }
            case "response_format" -> startResponseFormat(t, false);
            case "max_tokens" -> {
                fields.hasMaxTokens = t == JsonToken.VALUE_NUMBER_INT;
                fields.maxTokens = fields.hasMaxTokens ? clampedInt() : 0;
                fields.maxTokensUnreadable = !fields.hasMaxTokens && t != JsonToken.VALUE_NULL;
                recordBudgetValue(t);
            }
            case "max_completion_tokens" -> {
                fields.hasMaxCompletionTokens = t == JsonToken.VALUE_NUMBER_INT;
                fields.maxCompletionTokens = fields.hasMaxCompletionTokens ? clampedInt() : 0;
                fields.maxCompletionTokensUnreadable = !fields.hasMaxCompletionTokens && t != JsonToken.VALUE_NULL;
                recordBudgetValue(t);
            }
            default -> { }
        }
    }
}
