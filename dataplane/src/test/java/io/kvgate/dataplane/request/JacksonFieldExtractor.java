package io.kvgate.dataplane.request;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.async.ByteBufferFeeder;
import java.io.IOException;
import java.nio.ByteBuffer;

/**
 * The oracle of {@link JsonLexerDifferentialTest}: the body stage's field extractor as it was before it had its own
 * lexer ({@link RequestFieldExtractor} on main up to 51fe6f7), on Jackson's non-blocking parser with the same
 * {@code JsonFactory.builder().build()} defaults. Test tree only; its logic is kept as it was, so what the new
 * extractor gives can be compared with what the gateway gave.
 */
final class JacksonFieldExtractor {
    /**
     * One factory per body here (the gateway shared one): Jackson's name table is shared by the parsers of a
     * factory, and a malformed name whose bytes pack into the same quads as a name seen earlier ({@code "cont\xFFent"}
     * after other names with 0xFF) is found there and passes unchecked. The oracle must judge each body alone.
     */
    private final JsonFactory FACTORY = JsonFactory.builder().build();

    /** Outcome of {@link #finish()}. */
    public enum Result { OK, MALFORMED, NOT_OBJECT, EMPTY }

    private final JsonParser parser;
    private final ByteBufferFeeder feeder;
    private final RequestFields fields;
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
    /** The editable member whose value comes next (its name was just read), or null. */
    private RequestFields.Member pendingMember;
    /** The editable member whose container value is being read (its range ends with the container), or null. */
    private RequestFields.Member containerMember;
    /** Member name inside the top-level {@code stream_options} object (depth 2). */
    private String streamOptionsField;
    /** A container value of {@code stream_options.include_usage} is being read (its range ends with it). */
    private boolean includeUsageContainer;

    JacksonFieldExtractor(RequestFields fields) {
        try {
            this.parser = FACTORY.createNonBlockingByteBufferParser();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
        this.feeder = (ByteBufferFeeder) parser.getNonBlockingInputFeeder();
        this.fields = fields;
        fields.reset();
    }

    /** Feeds the next chunk of the body (the buffer is consumed before this returns). */
    public void feed(ByteBuffer chunk) {
        fields.bodyLength += chunk.remaining();
        if (failure != null || !chunk.hasRemaining()) {
            return;
        }
        try {
            feeder.feedInput(chunk);
            drain();
        } catch (IOException e) {
            fail(Result.MALFORMED, message(e));
        }
    }

    /** Ends the input and reports whether the body was one well-formed JSON object. */
    public Result finish() {
        if (failure != null) {
            return failure;
        }
        try {
            feeder.endOfInput();
            drain();
        } catch (IOException e) {
            fail(Result.MALFORMED, message(e));
        }
        if (failure != null) {
            return failure;
        }
        if (!started) {
            return Result.EMPTY;
        }
        if (!done) {
            fail(Result.MALFORMED, "unexpected end of input");
            return failure;
        }
        return Result.OK;
    }

    private static String message(IOException e) {
        return e instanceof com.fasterxml.jackson.core.JsonProcessingException j ? j.getOriginalMessage() : e.getMessage();
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
        while ((t = parser.nextToken()) != null && t != JsonToken.NOT_AVAILABLE) {
            if (done) {
                fail(Result.MALFORMED, "trailing content after the JSON object");
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
                    } else if (depth == 2 && "prompt".equals(topField) && t == JsonToken.START_ARRAY) {
                        fields.promptIsTokenIds = true; // [[1,2],[3]]: a list of token-id prompts
                        promptElements++;
                    } else if (depth == 2 && "prompt".equals(topField)) {
                        promptElements++;
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
                    } else if (depth == 2 && "messages".equals(topField) && t == JsonToken.END_OBJECT) {
                        fields.appendText(RequestFields.MESSAGE_END);
                        messageField = null;
                    } else if (depth == 4 && "messages".equals(topField)) {
                        partField = null; // a content part ended
                    }
                    if (depth == 0) {
                        done = true;
                        fields.objectEnd = (int) parser.currentTokenLocation().getByteOffset();
                        closeInternalMember();
                    }
                }
                case FIELD_NAME -> {
                    if (depth == 1) {
                        closeInternalMember();
                        topField = parser.currentName();
                        if (RequestFields.isEngineInternal(topField)) {
                            internalMemberStart = parser.currentTokenLocation().getByteOffset();
                        }
                        pendingMember = RequestFields.Member.of(topField);
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
                    } else if (depth == 2 && "prompt".equals(topField)) {
                        promptElements++;
                        if (t == JsonToken.VALUE_STRING && promptElements == 1) {
                            appendCurrentText(); // a batch keys on its first prompt, as the tokenizer path does
                        }
                        if (t == JsonToken.VALUE_NUMBER_INT) {
                            fields.promptIsTokenIds = true;
                            promptHasInts = true;
                        }
                    } else if (depth == 3 && "prompt".equals(topField) && t == JsonToken.VALUE_NUMBER_INT) {
                        subListInts++;
                    } else if (t == JsonToken.VALUE_STRING && "messages".equals(topField)
                        && "content".equals(messageField) && (depth == 3 || (depth == 5 && "text".equals(partField)))) {
                        appendCurrentText();
                    }
                }
            }
        }
    }

    /** Where the parser places the current token (see {@link RequestFields#valueFrom}). */
    private int offset() {
        return (int) parser.currentTokenLocation().getByteOffset();
    }

    /** Just past the current token (the non-blocking parser has consumed it whole). */
    private int end() {
        return (int) parser.currentLocation().getByteOffset();
    }

    private void appendCurrentText() throws IOException {
        fields.appendText(parser.getTextCharacters(), parser.getTextOffset(), parser.getTextLength());
    }

    /** Records the range of the engine-internal member that ends where the current top-level token starts. */
    private void closeInternalMember() {
        if (internalMemberStart >= 0) {
            fields.addEngineFieldRange((int) internalMemberStart, (int) parser.currentTokenLocation().getByteOffset());
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
            }
            case "stream_options" -> {
                fields.hasStreamOptions = true;
                fields.streamOptionsObject = t == JsonToken.START_OBJECT;
            }
            case "kv_transfer_params" -> fields.hasKvTransferParams = true;
            case "tools" -> fields.hasTools = true;
            case "lora_path" -> fields.hasLoraPath = true;
            case "chat_template_kwargs" -> { // the last occurrence wins
                fields.templateKwargs.clear();
                kwargsObject = t == JsonToken.START_OBJECT;
            }
            case "model" -> {
                fields.model = null; // the last "model" wins: a container after a string leaves no model to route on
                fields.modelNotString = true;
            }
            case "n" -> {
                fields.n = 1;
                fields.nInvalid = true;
            }
            case "temperature" -> fields.temperatureZero = false;
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

    /** Where an integer completion budget's digits are, so the context clamp can lower it in place. */
    private void recordBudgetValue(JsonToken t) throws IOException {
        if (t == JsonToken.VALUE_NUMBER_INT) {
            int start = (int) parser.currentTokenLocation().getByteOffset();
            fields.addBudgetValueRange(start, start + parser.getTextLength());
        }
    }

    /** An integer token as an int, clamped to int range (a huge negative stays negative, a huge positive positive). */
    private int clampedInt() throws IOException {
        return parser.getNumberType() == JsonParser.NumberType.INT ? parser.getIntValue()
            : (parser.getBigIntegerValue().signum() < 0 ? Integer.MIN_VALUE : Integer.MAX_VALUE);
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
            case VALUE_NUMBER_INT -> fields.n = parser.getNumberType() == JsonParser.NumberType.INT
                ? parser.getIntValue() : (parser.getBigIntegerValue().signum() < 0 ? Integer.MIN_VALUE : Integer.MAX_VALUE);
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
            }
            case "messages" -> {
                fields.textPrefix.setLength(0);
                fields.textPrefixFromMessages = true;
                fields.hasMessages = t != JsonToken.VALUE_NULL;
                fields.messagesNotArray = fields.hasMessages;
            }
            case "stream_options" -> fields.hasStreamOptions = t != JsonToken.VALUE_NULL;
            case "tools" -> fields.hasTools = t != JsonToken.VALUE_NULL;
            case "lora_path" -> fields.hasLoraPath = t != JsonToken.VALUE_NULL;
            case "chat_template_kwargs" -> {
                fields.templateKwargs.clear();
                kwargsObject = false;
            }
            case "n" -> onN(t);
            case "logprobs" -> fields.logprobsTrue = t == JsonToken.VALUE_TRUE;
            case "top_logprobs" -> fields.hasTopLogprobs = t != JsonToken.VALUE_NULL;
            case "temperature" -> fields.temperatureZero = (t == JsonToken.VALUE_NUMBER_INT || t == JsonToken.VALUE_NUMBER_FLOAT)
                && parser.getDoubleValue() == 0.0;
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
