package io.kvgate.tools.sim;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * The tokenizer used when no {@code --model-dir} is given: deterministic, dependency-free and roughly as fine as
 * a BPE vocabulary on English text. The scheme (documented because token counts appear in usage and in KV
 * events):
 * <ul>
 *   <li>a token is a maximal run of letters/digits together with the whitespace run before it, or one other
 *       non-whitespace character together with the whitespace before it; trailing whitespace is one token;</li>
 *   <li>the markers {@code <|im_start|>} and {@code <|im_end|>} are single special tokens (ids 151644/151645);</li>
 *   <li>a token id is FNV-1a-32 of the token's UTF-8 bytes modulo {@value #VOCAB} (so equal text gives equal ids
 *       and shared prefixes give shared block hashes);</li>
 *   <li>chat is rendered ChatML style: for each message {@code <|im_start|>ROLE\nCONTENT<|im_end|>\n}, then
 *       {@code <|im_start|>assistant\n} (the generation prompt); content arrays contribute their text parts.</li>
 * </ul>
 * Stateless and thread-safe.
 */
final class WordTokenizer implements PromptTokenizer {
    static final int VOCAB = 151_643;
    static final int IM_START = 151_644;
    static final int IM_END = 151_645;
    private static final String IM_START_TEXT = "<|im_start|>";
    private static final String IM_END_TEXT = "<|im_end|>";

    @Override
    public int[] encodeChat(JsonNode request) {
        return encodeText(renderChatMl(request));
    }

    static String renderChatMl(JsonNode request) {
        StringBuilder sb = new StringBuilder();
        JsonNode messages = request.path("messages");
        // vLLM's continue_final_message (HF apply_chat_template): the last (assistant) message is left open, its
        // content the prefix the model continues, and no generation prompt follows.
        boolean continueFinal = request.path("continue_final_message").asBoolean(false);
        int i = 0;
        for (JsonNode m : messages) {
            boolean open = continueFinal && ++i == messages.size();
            sb.append(IM_START_TEXT).append(m.path("role").asText("user")).append('\n');
            JsonNode content = m.path("content");
            if (content.isArray()) {
                for (JsonNode part : content) {
                    if (part.path("text").isTextual()) {
                        sb.append(part.path("text").asText());
                    }
                }
            } else if (content.isTextual()) {
                sb.append(content.asText());
            }
            if (open) {
                return sb.toString();
            }
            sb.append(IM_END_TEXT).append('\n');
        }
        sb.append(IM_START_TEXT).append("assistant\n");
        return sb.toString();
    }

    /**
     * A word's key in the greedy context ({@link TextGenerator}): the id of the token without the whitespace before
     * it, so {@code "the"}, {@code " the"} and {@code "\nthe"} are the same word wherever the tokenizer split them.
     */
    static int wordKey(String tokenText) {
        int i = 0;
        while (i < tokenText.length() && Character.isWhitespace(tokenText.charAt(i))) {
            i++;
        }
        return id(tokenText, i, tokenText.length());
    }

    /** Generated-word token ids (with or without the blank before them) to their word key; see {@link #greedyContext(int[], long)}. */
    private static final java.util.Map<Integer, Integer> WORD_KEYS_BY_ID = wordKeysById();

    private static java.util.Map<Integer, Integer> wordKeysById() {
        java.util.Map<Integer, Integer> m = new java.util.HashMap<>();
        for (String w : TextGenerator.WORDS) {
            int key = wordKey(w);
            for (String form : new String[] {w, " " + w, "\n" + w}) {
                m.put(id(form, 0, form.length()), key);
            }
        }
        return m;
    }

    /** The id of one generated token's text (what a vLLM engine reports under {@code return_token_ids}). */
    static int tokenId(String tokenText) {
        return id(tokenText, 0, tokenText.length());
    }

    /**
     * The greedy context after a text (a completions prompt, a rendered chat): the context of its tokens
     * ({@link #greedyContext(int[], long)}), so a text prompt and the same prompt as the ids this tokenizer gives it
     * continue alike, and appending generated words to the text continues the same context.
     */
    static long greedyContext(String text, long start) {
        return greedyContext(new WordTokenizer().encodeText(text), start);
    }

    /**
     * The greedy context after a token-id prompt: generated-word ids (in any of their forms: a word with or without a
     * blank or newline before it) count as their word, whitespace-only tokens not at all, any other id as itself; so
     * a prompt of (ids + the generated ids the engine reported), a text prompt with the generated text appended, and a
     * chat turn continued as an assistant prefix ("assistant\n" + "the" is one token "\nthe") continue the same context.
     */
    static long greedyContext(int[] ids, long start) {
        long ctx = start;
        for (int t : ids) {
            if (WHITESPACE_IDS.contains(t)) {
                continue;
            }
            ctx = TextGenerator.greedyNext(ctx, WORD_KEYS_BY_ID.getOrDefault(t, t));
        }
        return ctx;
    }

    /** Ids of whitespace-only tokens (up to 4 blanks, tabs, newlines): not words, skipped by the greedy context. */
    private static final java.util.Set<Integer> WHITESPACE_IDS = whitespaceIds();

    private static java.util.Set<Integer> whitespaceIds() {
        java.util.Set<Integer> out = new java.util.HashSet<>();
        java.util.List<String> level = java.util.List.of("");
        for (int len = 1; len <= 4; len++) {
            java.util.List<String> next = new java.util.ArrayList<>();
            for (String p : level) {
                for (char c : new char[] {' ', '\n', '\t', '\r'}) {
                    String w = p + c;
                    next.add(w);
                    out.add(id(w, 0, w.length()));
                }
            }
            level = next;
        }
        return out;
    }

    /** Whether a token-id prompt ends in a generated word (a continuation: its first new token takes a blank). */
    static boolean endsInGeneratedWord(int[] ids) {
        return ids.length > 0 && WORD_KEYS_BY_ID.containsKey(ids[ids.length - 1]);
    }

    @Override
    public int[] encodeText(String text) {
        int[] out = new int[Math.max(4, text.length() / 3)];
        int n = 0;
        int i = 0;
        int len = text.length();
        while (i < len) {
            if (n == out.length) {
                out = Arrays.copyOf(out, out.length * 2);
            }
            if (text.startsWith(IM_START_TEXT, i)) {
                out[n++] = IM_START;
                i += IM_START_TEXT.length();
                continue;
            }
            if (text.startsWith(IM_END_TEXT, i)) {
                out[n++] = IM_END;
                i += IM_END_TEXT.length();
                continue;
            }
            int start = i;
            while (i < len && Character.isWhitespace(text.charAt(i))) {
                i++;
            }
            if (i == len || text.startsWith(IM_START_TEXT, i) || text.startsWith(IM_END_TEXT, i)) {
                if (i > start) {
                    out[n++] = id(text, start, i);
                }
                continue;
            }
            if (Character.isLetterOrDigit(text.codePointAt(i))) {
                while (i < len && Character.isLetterOrDigit(text.codePointAt(i))) {
                    i += Character.charCount(text.codePointAt(i));
                }
            } else {
                i += Character.charCount(text.codePointAt(i));
            }
            out[n++] = id(text, start, i);
        }
        return Arrays.copyOf(out, n);
    }

    private static int id(String text, int from, int to) {
        byte[] bytes = text.substring(from, to).getBytes(StandardCharsets.UTF_8);
        int h = 0x811c9dc5;
        for (byte b : bytes) {
            h ^= b & 0xff;
            h *= 0x01000193;
        }
        return Integer.remainderUnsigned(h, VOCAB);
    }
}
