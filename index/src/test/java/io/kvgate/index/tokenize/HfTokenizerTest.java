package io.kvgate.index.tokenize;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.text.Normalizer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.zip.GZIPInputStream;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class HfTokenizerTest {
    @Test
    void configsResolveBosEosTemplateAndAddBos() {
        TokenizerConfig q = TokenizerTestSupport.ours("qwen3").config();
        assertNull(q.bosToken());
        assertEquals("<|im_end|>", q.eosToken());
        assertFalse(q.addBosToken());
        assertTrue(q.chatTemplate().contains("<|im_start|>"));
        TokenizerConfig l = TokenizerTestSupport.ours("llama3_1").config();
        assertEquals("<|begin_of_text|>", l.bosToken());
        assertEquals("<|eot_id|>", l.eosToken());
        assertTrue(l.addBosToken(), "Llama's TemplateProcessing adds <|begin_of_text|>");
        assertTrue(l.chatTemplate().contains("<|start_header_id|>"));
        assertEquals(Boolean.TRUE, l.raw().get("clean_up_tokenization_spaces"));
    }

    @Test
    void vocabSizesIncludeAddedTokens() {
        assertEquals(151669, TokenizerTestSupport.ours("qwen3").vocabSize());
        assertEquals(128256, TokenizerTestSupport.ours("llama3_1").vocabSize());
    }

    @Test
    void llamaAddsBeginOfTextOnlyWithSpecialTokens() {
        HfTokenizer l = TokenizerTestSupport.ours("llama3_1");
        int[] with = l.encode("Hello world", true);
        int[] without = l.encode("Hello world", false);
        assertEquals(128000, with[0]);
        assertArrayEquals(without, Arrays.copyOfRange(with, 1, with.length));
        assertArrayEquals(new int[] {128000}, l.encode("", true));
        assertArrayEquals(new int[0], l.encode("", false));
    }

    private static Path writeModel(Path dir, String tokenizerJson, String config) throws IOException {
        Files.writeString(dir.resolve("tokenizer.json"), tokenizerJson);
        Files.writeString(dir.resolve("tokenizer_config.json"), config);
        return dir;
    }

    private static String qwenJson() throws IOException {
        try (InputStream in = new GZIPInputStream(Files.newInputStream(
                TokenizerTestSupport.modelDir("qwen3").resolve("tokenizer.json.gz")))) {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
    }

    @Test
    void configAcceptsObjectTokensAndNamedTemplateLists(@TempDir Path dir) throws IOException {
        String cfg = "{\"bos_token\": {\"content\": \"<|endoftext|>\", \"lstrip\": false}, \"eos_token\": \"<|im_end|>\","
                + " \"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"}, {\"name\": \"default\", \"template\": \"D\"}]}";
        HfTokenizer t = HfTokenizer.load(writeModel(dir, qwenJson(), cfg), HfTokenizer.Caches.NONE);
        assertEquals("<|endoftext|>", t.config().bosToken());
        assertEquals("D", t.config().chatTemplate());
        assertFalse(t.config().addBosToken(), "Qwen's post-processor adds no BOS whatever the config says");
    }

    @Test
    void badConfigsNameTheFieldAndValue(@TempDir Path dir) throws IOException {
        IOException e = assertThrows(IOException.class, () -> HfTokenizer.load(writeModel(dir, qwenJson(),
                "{\"eos_token\": 7}")));
        assertTrue(e.getMessage().contains("eos_token=Integer 7"), e.getMessage());
        IOException e2 = assertThrows(IOException.class, () -> HfTokenizer.load(writeModel(dir,
                qwenJson().replace("\"type\": \"NFC\"", "\"type\": \"Lowercase\""), "{}")));
        assertTrue(e2.getMessage().contains("normalizer.type=Lowercase"), e2.getMessage());
        assertThrows(IOException.class, () -> HfTokenizer.load(dir.resolve("missing")));
        IllegalArgumentException e3 = assertThrows(IllegalArgumentException.class,
                () -> new HfTokenizer.Caches(1000, 32, 0, 0, 0));
        assertTrue(e3.getMessage().contains("chunkSlots=1000"), e3.getMessage());
    }

    /** lstrip / rstrip / single_word flags (unused by the two shipped models) are compared with Rust too. */
    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void addedTokenStripAndSingleWordFlagsMatchRust(@TempDir Path dir) throws IOException {
        String json = qwenJson();
        json = setFlag(json, "<|im_end|>", "lstrip");
        json = setFlag(json, "<|im_start|>", "rstrip");
        json = setFlag(json, "<think>", "single_word");
        json = setFlag(setFlag(json, "<tool_call>", "lstrip"), "<tool_call>", "rstrip");
        writeModel(dir, json, "{}");
        HfTokenizer ours = HfTokenizer.load(dir);
        var rust = ai.djl.huggingface.tokenizers.HuggingFaceTokenizer.newInstance(dir.resolve("tokenizer.json"),
                java.util.Map.of("addSpecialTokens", "false"));
        List<String> cases = new ArrayList<>(List.of("a <|im_end|> b", "a  \n<|im_end|>", "<|im_start|>  \n x",
                "x<think>y", "x <think> y", "<think>", "é<think>", "_<think>", " <tool_call>  <tool_call> ",
                "<|im_end|><|im_end|>", "  <|im_end|>  <|im_start|>  "));
        TokenizerCorpus corpus = new TokenizerCorpus(7);
        for (int i = 0; i < 500; i++) {
            cases.add(corpus.next(12).replace("<|", " <|").replace("|>", "|>  ").replace("<think>", "a<think> "));
        }
        for (String s : cases) {
            long[] r = rust.encode(s, false, false).getIds();
            int[] expected = Arrays.stream(r).mapToInt(Math::toIntExact).toArray();
            assertArrayEquals(expected, ours.encode(s, false), () -> TokenizerTestSupport.escape(s));
        }
        rust.close();
    }

    private static String setFlag(String json, String content, String flag) {
        int at = json.indexOf("\"content\": \"" + content + "\"");
        int f = json.indexOf("\"" + flag + "\": false", at);
        assertTrue(at > 0 && f > at && f - at < 200, content + " / " + flag);
        return json.substring(0, f) + "\"" + flag + "\": true" + json.substring(f + flag.length() + 9);
    }

    @Test
    void decodeInvertsEncodeAndMatchesRust() {
        for (String model : List.of("qwen3", "llama3_1")) {
            HfTokenizer t = TokenizerTestSupport.ours(model);
            var rust = TokenizerTestSupport.rust(model, false);
            for (String s : new TokenizerCorpus(11).strings(500, 16)) {
                int[] ids = t.encode(s, false);
                String expect = model.equals("qwen3") ? Normalizer.normalize(s, Normalizer.Form.NFC) : s;
                assertEquals(expect, t.decode(ids, 0, ids.length), () -> TokenizerTestSupport.escape(s));
                long[] l = Arrays.stream(ids).asLongStream().toArray();
                assertEquals(rust.decode(l, false), t.decode(ids, 0, ids.length), () -> TokenizerTestSupport.escape(s));
                assertEquals(rust.decode(l, true), t.decode(ids, 0, ids.length, true), () -> TokenizerTestSupport.escape(s));
            }
            int[] ids = t.encode("héllo wörld", false);
            // A split multi-byte char decodes lossily (U+FFFD), like Rust's from_utf8_lossy.
            assertNotNull(t.decode(ids, 0, 1));
            assertThrows(IndexOutOfBoundsException.class, () -> t.decode(ids, 1, ids.length));
        }
    }

    @Test
    void cachesNeverChangeIds() throws IOException {
        for (String model : List.of("qwen3", "llama3_1")) {
            HfTokenizer cached = TokenizerTestSupport.ours(model);
            HfTokenizer plain = HfTokenizer.load(TokenizerTestSupport.modelDir(model), HfTokenizer.Caches.NONE);
            HfTokenizer tiny = HfTokenizer.load(TokenizerTestSupport.modelDir(model),
                    new HfTokenizer.Caches(4, 8, 2, 1, 100000));
            TokenizerCorpus corpus = new TokenizerCorpus(3);
            List<String> texts = new ArrayList<>(corpus.strings(400, 30));
            texts.addAll(corpus.chatPrefixes(12, 60));
            for (int round = 0; round < 2; round++) {
                for (String s : texts) {
                    int[] expected = plain.encode(s, true);
                    assertArrayEquals(expected, cached.encode(s, true));
                    assertArrayEquals(expected, tiny.encode(s, true));
                    List<Integer> sink = new ArrayList<>();
                    assertEquals(expected.length, cached.encodeInto(s, true, sink::add));
                    assertArrayEquals(expected, sink.stream().mapToInt(Integer::intValue).toArray());
                }
            }
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void concurrentEncodersAgreeWithSequentialResults() throws Exception {
        HfTokenizer shared = HfTokenizer.load(TokenizerTestSupport.modelDir("qwen3"),
                new HfTokenizer.Caches(256, 32, 16, 16, 100000));
        HfTokenizer reference = HfTokenizer.load(TokenizerTestSupport.modelDir("qwen3"), HfTokenizer.Caches.NONE);
        List<String> texts = new TokenizerCorpus(5).strings(300, 40);
        List<int[]> expected = texts.stream().map(s -> reference.encode(s, false)).toList();
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try {
            List<Future<Integer>> results = new ArrayList<>();
            for (int th = 0; th < 4; th++) {
                int offset = th * 37;
                results.add(pool.submit(() -> {
                    int checked = 0;
                    for (int round = 0; round < 3; round++) {
                        for (int i = 0; i < texts.size(); i++) {
                            int k = (i + offset) % texts.size();
                            assertArrayEquals(expected.get(k), shared.encode(texts.get(k), false));
                            checked++;
                        }
                    }
                    return checked;
                }));
            }
            for (Future<Integer> f : results) {
                assertEquals(3 * texts.size(), f.get(100, TimeUnit.SECONDS));
            }
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void nonStringCharSequencesEncodeTheSame() {
        HfTokenizer t = TokenizerTestSupport.ours("llama3_1");
        for (String s : new TokenizerCorpus(9).strings(200, 10)) {
            assertArrayEquals(t.encode(s, true), t.encode(new StringBuilder(s), true));
        }
    }
}
