package io.kvgate.dataplane.request;

/**
 * The body stage's verdict on an OpenAI request body: a typed {@link Problem} (param, reason, message) or null.
 * Checks what the gateway itself relies on (one well-formed JSON object, {@code model}, {@code messages} or
 * {@code prompt}, {@code n}) and the field combinations vLLM and SGLang judge differently, so a client gets the same
 * OpenAI 400 whichever engine serves the rule ({@link #sameForEveryEngine}); the engine judges everything else.
 * Stateless.
 */
public final class RequestValidator {
    private RequestValidator() {}

    /**
     * @param extractor the parser the body was fed to (finished here)
     * @param chat      {@code /v1/chat/completions} shape (messages) rather than completions (prompt)
     */
    public static Problem validate(RequestFieldExtractor extractor, RequestFields f, boolean chat) {
        switch (extractor.finish()) {
            case EMPTY -> {
                return Problem.body("empty_body", "The request body is empty: send a JSON object.");
            }
            case NOT_OBJECT -> {
                return Problem.body("not_an_object", "The request body must be a JSON object.");
            }
            case MALFORMED -> {
                return Problem.body("malformed_json", "We could not parse the JSON body of your request: " + extractor.error());
            }
            default -> { }
        }
        if (f.modelNotString) {
            return Problem.field("model", "invalid_model", "'model' must be a string.");
        }
        if (f.model == null) {
            return Problem.field("model", "missing_model", "You must provide a model parameter.");
        }
        if (chat && !f.hasMessages) {
            return Problem.field("messages", "missing_messages", "'messages' is a required property.");
        }
        if (chat && f.messagesNotArray) {
            return Problem.field("messages", "invalid_messages", "'messages' must be an array of message objects.");
        }
        if (!chat && !f.hasPrompt) {
            return Problem.field("prompt", "missing_prompt", "'prompt' is a required property.");
        }
        if (f.nInvalid) {
            return Problem.field("n", "invalid_n", "'n' must be an integer.");
        }
        if (f.n < 1) {
            return Problem.field("n", "invalid_n", "'n' must be at least 1.");
        }
        return sameForEveryEngine(f, chat);
    }

    /**
     * OpenAI's 400s for requests vLLM and SGLang answer differently (issue #13 item 2; review rows 6, 22 and
     * {@code max_tokens} ≤ 0): vLLM refuses {@code stream_options} without {@code stream: true} and SGLang ignores
     * it; vLLM refuses {@code top_logprobs} without {@code logprobs: true} and SGLang accepts it; vLLM refuses
     * {@code max_tokens: 0} and SGLang's chat answers an empty 200. The gateway answers all of them as OpenAI does,
     * before any engine sees them.
     */
    static Problem sameForEveryEngine(RequestFields f, boolean chat) {
        if (f.hasStreamOptions && !f.stream) {
            return new Problem("stream_options", "stream_options_without_stream",
                "The 'stream_options' parameter is only allowed when 'stream' is enabled.", "invalid_value");
        }
        if (chat && f.hasTopLogprobs && !f.logprobsTrue) {
            return new Problem("top_logprobs", "top_logprobs_without_logprobs",
                "The 'top_logprobs' parameter is only allowed when 'logprobs' is enabled.", "invalid_value");
        }
        if (f.hasMaxTokens && f.maxTokens < 1) {
            return belowOne("max_tokens", f.maxTokens);
        }
        if (f.hasMaxCompletionTokens && f.maxCompletionTokens < 1) {
            return belowOne("max_completion_tokens", f.maxCompletionTokens);
        }
        return requestFields(f, chat);
    }

    /**
     * Review rows 9, 11, 13 (shape), 16 and 35: fields one engine judges and the other ignores or lacks. Each gets
     * one answer for both, before any engine sees it.
     */
    static Problem requestFields(RequestFields f, boolean chat) {
        if (!chat && f.hasSuffix) {
            // vLLM accepts suffix and ignores it; SGLang has no such field: either way no text is inserted.
            return new Problem("suffix", "suffix_unsupported", "Unsupported parameter: 'suffix' is not supported with this"
                + " model (its engines cannot insert a completion before a suffix).", "unsupported_parameter");
        }
        if ((f.includeStopStr == RequestFields.TRUE && f.noStopTrim == RequestFields.FALSE)
            || (f.includeStopStr == RequestFields.FALSE && f.noStopTrim == RequestFields.TRUE)) {
            return new Problem("no_stop_trim", "stop_switches_disagree", "'include_stop_str_in_output' (vLLM) and"
                + " 'no_stop_trim' (SGLang) are two spellings of one switch (keep the stop string in the output), and this"
                + " request sets them to different values: send one of them.", "invalid_value");
        }
        Problem p = logitBiasShape(f);
        if (p != null) {
            return p;
        }
        p = responseFormat(f);
        if (p != null) {
            return p;
        }
        if (chat && f.continueFinalMessageTrue && (f.addGenerationPrompt == RequestFields.TRUE
            || (f.addGenerationPrompt == RequestFields.ABSENT && !f.templateKwargs.contains("add_generation_prompt")
                && !f.templateKwargs.contains("continue_final_message")))) {
            // vLLM's request validator refuses both true in the body; with add_generation_prompt absent (its default,
            // true) the template call refuses it too, in other words, unless chat_template_kwargs sets either (vLLM
            // merges them over its own arguments: the renderer or the engine judges that). SGLang takes either
            // without a word.
            return new Problem("continue_final_message", "continue_with_generation_prompt",
                "Cannot set both `continue_final_message` and `add_generation_prompt` to True."
                    + (f.addGenerationPrompt == RequestFields.ABSENT
                    ? " (`add_generation_prompt` defaults to True: set it to false to continue the final message.)" : ""),
                "invalid_value");
        }
        return null;
    }

    /** The most characters of a client's key a message quotes. */
    private static final int MAX_QUOTED = 64;

    private static String quoted(String s) {
        return s.length() <= MAX_QUOTED ? s : s.substring(0, MAX_QUOTED) + "...";
    }

    /** OpenAI's shape of {@code logit_bias}: an object of token ids to numbers in [-100, 100]. */
    static Problem logitBiasShape(RequestFields f) {
        if (!f.hasLogitBias || f.logitBiasFault == null) {
            return null;
        }
        String key = f.logitBiasFaultKey == null ? null : quoted(f.logitBiasFaultKey);
        return switch (f.logitBiasFault) {
            case NOT_AN_OBJECT -> new Problem("logit_bias", "invalid_logit_bias", "Invalid type for 'logit_bias': expected an"
                + " object, but got " + f.logitBiasFaultValue + " instead.", "invalid_type");
            case KEY_NOT_A_TOKEN_ID -> new Problem("logit_bias", "invalid_logit_bias", "Invalid key in 'logit_bias': '" + key
                + "'. Keys must be token ids (integers >= 0).", "invalid_value");
            case VALUE_NOT_A_NUMBER -> new Problem("logit_bias", "invalid_logit_bias", "Invalid type for 'logit_bias." + key
                + "': expected a number, but got " + f.logitBiasFaultValue + " instead.", "invalid_type");
            case OUT_OF_RANGE -> f.logitBiasFaultAbove
                ? new Problem("logit_bias", "invalid_logit_bias", "Invalid 'logit_bias." + key + "': number above maximum"
                    + " value. Expected a value <= 100, but got " + quoted(f.logitBiasFaultValue) + " instead.",
                    "decimal_above_max_value")
                : new Problem("logit_bias", "invalid_logit_bias", "Invalid 'logit_bias." + key + "': number below minimum"
                    + " value. Expected a value >= -100, but got " + quoted(f.logitBiasFaultValue) + " instead.",
                    "decimal_below_min_value");
        };
    }

    /**
     * The obvious shape errors of {@code response_format} (review row 16): vLLM refuses them at validation, SGLang
     * leaves them to its grammar backend. A schema's own content is not judged (backends differ on keywords).
     */
    static Problem responseFormat(RequestFields f) {
        if (f.responseFormat == RequestFields.ABSENT) {
            return null;
        }
        if (f.responseFormat == RequestFields.RF_NOT_OBJECT) {
            return new Problem("response_format", "invalid_response_format", "Invalid type for 'response_format': expected"
                + " an object, but got " + f.responseFormatFault + " instead.", "invalid_type");
        }
        if (f.responseFormatType == null) {
            return new Problem("response_format.type", "invalid_response_format",
                "Missing required parameter: 'response_format.type'.", "missing_required_parameter");
        }
        switch (f.responseFormatType) {
            case NOT_A_STRING -> {
                return new Problem("response_format.type", "invalid_response_format", "Invalid type for"
                    + " 'response_format.type': expected a string, but got " + f.responseFormatFault + " instead.", "invalid_type");
            }
            case UNKNOWN -> {
                return new Problem("response_format.type", "invalid_response_format", "Invalid value: '"
                    + quoted(f.responseFormatFault) + "'. Supported values are: 'text', 'json_object', 'json_schema' and"
                    + " 'structural_tag'.", "invalid_value");
            }
            case JSON_SCHEMA -> {
                return switch (f.jsonSchema) {
                    case RequestFields.ABSENT -> new Problem("response_format.json_schema", "invalid_response_format",
                        "When response_format type is 'json_schema', the 'json_schema' field must be provided.",
                        "missing_required_parameter");
                    case RequestFields.JS_NOT_OBJECT -> new Problem("response_format.json_schema", "invalid_response_format",
                        "Invalid type for 'response_format.json_schema': expected an object, but got " + f.jsonSchemaFault
                            + " instead.", "invalid_type");
                    case RequestFields.JS_UNNAMED -> new Problem("response_format.json_schema.name", "invalid_response_format",
                        "Missing required parameter: 'response_format.json_schema.name'.", "missing_required_parameter");
                    case RequestFields.JS_NAME_NOT_STRING -> new Problem("response_format.json_schema.name",
                        "invalid_response_format", "Invalid type for 'response_format.json_schema.name': expected a string.",
                        "invalid_type");
                    default -> null;
                };
            }
            default -> {
                return null;
            }
        }
    }

    /**
     * What the rule's engines can do with the sampling fields (review rows 13, 14): {@code speculative: true} (the
     * engines run speculative decoding, under which vLLM ignores {@code logit_bias} and {@code min_p} with a
     * start-up warning as the only notice) refuses both rather than let them be a silent no-op; {@code max_logit_bias}
     * bounds the entries of {@code logit_bias} (0: the field is refused; SGLang builds a dense batch x vocabulary
     * matrix for the whole batch as soon as one request carries it, however few tokens it biases). An empty
     * {@code logit_bias} biases nothing and passes. On a rule with a tokenizer, a token id beyond its vocabulary is
     * refused with OpenAI's words (vLLM refuses it too; SGLang would index its bias matrix out of bounds).
     * Checked after the shape checks.
     *
     * @param vocabSize the rule's tokenizer's vocabulary size, 0 when the rule has none
     */
    public static Problem sampling(RequestFields f, String ruleName, boolean speculative, int maxLogitBias, int vocabSize) {
        if (speculative && f.hasLogitBias && f.logitBiasEntries > 0) {
            return new Problem("logit_bias", "logit_bias_speculative", "Unsupported parameter: 'logit_bias' is not"
                + " supported by rule '" + ruleName + "': its engines run speculative decoding, which ignores it"
                + " (speculative: true).", "unsupported_parameter");
        }
        if (speculative && f.minPSet) {
            return new Problem("min_p", "min_p_speculative", "Unsupported parameter: 'min_p' is not supported by rule '"
                + ruleName + "': its engines run speculative decoding, which ignores it (speculative: true).",
                "unsupported_parameter");
        }
        if (f.hasLogitBias && f.logitBiasEntries > maxLogitBias) {
            return maxLogitBias == 0
                ? new Problem("logit_bias", "logit_bias_refused", "Unsupported parameter: 'logit_bias' is not accepted by"
                    + " rule '" + ruleName + "' (max_logit_bias: 0).", "unsupported_parameter")
                : new Problem("logit_bias", "logit_bias_over_max", "Invalid 'logit_bias': too many properties. Expected an"
                    + " object with at most " + maxLogitBias + " properties (rule '" + ruleName + "', max_logit_bias), but"
                    + " got an object with " + f.logitBiasEntries + " properties instead.", "invalid_value");
        }
        if (vocabSize > 0 && f.hasLogitBias && f.logitBiasMaxKey >= vocabSize) {
            return new Problem("logit_bias", "logit_bias_out_of_vocabulary", "Invalid key in 'logit_bias': "
                + (f.logitBiasMaxKey == Long.MAX_VALUE ? "a token id over 18 digits" : String.valueOf(f.logitBiasMaxKey))
                + ". Maximum value is " + (vocabSize - 1) + ".", "invalid_value");
        }
        return null;
    }

    private static Problem belowOne(String param, int value) {
        return new Problem(param, "max_tokens_below_one", "Invalid '" + param + "': integer below minimum value. "
            + "Expected a value >= 1, but got " + value + " instead.", "integer_below_min_value");
    }

    /**
     * The rule's bounds on what one request may ask the engines for: at most {@code max_n} choices and at most
     * {@code max_n} batched prompts (each costs engine work, and on SGLang P/D a bootstrap room the gateway builds).
     */
    public static Problem withinRule(RequestFields f, boolean chat, String ruleName, int maxN, int maxPromptTokens) {
        if (f.n > maxN) {
            return Problem.field("n", "n_over_max", "'n' is " + f.n + "; rule '" + ruleName + "' allows at most " + maxN
                + " choices per request (max_n).");
        }
        if (!chat && f.promptCount > maxN) {
            return Problem.field("prompt", "batch_over_max", "The request batches " + f.promptCount + " prompts; rule '"
                + ruleName + "' allows at most " + maxN + " per request (max_n).");
        }
        if (!chat && f.promptTokenIdsMax > maxPromptTokens) {
            // Token ids were counted while the body streamed in: refused before any parse, render or hash.
            return contextLengthExceeded("prompt", f.promptTokenIdsMax + " tokens", ruleName, maxPromptTokens);
        }
        return null;
    }

    /**
     * {@code greedy_n: reject}: {@code n > 1} at {@code temperature: 0} gets vLLM's 400 (its wording, OpenAI's
     * shape) from every engine, SGLang included, before any engine sees it. Under {@code replicate} (the default) it
     * is accepted everywhere ({@link AnswerRewrite}). Checked after {@code max_n}, which bounds {@code n} first.
     */
    public static Problem greedyN(RequestFields f, io.kvgate.control.config.RuleConfig.GreedyN mode) {
        if (mode == io.kvgate.control.config.RuleConfig.GreedyN.REJECT && AnswerRewrite.greedyN(f)) {
            return new Problem("n", "greedy_n", "n must be 1 when using greedy sampling.", "invalid_value");
        }
        return null;
    }

    /** 400 {@code context_length_exceeded}, as OpenAI answers a prompt over the model's context, naming the limit. */
    public static Problem contextLengthExceeded(String param, String what, String ruleName, int maxPromptTokens) {
        return new Problem(param, "context_length_exceeded", "The prompt has " + what + "; rule '" + ruleName
            + "' accepts at most " + maxPromptTokens + " prompt tokens (max_prompt_tokens). Please reduce the length of the "
            + ("messages".equals(param) ? "messages." : "prompt."), "context_length_exceeded");
    }
}
