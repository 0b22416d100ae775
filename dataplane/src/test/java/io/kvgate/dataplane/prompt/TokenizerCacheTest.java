package io.kvgate.dataplane.prompt;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.index.tokenize.HfTokenizer;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TokenizerCacheTest {
    private static Path shippedModel() {
        Path d = Path.of("").toAbsolutePath();
        while (d != null && !Files.exists(d.resolve("mvnw"))) {
            d = d.getParent();
        }
        return d.resolve("deploy/models/qwen3");
    }

    /** A private copy of the shipped Qwen3 model directory, so the test can change its files. */
    private static Path copyOfModel(Path into) throws Exception {
        try (Stream<Path> files = Files.list(shippedModel())) {
            for (Path f : files.filter(Files::isRegularFile).toList()) {
                Files.copy(f, into.resolve(f.getFileName()));
            }
        }
        return into;
    }

    @Test
    void anUnchangedDirectoryIsLoadedOnceAndAChangedOneAgain(@TempDir Path tmp) throws Exception {
        Path dir = copyOfModel(tmp);
        TokenizerCache cache = new TokenizerCache();
        HfTokenizer first = cache.load(dir.toString());
        assertSame(first, cache.load(dir.resolve(".").toString()), "same directory, same files: the loaded tokenizer is reused");

        // An operator replaces the tokenizer config (e.g. a new chat template) and reloads: the next load sees it.
        Path cfg = dir.resolve("tokenizer_config.json");
        Files.setLastModifiedTime(cfg, FileTime.fromMillis(Files.getLastModifiedTime(cfg).toMillis() + 60_000));
        HfTokenizer second = cache.load(dir.toString());
        assertNotSame(first, second, "a changed file must not be served from the cache");
        assertEquals(1, cache.size());
    }

    @Test
    void directoriesNoRuleNamesAreDropped(@TempDir Path a, @TempDir Path b) throws Exception {
        TokenizerCache cache = new TokenizerCache();
        cache.load(copyOfModel(a).toString());
        cache.load(copyOfModel(b).toString());
        assertEquals(2, cache.size());
        cache.retainOnly(java.util.Arrays.asList(b.toString(), null));
        assertEquals(1, cache.size());
    }

    @Test
    void anUnloadableDirectoryNamesItself(@TempDir Path empty) {
        UncheckedIOException e = assertThrows(UncheckedIOException.class, () -> new TokenizerCache().load(empty.toString()));
        assertTrue(e.getMessage().contains(empty.toString()), e.getMessage());
    }
}
