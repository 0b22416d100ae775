package io.kvgate.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Keeps the test tiers honest as tests are added. The unit tier ({@code ./kvgate test --unit}) runs without sockets,
 * engines or subprocesses; a test class that starts a gateway, a simulator, a fake engine, a ZeroMQ context, a server
 * socket, an HTTP client or a process is a system test and carries {@code @Tag("system")} (or {@code @Tag("soak")}
 * for slow stress runs, excluded by default) on the class or on the methods that do.
 */
class TestTiersTest {
    /** What makes a test a system test: real sockets, threads serving them, or another process. */
    static final Pattern OPENS_THE_WORLD = Pattern.compile(
        "EngineSimulator\\.start|GatewayLauncher\\.start|Gateway\\.start|new ZContext|new ServerSocket|new Socket\\("
            + "|HttpClient\\.new|TestLlmServer\\(|ScriptedEngine\\.start|new FakeEngine|new PdFakeEngine"
            + "|new TestEngine|ProcessBuilder|TestPorts\\.|HttpServer\\.create|ControlSocket\\.");
    static final Pattern TAGGED = Pattern.compile("@Tag\\(\"(system|soak)\"\\)");

    @Test
    void everyTestThatOpensSocketsOrProcessesIsTaggedSystemOrSoak() throws IOException {
        Path root = Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize();
        List<Path> testClasses = new ArrayList<>();
        try (Stream<Path> modules = Files.list(root)) {
            for (Path testDir : modules.map(m -> m.resolve("src/test/java")).filter(Files::isDirectory).toList()) {
                try (Stream<Path> files = Files.walk(testDir)) {
                    files.filter(f -> f.getFileName().toString().endsWith("Test.java")).forEach(testClasses::add);
                }
            }
        }
        assertTrue(testClasses.size() > 20, "found only " + testClasses + " under " + root);
        List<String> untagged = new ArrayList<>();
        for (Path f : testClasses) {
            String src = Files.readString(f);
            if (OPENS_THE_WORLD.matcher(src).find() && !TAGGED.matcher(src).find()) {
                untagged.add(root.relativize(f).toString());
            }
        }
        assertEquals(List.of(), untagged, "these tests open sockets, engines or processes but are not tagged "
            + "@Tag(\"system\") (or @Tag(\"soak\")), so the unit tier would run them");
    }
}
