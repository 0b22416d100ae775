package io.kvgate.tools.bench;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashSet;
import java.util.Set;
import java.util.SplittableRandom;

/**
 * The fixed word list that text prompts are made of. "Tokens" in workload sizes ({@code --system-tokens},
 * {@code --question-tokens}, ...) are words of this list: common short lowercase English words that BPE tokenizers
 * (Llama-3, Qwen) encode as one token each with their leading space, so an N-word prompt is about N tokens (the
 * exact count, chat template included, is what the engine reports in {@code usage.prompt_tokens}). Checked with
 * the real Qwen3 and Llama-3.1 tokenizers (deploy/models): every word is exactly one token with its leading space,
 * and 10,000 random words in chunks of 100 encode to 10,005 tokens (a chunk's first word has no leading space).
 *
 * <p>Token-id prompts draw ids uniformly from {@code [TOKEN_ID_BASE, TOKEN_ID_BASE + TOKEN_ID_RANGE)}: ordinary
 * vocabulary entries in every current model (no special tokens, which sit at the top of the id space).
 *
 * <p>Threading: immutable, thread-safe.
 */
public final class Vocabulary {
    public static final int TOKEN_ID_BASE = 1000;
    public static final int TOKEN_ID_RANGE = 20000;

    private static final String[] WORDS = load();

    private Vocabulary() {}

    private static String[] load() {
        Set<String> words = new LinkedHashSet<>();
        try (InputStream in = Vocabulary.class.getResourceAsStream("vocabulary.txt")) {
            if (in == null) {
                throw new IllegalStateException("vocabulary.txt missing from the classpath");
            }
            BufferedReader reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.US_ASCII));
            String line;
            while ((line = reader.readLine()) != null) {
                if (line.startsWith("#")) {
                    continue;
                }
                for (String w : line.trim().split("\\s+")) {
                    if (!w.isEmpty()) {
                        words.add(w);
                    }
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return words.toArray(new String[0]);
    }

    public static int size() {
        return WORDS.length;
    }

    public static String word(int index) {
        return WORDS[index];
    }

    /** Appends {@code count} random words, separated by single spaces (a leading space when {@code sb} is not empty). */
    public static void appendWords(StringBuilder sb, SplittableRandom random, int count) {
        for (int i = 0; i < count; i++) {
            if (!sb.isEmpty()) {
                sb.append(' ');
            }
            sb.append(WORDS[random.nextInt(WORDS.length)]);
        }
    }

    /** {@code count} random words. */
    public static String words(SplittableRandom random, int count) {
        StringBuilder sb = new StringBuilder(count * 6);
        appendWords(sb, random, count);
        return sb.toString();
    }

    /** {@code count} random token ids. */
    public static int[] tokenIds(SplittableRandom random, int count) {
        int[] ids = new int[count];
        for (int i = 0; i < count; i++) {
            ids[i] = TOKEN_ID_BASE + random.nextInt(TOKEN_ID_RANGE);
        }
        return ids;
    }

    /** A deterministic 64-bit mix of a seed and a stream number (SplittableRandom's finalizer). */
    public static long mix(long seed, long stream) {
        long z = seed + 0x9E3779B97F4A7C15L * (stream + 1);
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }
}
