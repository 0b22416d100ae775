package io.kvgate.dataplane.request;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The lexer in JVMs started without {@code deploy/jvm.options} (an embedding application's, say), each a child JVM on
 * this test's class path with its class loading logged: without {@code jdk.incubator.vector} it runs the SWAR skip
 * and never loads {@link VectorScan} or any vector class (that would throw NoClassDefFoundError); with the module
 * but without native access it runs the vector skip on a segment per body, and prints no restricted-method warning.
 * Both judge bodies as the lexer always does.
 */
@Tag("system")
class JsonLexerWithoutVectorModuleTest {
    private static List<String> run(Path dir, String name, String... jvmOptions) throws Exception {
        Path out = dir.resolve(name + ".txt");
        List<String> command = new ArrayList<>();
        command.add(System.getProperty("java.home") + File.separator + "bin" + File.separator + "java");
        command.add("-Xlog:class+load=info:file=" + dir.resolve(name + "-classes.log"));
        command.addAll(List.of(jvmOptions));
        command.addAll(List.of("-cp", System.getProperty("java.class.path"), LexWithoutVectorModule.class.getName()));
        Process p = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(out.toFile()).start();
        if (!p.waitFor(60, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new AssertionError("the child JVM (" + name + ") did not finish in 60 s");
        }
        String printed = Files.readString(out, StandardCharsets.UTF_8);
        assertEquals(0, p.exitValue(), printed);
        return printed.lines().filter(l -> !l.isBlank()).toList();
    }

    @Test
    void withoutTheModuleTheLexerRunsSwarAndNeverLoadsAVectorClass(@TempDir Path dir) throws Exception {
        List<String> lines = run(dir, "plain");
        assertEquals(List.of("scan swar", "accepted 201 refused 201"), lines);
        String classes = Files.readString(dir.resolve("plain-classes.log"), StandardCharsets.UTF_8);
        assertTrue(classes.contains("io.kvgate.dataplane.request.JsonLexer "), "the log shows the lexer loaded");
        assertFalse(classes.contains("io.kvgate.dataplane.request.VectorScan"), "VectorScan was loaded");
        assertFalse(classes.contains("jdk.incubator.vector"), "a vector class was loaded");
    }

    @Test
    void withTheModuleButNoNativeAccessEveryBodyGetsASegment(@TempDir Path dir) throws Exception {
        List<String> lines = run(dir, "module", "--add-modules=jdk.incubator.vector");
        assertEquals("WARNING: Using incubator modules: jdk.incubator.vector", lines.get(0), "the JVM's own line");
        assertEquals(List.of("scan vector (" + JsonLexer.VECTOR_BYTES + " bytes), a segment per body",
            "accepted 201 refused 201"), lines.subList(1, lines.size()), "nothing else printed: " + lines);
    }
}
