package io.kvgate.dataplane.request;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.Parameter;
import org.junit.jupiter.params.ParameterizedClass;
import org.junit.jupiter.params.provider.ValueSource;

/** Runs once on each of the lexer's string skips ({@link StringSkips}: the Vector API's and SWAR's). */
@ParameterizedClass(name = "{0} string skip")
@ValueSource(strings = {"vector", "swar"})
class RequestFieldExtractorTest {
    @Parameter
    String path;

    @BeforeEach
    void stringSkip() {
        StringSkips.use(path);
    }

    @AfterEach
    void defaultStringSkip() {
        StringSkips.reset();
    }

    private static RequestFields extract(byte[] body, int... splits) {
        RequestFields f = new RequestFields();
        RequestFieldExtractor x = new RequestFieldExtractor(f);
        int from = 0;
        for (int s : splits) {
            x.feed(ByteBuffer.wrap(body, from, s - from));
            from = s;
        }
        x.feed(ByteBuffer.wrap(body, from, body.length - from));
        assertEquals(RequestFieldExtractor.Result.OK, x.finish(), x.error());
        return f;
    }

    private static final String CHAT = "{\"messages\":[{\"role\":\"user\",\"content\":\"say \\\"model\\\": \\\"x\\\" ✓ 😀\","
        + "\"model\":\"inner\"}],\"model\":\"qwen3\",\"stream\":true,\"user\":\"u-1\",\"n\":2,"
        + "\"stream_options\":{\"include_usage\":true},\"extra\":{\"model\":\"nested\",\"stream\":false}}";

    @Test
    void topLevelFieldsOnlyAtEverySplitPosition() {
        byte[] b = CHAT.getBytes(StandardCharsets.UTF_8);
        for (int i = 0; i <= b.length; i++) {
            RequestFields f = extract(b, i);
            assertEquals("qwen3", f.model, "split at " + i);
            assertTrue(f.stream);
            assertEquals("u-1", f.user);
            assertTrue(f.hasMessages);
            assertFalse(f.messagesNotArray);
            assertTrue(f.hasStreamOptions);
            assertEquals(2, f.n);
            assertFalse(f.hasPrompt);
        }
    }

    @Test
    void everyPairOfSplitsOnAShortBody() {
        byte[] b = "{\"model\":\"m\",\"prompt\":[1,2,3],\"stream\":false}".getBytes(StandardCharsets.UTF_8);
        for (int i = 0; i <= b.length; i++) {
            for (int j = i; j <= b.length; j++) {
                RequestFields f = extract(b, i, j);
                assertEquals("m", f.model);
                assertTrue(f.hasPrompt);
                assertTrue(f.promptIsTokenIds);
                assertFalse(f.stream);
            }
        }
    }

    @Test
    void refusesMalformedAndNonObjects() {
        for (String bad : new String[] {"{\"model\":", "{\"model\":\"m\"", "{\"model\" \"m\"}", "{\"a\":1}}", "{\"a\":1} x", "nul"}) {
            RequestFields f = new RequestFields();
            RequestFieldExtractor x = new RequestFieldExtractor(f);
            x.feed(ByteBuffer.wrap(bad.getBytes(StandardCharsets.UTF_8)));
            assertEquals(RequestFieldExtractor.Result.MALFORMED, x.finish(), bad);
        }
        for (String notObj : new String[] {"[1]", "\"s\"", "3"}) {
            RequestFieldExtractor x = new RequestFieldExtractor(new RequestFields());
            x.feed(ByteBuffer.wrap(notObj.getBytes(StandardCharsets.UTF_8)));
            assertEquals(RequestFieldExtractor.Result.NOT_OBJECT, x.finish(), notObj);
        }
        RequestFieldExtractor empty = new RequestFieldExtractor(new RequestFields());
        assertEquals(RequestFieldExtractor.Result.EMPTY, empty.finish());
    }

    @Test
    void textPromptIsNotTokenIdsAndNonStringModelIsFlagged() {
        RequestFields f = extract("{\"model\":7,\"prompt\":\"hello\"}".getBytes(StandardCharsets.UTF_8));
        assertNull(f.model);
        assertTrue(f.modelNotString);
        assertFalse(f.promptIsTokenIds);
        RequestFields g = extract("{\"model\":\"m\",\"prompt\":[[1,2],[3]]}".getBytes(StandardCharsets.UTF_8));
        assertTrue(g.promptIsTokenIds);
    }

    // ---- the request text chwbl keys on without a tokenizer ----------------------------------------------------

    private static final char END = RequestFields.MESSAGE_END;

    @Test
    void chatTextPrefixIsEveryMessagesContentInOrderAtEverySplitPosition() {
        String body = "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"You are \\\"terse\\\" ✓ 😀\"},"
            + "{\"content\":[{\"type\":\"text\",\"text\":\"part one\"},{\"type\":\"image_url\",\"image_url\":{\"url\":\"u\"}},"
            + "{\"text\":\" two\",\"type\":\"text\"}],\"role\":\"user\"},{\"role\":\"assistant\",\"content\":null,"
            + "\"tool_calls\":[{\"id\":\"c\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}],\"user\":\"content\"}";
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        String expected = "You are \"terse\" ✓ 😀" + END + "part one two" + END + END;
        for (int i = 0; i <= b.length; i++) {
            RequestFields f = extract(b, i);
            assertEquals(expected, f.textPrefix.toString(), "split at " + i);
            assertTrue(f.textPrefixFromMessages);
        }
    }

    @Test
    void completionTextPrefixIsThePromptOrTheFirstOfABatch() {
        RequestFields one = extract("{\"prompt\":\"Once upon\",\"model\":\"m\"}".getBytes(StandardCharsets.UTF_8));
        assertEquals("Once upon", one.textPrefix.toString());
        assertFalse(one.textPrefixFromMessages);
        byte[] batch = "{\"model\":\"m\",\"prompt\":[\"first\",\"second\"]}".getBytes(StandardCharsets.UTF_8);
        for (int i = 0; i <= batch.length; i++) {
            assertEquals("first", extract(batch, i).textPrefix.toString(), "split at " + i);
        }
        assertEquals("", extract("{\"prompt\":[1,2,3]}".getBytes(StandardCharsets.UTF_8)).textPrefix.toString(),
            "token ids are no text");
        assertEquals("b", extract("{\"prompt\":\"a\",\"prompt\":\"b\"}".getBytes(StandardCharsets.UTF_8)).textPrefix.toString(),
            "the last prompt wins, as in the engine");
    }

    @Test
    void messageBoundariesAreKeptAndTheTextIsBounded() {
        RequestFields ab = extract("{\"messages\":[{\"content\":\"ab\"},{\"content\":\"c\"}]}".getBytes(StandardCharsets.UTF_8));
        RequestFields a = extract("{\"messages\":[{\"content\":\"a\"},{\"content\":\"bc\"}]}".getBytes(StandardCharsets.UTF_8));
        assertFalse(ab.textPrefix.toString().equals(a.textPrefix.toString()));
        String big = "x".repeat(RequestFields.MAX_TEXT_PREFIX_CHARS + 100);
        RequestFields f = extract(("{\"messages\":[{\"content\":\"" + big + "\"}]}").getBytes(StandardCharsets.UTF_8), 7000);
        assertEquals(RequestFields.MAX_TEXT_PREFIX_CHARS, f.textPrefix.length());
    }

    /** The extractor over {@code body} in a direct buffer at reader index {@code shift}, as the front door hands it. */
    private static RequestFields extractInPlace(byte[] body, int shift, int prefixChars) {
        RequestFields f = new RequestFields();
        io.netty.buffer.ByteBuf buf = io.netty.buffer.Unpooled.directBuffer(shift + body.length);
        try {
            buf.writeZero(shift).writeBytes(body).readerIndex(shift);
            RequestFieldExtractor x = new RequestFieldExtractor(f).textPrefixChars(prefixChars);
            x.body(buf);
            assertEquals(RequestFieldExtractor.Result.OK, x.finish(), x.error());
        } finally {
            buf.release();
        }
        return f;
    }

    /**
     * The bound the front door passes (its table's largest chwbl.prefix_chars): 0 keeps no text at all (no message
     * ends either) and every other field is read as before; n keeps exactly the first n chars, at every split.
     */
    @Test
    void theTextPrefixKeepsOnlyTheCharsItIsToldToAtEverySplitPosition() {
        String body = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello there, \\\"friend\\\" ✓\"},"
            + "{\"role\":\"user\",\"content\":\"again\"}],\"n\":3}";
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        String whole = "Hello there, \"friend\" ✓" + END + "again" + END;
        for (int bound : new int[] {0, 1, 5, 13, 24, 25, 26, 31, 32, 1000}) {
            String expected = whole.substring(0, Math.min(bound, whole.length()));
            for (int i = 0; i <= b.length; i++) {
                RequestFields f = new RequestFields();
                RequestFieldExtractor x = new RequestFieldExtractor(f).textPrefixChars(bound);
                x.feed(ByteBuffer.wrap(b, 0, i));
                x.feed(ByteBuffer.wrap(b, i, b.length - i));
                assertEquals(RequestFieldExtractor.Result.OK, x.finish(), x.error());
                assertEquals(expected, f.textPrefix.toString(), "bound " + bound + ", split at " + i);
                assertEquals("m", f.model);
                assertEquals(3, f.n);
                assertTrue(f.textPrefixFromMessages);
            }
            assertEquals(expected, extractInPlace(b, 3, bound).textPrefix.toString(), "in place, bound " + bound);
        }
        RequestFields f = new RequestFields();
        new RequestFieldExtractor(f).textPrefixChars(-5);
        assertEquals(0, f.textPrefixLimit, "clamped to 0");
        new RequestFieldExtractor(f).textPrefixChars(Integer.MAX_VALUE);
        assertEquals(RequestFields.MAX_TEXT_PREFIX_CHARS, f.textPrefixLimit, "clamped to the most");
        new RequestFieldExtractor(f);
        assertEquals(RequestFields.MAX_TEXT_PREFIX_CHARS, f.textPrefixLimit, "the most by default, a new request");
    }

    /**
     * Long ASCII content is copied out of the direct buffer in bulk: every length around the scratch sizes and the
     * bound, at every alignment, one lexer for all (its scratch grows and is reused), the same text as decoded by
     * hand.
     */
    @Test
    void longAsciiContentInADirectBufferAtEveryAlignment() {
        StringBuilder alphabet = new StringBuilder();
        for (int c = 0x20; c < 0x7F; c++) {
            if (c != '"' && c != '\\') {
                alphabet.append((char) c);
            }
        }
        int max = RequestFields.MAX_TEXT_PREFIX_CHARS;
        for (int len : new int[] {0, 1, 7, 8, 15, 16, 17, 255, 256, 257, 511, 1023, 1024, 1025, 4099, max - 1, max, max + 1,
            3 * max + 5, 300, 17}) {
            StringBuilder content = new StringBuilder(len);
            while (content.length() < len) {
                content.append(alphabet, 0, Math.min(alphabet.length(), len - content.length()));
            }
            byte[] b = ("{\"model\":\"m\",\"messages\":[{\"content\":\"" + content + "\"}]}").getBytes(StandardCharsets.US_ASCII);
            for (int bound : new int[] {1024, max}) {
                String expected = (content.toString() + END).substring(0, Math.min(bound, len + 1));
                for (int shift = 0; shift < 16; shift += 5) {
                    assertEquals(expected, extractInPlace(b, shift, bound).textPrefix.toString(),
                        "length " + len + ", bound " + bound + ", shift " + shift);
                }
            }
        }
    }

    /** chat_template_kwargs member names, tools and lora_path: what the warning and SGLang's LoRA form need. */
    @Test
    void templateKwargsToolsAndLoraPathAtEverySplitPosition() {
        byte[] b = ("{\"model\":\"m\",\"chat_template_kwargs\":{\"enable_thinking\":false,\"x\":{\"y\":1},\"z\":[1]},"
            + "\"tools\":[{\"type\":\"function\"}],\"lora_path\":\"a\",\"messages\":[]}").getBytes(StandardCharsets.UTF_8);
        for (int i = 1; i < b.length; i++) {
            RequestFields f = extract(b, i);
            assertEquals(java.util.List.of("enable_thinking", "x", "z"), f.templateKwargs, "split at " + i);
            assertTrue(f.hasTools && f.hasLoraPath, "split at " + i);
        }
        RequestFields last = extract("{\"chat_template_kwargs\":{\"a\":1},\"chat_template_kwargs\":{\"b\":2},\"tools\":null,\"lora_path\":null}"
            .getBytes(StandardCharsets.UTF_8));
        assertEquals(java.util.List.of("b"), last.templateKwargs, "the last occurrence wins, as in Python's json");
        assertFalse(last.hasTools, "tools: null is None: no tool template");
        assertFalse(last.hasLoraPath);
        assertEquals(java.util.List.of(), extract("{\"chat_template_kwargs\":{\"a\":1},\"chat_template_kwargs\":null}"
            .getBytes(StandardCharsets.UTF_8)).templateKwargs);
        assertEquals(java.util.List.of(), extract("{\"chat_template_kwargs\":[\"a\"]}".getBytes(StandardCharsets.UTF_8)).templateKwargs,
            "not an object: no names (the engine refuses it)");
        assertTrue(extract("{\"tools\":[]}".getBytes(StandardCharsets.UTF_8)).hasTools, "an empty list is not None");
    }
}
