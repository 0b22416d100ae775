package io.kvgate.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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
 * for slow stress runs, excluded by default, or {@code @Tag("quality")} for the routing-quality runs, which failsafe
 * runs beside the system tier, and alone with {@code ./kvgate test --quality}) on the class or on the methods that do. The unit tier runs its classes in
 * parallel (the parent pom), so a unit test that changes what every thread of the JVM sees (System.out/err, a system
 * property, the default locale or time zone, the log configuration) declares it with {@code @Isolated} or a
 * {@code @ResourceLock}, and JUnit keeps the others off that state meanwhile.
 */
class TestTiersTest {
    /** What makes a test a system test: real sockets, threads serving them, or another process. */
    static final Pattern OPENS_THE_WORLD = Pattern.compile(
        "EngineSimulator\\.start|Gateway\\.start|new ZContext|new ServerSocket|new Socket\\("
            + "|HttpClient\\.new|TestLlmServer\\(|ScriptedEngine\\.start|new FakeEngine|new PdFakeEngine"
            + "|new TestEngine|ProcessBuilder|TestPorts\\.|HttpServer\\.create|ControlSocket\\.");
    static final Pattern TAGGED = Pattern.compile("@Tag\\(\"(system|soak|quality)\"\\)");
    /** What every thread of the JVM sees, changed. */
    static final Pattern SWAPS_PROCESS_STATE = Pattern.compile(
        "System\\.set(Out|Err|In|Property|Properties)\\(|System\\.clearProperty\\(|Locale\\.setDefault\\("
            + "|TimeZone\\.setDefault\\(|LogSetup\\.configure\\(|Log\\.level\\(Log\\.Level");
    static final Pattern DECLARES_SHARED_STATE = Pattern.compile("@Isolated|@ResourceLock\\(");

    @Test
    void everyTestThatOpensSocketsOrProcessesIsTaggedSystemOrSoak() throws IOException {
        Path root = repoRoot();
        List<Path> testClasses = testClasses(root);
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

    @Test
    void everyUnitTestThatChangesProcessWideStateSaysSoToTheParallelRun() throws IOException {
        Path root = repoRoot();
        List<String> undeclared = new ArrayList<>();
        for (Path f : testClasses(root)) {
            String src = Files.readString(f);
            if (!TAGGED.matcher(src).find() && SWAPS_PROCESS_STATE.matcher(src).find()
                && !DECLARES_SHARED_STATE.matcher(src).find()) {
                undeclared.add(root.relativize(f).toString());
            }
        }
        assertEquals(List.of(), undeclared, "these unit tests change System.out/err, a system property, a default or "
            + "the log configuration without @Isolated or @ResourceLock, so a class running beside them in the parallel "
            + "unit tier sees the change");
    }

    /**
     * The quality tier is part of {@code ./kvgate test} (issue #35 item 4: a change that costs hits fails CI): failsafe
     * runs it by default beside the system tier, the unit tier never does, and {@code ./kvgate test --quality} still
     * runs it alone.
     */
    @Test
    void theQualityTierRunsInTheDefaultBuildAndAloneWhenAskedFor() throws IOException {
        Path root = repoRoot();
        String pom = Files.readString(root.resolve("pom.xml"));
        List<String> failsafe = groups(pom, "failsafe.groups");
        assertTrue(failsafe.contains("system") && failsafe.contains("quality"),
            "pom.xml <failsafe.groups> must run the system and quality tiers by default: " + failsafe);
        assertTrue(groups(pom, "surefire.excludedGroups").contains("quality"),
            "pom.xml <surefire.excludedGroups> must keep the quality tier out of the unit tier");
        assertFalse(groups(pom, "failsafe.excludedGroups").contains("quality"), "pom.xml <failsafe.excludedGroups> excludes quality");
        String launcher = Files.readString(root.resolve("kvgate"));
        assertTrue(launcher.contains("--quality) shift; ensure_test_prerequisites; exec ./mvnw -B verify -Dfailsafe.groups=quality"),
            "./kvgate test --quality must run the quality tier alone (-Dfailsafe.groups=quality)");
    }

    private static List<String> groups(String pom, String property) {
        java.util.regex.Matcher m = Pattern.compile("<" + Pattern.quote(property) + ">([^<]*)</").matcher(pom);
        assertTrue(m.find(), "pom.xml has no <" + property + ">");
        return List.of(m.group(1).trim().split("\\s*,\\s*"));
    }

    @Test
    void theGuardsSeeWhatTheyLookFor() {
        assertTrue(TAGGED.matcher("@Tag(\"quality\")").find());
        assertTrue(SWAPS_PROCESS_STATE.matcher("System.setErr(new PrintStream(bytes))").find());
        assertTrue(SWAPS_PROCESS_STATE.matcher("System.setProperty(\"fuzz.seed\", \"1\")").find());
        assertTrue(SWAPS_PROCESS_STATE.matcher("LogSetup.configure(LogSetup.Format.JSON, level)").find());
        assertFalse(SWAPS_PROCESS_STATE.matcher("System.getProperty(\"fuzz.seed\")").find());
        assertTrue(DECLARES_SHARED_STATE.matcher("@ResourceLock(Resources.SYSTEM_OUT)").find());
        assertTrue(OPENS_THE_WORLD.matcher("new ZContext(1)").find());
    }

    private static Path repoRoot() {
        return Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize();
    }

    private static List<Path> testClasses(Path root) throws IOException {
        List<Path> testClasses = new ArrayList<>();
        try (Stream<Path> modules = Files.list(root)) {
            for (Path testDir : modules.map(m -> m.resolve("src/test/java")).filter(Files::isDirectory).toList()) {
                try (Stream<Path> files = Files.walk(testDir)) {
                    files.filter(f -> f.getFileName().toString().endsWith("Test.java")).forEach(testClasses::add);
                }
            }
        }
        assertTrue(testClasses.size() > 20, "found only " + testClasses + " under " + root);
        return testClasses;
    }
}
