package io.kvgate.dataplane.request;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * The request fields one engine judges and the other ignores or lacks (review rows 9, 11, 13, 14, 16, 35): the
 * gateway's verdict, with OpenAI's {@code param} and {@code code}, for bodies split at every byte (the extractor sees
 * them chunk by chunk, and must reach the same verdict whatever the split).
 */
class RequestValidatorFieldsTest {
    /** The validator's verdict and the fields it read, the same for every split. */
    private static Problem verdict(String body, boolean chat) {
        return parsed(body, chat).problem;
    }

    private record Parsed(Problem problem, RequestFields fields) {}

    private static Parsed parsed(String body, boolean chat) {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        Parsed first = null;
        for (int split = 0; split <= b.length; split++) {
            RequestFields f = new RequestFields();
            RequestFieldExtractor x = new RequestFieldExtractor(f);
            x.feed(ByteBuffer.wrap(b, 0, split));
            x.feed(ByteBuffer.wrap(b, split, b.length - split));
            Problem p = RequestValidator.validate(x, f, chat);
            if (split == 0) {
                first = new Parsed(p, f);
            } else {
                assertEquals(first.problem, p, "split at " + split);
                assertEquals(first.fields.logitBiasEntries, f.logitBiasEntries, "split at " + split);
                assertEquals(first.fields.minPSet, f.minPSet, "split at " + split);
                assertEquals(Double.doubleToLongBits(first.fields.temperature), Double.doubleToLongBits(f.temperature));
            }
        }
        return first;
    }

    private static String chat(String extra) {
        return "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]" + extra + "}";
    }

    private static String completion(String extra) {
        return "{\"model\":\"m\",\"prompt\":\"hi\"" + extra + "}";
    }

    private static Problem onRule(String body, boolean speculative, int maxLogitBias) {
        return onRule(body, speculative, maxLogitBias, 0);
    }

    private static Problem onRule(String body, boolean speculative, int maxLogitBias, int vocabSize) {
        Parsed p = parsed(body, true);
        assertNull(p.problem, "the shape is fine");
        return RequestValidator.sampling(p.fields, "r", speculative, maxLogitBias, vocabSize);
    }

    // row 9
    @Test
    void aSuffixIsRefusedOnCompletionsUnlessNullOrEmpty() {
        Problem p = verdict(completion(",\"suffix\":\"XYZ\""), false);
        assertEquals("suffix", p.param());
        assertEquals("unsupported_parameter", p.openAiCode());
        assertEquals("suffix_unsupported", p.reason());
        assertEquals(p, verdict(completion(",\"suffix\":[1]"), false), "any value but null or \"\"");
        assertNull(verdict(completion(",\"suffix\":null"), false));
        assertNull(verdict(completion(",\"suffix\":\"\""), false));
        assertNull(verdict(completion(",\"suffix\":\"x\",\"suffix\":null"), false), "the last occurrence wins");
        assertNull(verdict(chat(",\"suffix\":\"x\""), true), "chat has no suffix: not this check's business");
    }

    // row 11
    @Test
    void theTwoStopSwitchesMayNotDisagree() {
        Problem p = verdict(chat(",\"include_stop_str_in_output\":true,\"no_stop_trim\":false"), true);
        assertEquals("no_stop_trim", p.param());
        assertEquals("invalid_value", p.openAiCode());
        assertEquals(p, verdict(completion(",\"no_stop_trim\":true,\"include_stop_str_in_output\":false"), false));
        assertNull(verdict(chat(",\"include_stop_str_in_output\":true,\"no_stop_trim\":true"), true));
        assertNull(verdict(chat(",\"include_stop_str_in_output\":true"), true));
        assertNull(verdict(chat(",\"no_stop_trim\":false"), true));
        assertNull(verdict(chat(",\"include_stop_str_in_output\":true,\"no_stop_trim\":false,\"no_stop_trim\":true"), true));
        assertNull(verdict(chat(",\"include_stop_str_in_output\":\"yes\",\"no_stop_trim\":false"), true),
            "a value that is no boolean is the engine's to refuse");
    }

    // row 13 (shape)
    @Test
    void logitBiasHasOpenAisShape() {
        assertNull(verdict(chat(",\"logit_bias\":{\"50256\":-100,\"7\":100,\"12\":0.5}"), true));
        assertNull(verdict(chat(",\"logit_bias\":null"), true));
        assertNull(verdict(chat(",\"logit_bias\":{}"), true));
        Problem notObject = verdict(chat(",\"logit_bias\":[1,2]"), true);
        assertEquals(new Problem("logit_bias", "invalid_logit_bias",
            "Invalid type for 'logit_bias': expected an object, but got an array instead.", "invalid_type"), notObject);
        assertEquals("Invalid type for 'logit_bias': expected an object, but got a string instead.",
            verdict(chat(",\"logit_bias\":\"x\""), true).message());
        Problem key = verdict(chat(",\"logit_bias\":{\"7\":1,\"hello\":1}"), true);
        assertEquals(new Problem("logit_bias", "invalid_logit_bias",
            "Invalid key in 'logit_bias': 'hello'. Keys must be token ids (integers >= 0).", "invalid_value"), key);
        assertEquals("invalid_value", verdict(chat(",\"logit_bias\":{\"-1\":1}"), true).openAiCode());
        Problem above = verdict(chat(",\"logit_bias\":{\"50256\":101}"), true);
        assertEquals(new Problem("logit_bias", "invalid_logit_bias", "Invalid 'logit_bias.50256': number above maximum"
            + " value. Expected a value <= 100, but got 101 instead.", "decimal_above_max_value"), above);
        Problem below = verdict(chat(",\"logit_bias\":{\"1\":2,\"3\":-100.5}"), true);
        assertEquals("decimal_below_min_value", below.openAiCode());
        assertEquals("Invalid 'logit_bias.3': number below minimum value. Expected a value >= -100, but got -100.5 instead.",
            below.message());
        Problem type = verdict(chat(",\"logit_bias\":{\"3\":\"1\"}"), true);
        assertEquals(new Problem("logit_bias", "invalid_logit_bias",
            "Invalid type for 'logit_bias.3': expected a number, but got a string instead.", "invalid_type"), type);
        assertEquals("invalid_type", verdict(chat(",\"logit_bias\":{\"3\":{\"a\":1}}"), true).openAiCode());
        // the last logit_bias wins, and what was wrong with an earlier one no longer counts
        assertNull(verdict(chat(",\"logit_bias\":{\"x\":1},\"logit_bias\":{\"1\":1}"), true));
        assertEquals(notObject, verdict(chat(",\"logit_bias\":{\"1\":1},\"logit_bias\":[1]"), true));
        assertEquals(2, parsed(chat(",\"logit_bias\":{\"1\":1,\"2\":{\"3\":4}}"), true).fields.logitBiasEntries,
            "members of a nested value are not entries");
        assertEquals("invalid_logit_bias", verdict(completion(",\"logit_bias\":{\"a\":1}"), false).reason(),
            "completions too");
    }

    // row 13 (the rule's knob)
    @Test
    void maxLogitBiasBoundsTheEntriesAndZeroRefusesTheField() {
        String three = chat(",\"logit_bias\":{\"1\":1,\"2\":1,\"3\":1}");
        assertNull(onRule(three, false, 300));
        assertNull(onRule(three, false, 3));
        Problem over = onRule(three, false, 2);
        assertEquals(new Problem("logit_bias", "logit_bias_over_max", "Invalid 'logit_bias': too many properties. Expected"
            + " an object with at most 2 properties (rule 'r', max_logit_bias), but got an object with 3 properties instead.",
            "invalid_value"), over);
        Problem refused = onRule(three, false, 0);
        assertEquals(new Problem("logit_bias", "logit_bias_refused",
            "Unsupported parameter: 'logit_bias' is not accepted by rule 'r' (max_logit_bias: 0).", "unsupported_parameter"),
            refused);
        assertNull(onRule(chat(",\"logit_bias\":{}"), false, 0), "an empty map biases nothing");
        assertNull(onRule(chat(",\"logit_bias\":null"), false, 0));
        assertNull(onRule(chat(""), false, 0));
    }

    // row 13: a token id the rule's tokenizer does not have
    @Test
    void aTokenIdBeyondTheVocabularyIsOpenAis400WhereTheRuleKnowsIt() {
        assertEquals(new Problem("logit_bias", "logit_bias_out_of_vocabulary",
            "Invalid key in 'logit_bias': 100265. Maximum value is 100257.", "invalid_value"),
            onRule(chat(",\"logit_bias\":{\"5\":1,\"100265\":-100,\"17\":1}"), false, 300, 100258));
        assertNull(onRule(chat(",\"logit_bias\":{\"100257\":-100,\"0\":1}"), false, 300, 100258));
        assertNull(onRule(chat(",\"logit_bias\":{\"100265\":-100}"), false, 300, 0), "no tokenizer: the engine judges");
        assertEquals("Invalid key in 'logit_bias': a token id over 18 digits. Maximum value is 9.",
            onRule(chat(",\"logit_bias\":{\"99999999999999999999999\":1}"), false, 300, 10).message());
        assertEquals("Invalid key in 'logit_bias': 12. Maximum value is 9.",
            onRule(chat(",\"logit_bias\":{\"12\":1},\"logit_bias\":{\"012\":1}"), false, 300, 10).message(),
            "the last logit_bias, its key read as the engines' int() reads it");
        assertNull(onRule(chat(",\"logit_bias\":{\"12\":1},\"logit_bias\":{\"3\":1}"), false, 300, 10));
    }

    // row 14
    @Test
    void aSpeculativeRuleRefusesLogitBiasAndMinP() {
        Problem bias = onRule(chat(",\"logit_bias\":{\"1\":5}"), true, 300);
        assertEquals("logit_bias", bias.param());
        assertEquals("unsupported_parameter", bias.openAiCode());
        assertEquals("logit_bias_speculative", bias.reason());
        Problem minP = onRule(chat(",\"min_p\":0.1"), true, 300);
        assertEquals(new Problem("min_p", "min_p_speculative", "Unsupported parameter: 'min_p' is not supported by rule 'r':"
            + " its engines run speculative decoding, which ignores it (speculative: true).", "unsupported_parameter"), minP);
        assertEquals(minP, onRule(chat(",\"min_p\":\"0.1\""), true, 300), "whatever the engine would make of it");
        assertNull(onRule(chat(",\"min_p\":0"), true, 300), "0 filters nothing");
        assertNull(onRule(chat(",\"min_p\":0.0,\"logit_bias\":{}"), true, 300));
        assertNull(onRule(chat(",\"min_p\":null,\"logit_bias\":null"), true, 300));
        assertNull(onRule(chat(",\"min_p\":0.1,\"logit_bias\":{\"1\":5}"), false, 300), "not speculative: both honoured");
        assertNull(onRule(chat(",\"min_p\":0.1,\"min_p\":0"), true, 300), "the last occurrence wins");
    }

    // row 16
    @Test
    void responseFormatHasTheObviousShape() {
        for (String type : new String[] {"text", "json_object", "structural_tag"}) {
            assertNull(verdict(chat(",\"response_format\":{\"type\":\"" + type + "\"}"), true), type);
        }
        assertNull(verdict(chat(",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\","
            + "\"schema\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"}}}}}"), true));
        assertNull(verdict(chat(",\"response_format\":null"), true));
        assertNull(verdict(completion(",\"response_format\":{\"type\":\"json_object\"}"), false));
        Problem missing = verdict(chat(",\"response_format\":{\"type\":\"json_schema\"}"), true);
        assertEquals(new Problem("response_format.json_schema", "invalid_response_format",
            "When response_format type is 'json_schema', the 'json_schema' field must be provided.",
            "missing_required_parameter"), missing);
        assertEquals(missing, verdict(chat(",\"response_format\":{\"json_schema\":null,\"type\":\"json_schema\"}"), true));
        assertEquals(missing, verdict(completion(",\"response_format\":{\"type\":\"json_schema\"}"), false));
        Problem unnamed = verdict(chat(",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":"
            + "{\"properties\":{\"name\":{\"type\":\"string\"}}}}}"), true);
        assertEquals(new Problem("response_format.json_schema.name", "invalid_response_format",
            "Missing required parameter: 'response_format.json_schema.name'.", "missing_required_parameter"), unnamed,
            "a name inside the schema is not the json_schema's name");
        assertEquals("invalid_type", verdict(chat(",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
            + "{\"name\":7}}"), true).openAiCode());
        assertEquals(unnamed, verdict(chat(",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
            + "{\"name\":\"a\",\"name\":null}}"), true));
        Problem notObject = verdict(chat(",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":\"x\"}"), true);
        assertEquals(new Problem("response_format.json_schema", "invalid_response_format",
            "Invalid type for 'response_format.json_schema': expected an object, but got a string instead.", "invalid_type"),
            notObject);
        Problem unknown = verdict(chat(",\"response_format\":{\"type\":\"yaml\"}"), true);
        assertEquals(new Problem("response_format.type", "invalid_response_format", "Invalid value: 'yaml'. Supported"
            + " values are: 'text', 'json_object', 'json_schema' and 'structural_tag'.", "invalid_value"), unknown);
        Problem noType = verdict(chat(",\"response_format\":{\"json_schema\":{\"name\":\"x\"}}"), true);
        assertEquals(new Problem("response_format.type", "invalid_response_format",
            "Missing required parameter: 'response_format.type'.", "missing_required_parameter"), noType);
        assertEquals("Invalid type for 'response_format.type': expected a string, but got an array instead.",
            verdict(chat(",\"response_format\":{\"type\":[\"text\"]}"), true).message());
        assertEquals(new Problem("response_format", "invalid_response_format",
            "Invalid type for 'response_format': expected an object, but got a string instead.", "invalid_type"),
            verdict(chat(",\"response_format\":\"json_object\""), true));
        // the last response_format (and the last member of it) wins
        assertNull(verdict(chat(",\"response_format\":{\"type\":\"json_schema\"},\"response_format\":{\"type\":\"text\"}"), true));
        assertNull(verdict(chat(",\"response_format\":{\"type\":\"yaml\",\"type\":\"text\"}"), true));
    }

    // row 35
    @Test
    void continueFinalMessageWithAGenerationPromptIsVllmsError() {
        Problem both = verdict(chat(",\"add_generation_prompt\":true,\"continue_final_message\":true"), true);
        assertEquals(new Problem("continue_final_message", "continue_with_generation_prompt",
            "Cannot set both `continue_final_message` and `add_generation_prompt` to True.", "invalid_value"), both);
        Problem byDefault = verdict(chat(",\"continue_final_message\":true"), true);
        assertEquals("continue_final_message", byDefault.param());
        assertEquals("Cannot set both `continue_final_message` and `add_generation_prompt` to True. (`add_generation_prompt`"
            + " defaults to True: set it to false to continue the final message.)", byDefault.message());
        assertNull(verdict(chat(",\"add_generation_prompt\":false,\"continue_final_message\":true"), true));
        assertNull(verdict(chat(",\"add_generation_prompt\":true,\"continue_final_message\":false"), true));
        assertNull(verdict(chat(",\"continue_final_message\":true,\"continue_final_message\":false"), true));
        // chat_template_kwargs override the body's fields in vLLM: an override is the renderer's (or engine's) to judge
        assertNull(verdict(chat(",\"continue_final_message\":true,\"chat_template_kwargs\":{\"add_generation_prompt\":false}"),
            true));
        assertEquals(both, verdict(chat(",\"add_generation_prompt\":true,\"continue_final_message\":true,"
            + "\"chat_template_kwargs\":{\"add_generation_prompt\":false}"), true), "vLLM's validator reads the body");
        assertNull(verdict(completion(",\"add_generation_prompt\":true,\"continue_final_message\":true"), false),
            "chat only: completions have no template");
    }

    // row 5: what the dialect edit reads
    @Test
    void theTemperatureIsReadAsANumber() {
        assertEquals(5e-6, parsed(chat(",\"temperature\":0.000005"), true).fields.temperature);
        assertEquals(2.0, parsed(chat(",\"temperature\":2"), true).fields.temperature);
        assertEquals(Double.NaN, parsed(chat(",\"temperature\":\"0.1\""), true).fields.temperature);
        assertEquals(Double.NaN, parsed(chat(",\"temperature\":0.5,\"temperature\":null"), true).fields.temperature);
        assertEquals(Double.NaN, parsed(chat(""), true).fields.temperature);
    }
}
