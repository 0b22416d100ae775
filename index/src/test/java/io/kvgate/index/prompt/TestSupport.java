package io.kvgate.index.prompt;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.index.tokenize.Tokenizer;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.zip.GZIPInputStream;

/** Test-only helpers: fixtures from the classpath, the in-repo models, and the real Rust HF tokenizer via DJL. */
public final class TestSupport {
    public static final ObjectMapper JSON = new ObjectMapper();
    private static final Map<String, DjlTokenizer> TOKENIZERS = new ConcurrentHashMap<>();

    private TestSupport() {
    }

    public static JsonNode fixture(String name) {
        try (InputStream in = TestSupport.class.getResourceAsStream("/fixtures/" + name)) {
            if (in == null) {
                throw new IllegalStateException("missing fixture " + name);
            }
            return JSON.readTree(in);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    public static Path repoRoot() {
        String p = System.getProperty("kvgate.repo.root");
        if (p != null && Files.exists(Paths.get(p, "mvnw"))) {
            return Paths.get(p);
        }
        Path dir = Paths.get("").toAbsolutePath();
        while (dir != null && !Files.exists(dir.resolve("mvnw"))) {
            dir = dir.getParent();
        }
        if (dir == null) {
            throw new IllegalStateException("repo root (dir with mvnw) not found");
        }
        return dir;
    }

    public static JsonNode tokenizerConfig(String model) {
        try {
            return JSON.readTree(repoRoot().resolve("deploy/models/" + model + "/tokenizer_config.json").toFile());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The model's real tokenizer (shared per model; DJL's native tokenizer is thread-safe for encode). */
    public static Tokenizer tokenizer(String model) {
        return TOKENIZERS.computeIfAbsent(model, DjlTokenizer::load);
    }

    /** Test-only Tokenizer over DJL's binding of the Rust HF tokenizers. */
    static final class DjlTokenizer implements Tokenizer {
        private final HuggingFaceTokenizer tok;

        private DjlTokenizer(HuggingFaceTokenizer tok) {
            this.tok = tok;
        }

        static DjlTokenizer load(String model) {
            try {
                Path dir = Files.createTempDirectory("kvgate-tok-" + model);
                dir.toFile().deleteOnExit();
                Path json = dir.resolve("tokenizer.json");
                try (InputStream in = new GZIPInputStream(Files.newInputStream(
                        repoRoot().resolve("deploy/models/" + model + "/tokenizer.json.gz")))) {
                    Files.copy(in, json, StandardCopyOption.REPLACE_EXISTING);
                }
                json.toFile().deleteOnExit();
                return new DjlTokenizer(HuggingFaceTokenizer.newInstance(json,
                        Map.of("truncation", "false", "padding", "false", "addSpecialTokens", "true")));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override
        public int[] encode(CharSequence text, boolean addSpecialTokens) {
            long[] ids = tok.encode(text.toString(), addSpecialTokens, false).getIds();
            int[] out = new int[ids.length];
            for (int i = 0; i < ids.length; i++) {
                out[i] = Math.toIntExact(ids[i]);
            }
            return out;
        }
    }
}
