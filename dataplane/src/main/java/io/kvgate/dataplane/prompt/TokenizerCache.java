package io.kvgate.dataplane.prompt;

import io.kvgate.index.tokenize.HfTokenizer;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.Collection;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;

/**
 * The tokenizers one gateway has loaded, by model directory. Owned by the gateway (not process-global): a reload
 * reuses a directory's tokenizer only while the directory's files are unchanged (names, sizes, modification
 * times), so replacing {@code tokenizer.json} or the chat template and reloading takes effect; directories no
 * rule names any more are dropped after each applied configuration. Loading is the expensive part (hundreds of
 * milliseconds for a 150 k-token vocabulary), so start-up checks and the table build share one load.
 */
public final class TokenizerCache {
    private record Entry(String stamp, HfTokenizer tokenizer) {}

    private final ConcurrentHashMap<Path, Entry> byDir = new ConcurrentHashMap<>();

    /** The tokenizer of {@code modelDir}, loaded now if it was never loaded or its files changed since. */
    public HfTokenizer load(String modelDir) {
        Path dir = key(modelDir);
        String stamp = stamp(dir);
        return byDir.compute(dir, (d, old) -> old != null && old.stamp.equals(stamp) ? old : new Entry(stamp, read(d)))
            .tokenizer;
    }

    /** Drops every directory not in {@code modelDirs} (nulls ignored). */
    public void retainOnly(Collection<String> modelDirs) {
        Set<Path> keep = new HashSet<>();
        for (String d : modelDirs) {
            if (d != null) {
                keep.add(key(d));
            }
        }
        byDir.keySet().retainAll(keep);
    }

    /** How many directories are held (for tests and the inventory of what a reload keeps). */
    public int size() {
        return byDir.size();
    }

    static HfTokenizer read(Path dir) {
        try {
            return HfTokenizer.load(dir);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot load tokenizer from " + dir + ": " + e.getMessage(), e);
        }
    }

    private static Path key(String modelDir) {
        return Path.of(modelDir).toAbsolutePath().normalize();
    }

    /**
     * Names, sizes and modification times of the directory's regular files and of its
     * {@code additional_chat_templates/}: what a loaded tokenizer (and its templates) was read from.
     */
    private static String stamp(Path dir) {
        String own = stampFiles(dir);
        Path extra = dir.resolve("additional_chat_templates");
        return Files.isDirectory(extra) ? own + "additional_chat_templates/" + stampFiles(extra) : own;
    }

    private static String stampFiles(Path dir) {
        try (Stream<Path> files = Files.list(dir)) {
            StringBuilder sb = new StringBuilder();
            files.sorted().forEach(f -> {
                try {
                    BasicFileAttributes a = Files.readAttributes(f, BasicFileAttributes.class);
                    if (a.isRegularFile()) {
                        sb.append(f.getFileName()).append(':').append(a.size()).append(':')
                            .append(a.lastModifiedTime().toMillis()).append(';');
                    }
                } catch (IOException e) {
                    sb.append(f.getFileName()).append(":unreadable;");
                }
            });
            return sb.toString();
        } catch (IOException e) {
            // Not a readable directory: loading will fail with the loader's own message.
            return "unlisted:" + e.getMessage();
        }
    }
}
