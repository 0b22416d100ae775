package io.kvgate.dataplane.request;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * The body checks vLLM and SGLang answer differently (issue #13 item 2): the gateway's verdict, with OpenAI's
 * {@code param} and {@code code}, for bodies split at every byte (the extractor sees them chunk by chunk).
 */
class RequestValidatorContractTest {
    private static Problem verdict(String body, boolean chat) {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        Problem first = null;
        for (int split = 0; split <= b.length; split++) {
            RequestFields f = new RequestFields();
            RequestFieldExtractor x = new RequestFieldExtractor(f);
            x.feed(ByteBuffer.wrap(b, 0, split));
            x.feed(ByteBuffer.wrap(b, split, b.length - split));
            Problem p = RequestValidator.validate(x, f, chat);
            if (split == 0) {
                first = p;
            } else {
                assertEquals(first, p, "split at " + split);
            }
        }
        return first;
    }

    private static String chat(String extra) {
        return "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]" + extra + "}";
    }

    @Test
    void streamOptionsWithoutStreamIsOpenAis400() {
        Problem p = verdict(chat(",\"stream_options\":{\"include_usage\":true}"), true);
        assertEquals("stream_options", p.param());
        assertEquals("invalid_value", p.openAiCode());
        assertEquals("The 'stream_options' parameter is only allowed when 'stream' is enabled.", p.message());
        assertEquals(p, verdict(chat(",\"stream\":false,\"stream_options\":{}"), true));
        assertEquals("stream_options", verdict("{\"model\":\"m\",\"prompt\":\"x\",\"stream_options\":{}}", false).param());
        // the last "stream" wins, as in the engines' JSON parser
        assertEquals(p, verdict(chat(",\"stream\":true,\"stream_options\":{},\"stream\":false"), true));
        assertNull(verdict(chat(",\"stream\":true,\"stream_options\":{\"include_usage\":true}"), true));
        assertNull(verdict(chat(",\"stream_options\":null"), true), "null is the same as absent");
    }

    @Test
    void topLogprobsWithoutLogprobsTrueIsOpenAis400OnChat() {
        Problem p = verdict(chat(",\"top_logprobs\":3"), true);
        assertEquals("top_logprobs", p.param());
        assertEquals("invalid_value", p.openAiCode());
        assertEquals(p, verdict(chat(",\"logprobs\":false,\"top_logprobs\":0"), true));
        assertEquals(p, verdict(chat(",\"logprobs\":true,\"top_logprobs\":2,\"logprobs\":false"), true));
        assertNull(verdict(chat(",\"logprobs\":true,\"top_logprobs\":3"), true));
        assertNull(verdict(chat(",\"top_logprobs\":null"), true));
        // completions has no top_logprobs: its logprobs is an integer, the engine judges the body
        assertNull(verdict("{\"model\":\"m\",\"prompt\":\"x\",\"logprobs\":2}", false));
    }

    @Test
    void maxTokensBelowOneIsOpenAis400NamingTheField() {
        Problem zero = verdict(chat(",\"max_tokens\":0"), true);
        assertEquals("max_tokens", zero.param());
        assertEquals("integer_below_min_value", zero.openAiCode());
        assertEquals("Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but got 0 instead.",
            zero.message());
        assertEquals("max_tokens", verdict("{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":-5}", false).param());
        Problem mct = verdict(chat(",\"max_completion_tokens\":-1"), true);
        assertEquals("max_completion_tokens", mct.param());
        assertEquals("Invalid 'max_completion_tokens': integer below minimum value. Expected a value >= 1, but got -1 "
            + "instead.", mct.message());
        assertEquals("Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but got -2147483648 "
            + "instead.", verdict(chat(",\"max_tokens\":-99999999999999999999"), true).message(), "clamped, still refused");
        assertNull(verdict(chat(",\"max_tokens\":1,\"max_completion_tokens\":99999999999999999999"), true));
        assertNull(verdict(chat(",\"max_tokens\":null"), true));
        assertNull(verdict(chat(",\"max_tokens\":0,\"max_tokens\":4"), true), "the last occurrence wins");
    }

    @Test
    void theBodyChecksComeFirst() {
        assertEquals("missing_model", verdict("{\"messages\":[],\"stream_options\":{}}", true).reason());
        assertEquals("invalid_n", verdict(chat(",\"n\":0,\"max_tokens\":0"), true).reason());
    }
}
