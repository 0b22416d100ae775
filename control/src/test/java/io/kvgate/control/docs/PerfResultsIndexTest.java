package io.kvgate.control.docs;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * perf/results/README.md indexes every result file (a row whose first cell names it), and names no file that is
 * not there: a result nobody can find from the index, or a row pointing at nothing, fails here.
 */
class PerfResultsIndexTest {
    private static Path results() {
        String root = System.getProperty("kvgate.repo.root");
        // Surefire runs in the module's directory; the results are the repository's.
        return (root == null || root.isEmpty() ? Path.of("..") : Path.of(root)).resolve("perf").resolve("results");
    }

    @Test
    void everyResultFileIsIndexedAndEveryIndexedFileExists() throws Exception {
        Set<String> files = new TreeSet<>();
        try (Stream<Path> s = Files.list(results())) {
            s.filter(Files::isRegularFile).map(p -> p.getFileName().toString()).filter(n -> !n.equals("README.md"))
                .forEach(files::add);
        }
        Set<String> indexed = new TreeSet<>();
        Matcher m = Pattern.compile("(?m)^\\| `([^`]+)` \\|").matcher(
            Files.readString(results().resolve("README.md"), StandardCharsets.UTF_8));
        while (m.find()) {
            indexed.add(m.group(1));
        }
        Set<String> missing = new TreeSet<>(files);
        missing.removeAll(indexed);
        assertEquals(Set.of(), missing, "perf/results files without a row in perf/results/README.md (add one under its topic)");
        Set<String> dangling = new TreeSet<>(indexed);
        dangling.removeAll(files);
        assertEquals(Set.of(), dangling, "rows of perf/results/README.md naming no file");
    }
}
