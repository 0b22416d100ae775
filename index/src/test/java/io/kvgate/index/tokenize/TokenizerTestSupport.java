package io.kvgate.index.tokenize;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.zip.GZIPInputStream;

/** Locates the in-repo tokenizers and builds the Rust reference (DJL) next to ours. */
final class TokenizerTestSupport {
    private static final Map<String, HfTokenizer> OURS = new ConcurrentHashMap<>();
    private static final Map<String, HuggingFaceTokenizer> RUST = new ConcurrentHashMap<>();

    private TokenizerTestSupport() {
    }

    static Path repoRoot() {
        String p = System.getProperty("kvgate.repo.root");
        if (p != null && !p.isBlank()) {
            return Path.of(p);
        }
        Path d = Path.of("").toAbsolutePath();
        while (d != null && !Files.exists(d.resolve("mvnw"))) {
            d = d.getParent();
        }
        if (d == null) {
            throw new IllegalStateException("cannot find the repository root (no mvnw above the working dir)");
        }
        return d;
    }

    static Path modelDir(String model) {
        return repoRoot().resolve("deploy/models").resolve(model);
    }

    static HfTokenizer ours(String model) {
        return OURS.computeIfAbsent(model, m -> {
            try {
                return HfTokenizer.load(modelDir(m));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        });
    }

    /** The Rust library via DJL; it needs a plain tokenizer.json, so the gzipped copy is unpacked to a temp dir. */
    static HuggingFaceTokenizer rust(String model, boolean addSpecialTokens) {
        return RUST.computeIfAbsent(model + "/" + addSpecialTokens, k -> {
            try {
                Path dir = Files.createTempDirectory("kvgate-tok-" + model);
                Path json = dir.resolve("tokenizer.json");
                try (InputStream in = new GZIPInputStream(Files.newInputStream(modelDir(model).resolve("tokenizer.json.gz")))) {
                    Files.copy(in, json, StandardCopyOption.REPLACE_EXISTING);
                }
                json.toFile().deleteOnExit();
                dir.toFile().deleteOnExit();
                return HuggingFaceTokenizer.newInstance(json, Map.of(
                        "addSpecialTokens", Boolean.toString(addSpecialTokens),
                        "truncation", "false", "padding", "false", "modelMaxLength", "100000000"));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        });
    }

    static int[] rustIds(String model, String text, boolean addSpecialTokens) {
        long[] ids = rust(model, addSpecialTokens).encode(text, addSpecialTokens, false).getIds();
        int[] out = new int[ids.length];
        for (int i = 0; i < ids.length; i++) {
            out[i] = Math.toIntExact(ids[i]);
        }
        return out;
    }

    static String escape(String s) {
        StringBuilder sb = new StringBuilder();
        s.codePoints().forEach(cp -> {
            if (cp >= 0x20 && cp < 0x7F) {
                sb.appendCodePoint(cp);
            } else {
                sb.append(String.format("\\u{%X}", cp));
            }
        });
        return sb.toString();
    }
}
