package io.kvgate.dataplane;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Engine knowledge lives in the engine profiles (issue #39 item 4): outside {@code io.kvgate.dataplane.engine} no
 * data-plane source branches on the engine kind — no {@code RuleConfig.Engine} constant, no {@code case VLLM}, no
 * comparison of an engine kind or of an engine's configuration spelling. The code asks the rule's
 * {@link io.kvgate.dataplane.engine.EngineProfile} instead. Comments are not scanned; a failure names file and line.
 */
class EngineKindSwitchTest {
    private static final String KINDS = "(?:VLLM|SGLANG|TRTLLM|LLAMACPP)";
    /** The ways code tells one engine from another. */
    private static final Pattern BRANCH = Pattern.compile(
        "\\bEngine\\." + KINDS + "\\b"                                          // RuleConfig.Engine.SGLANG anywhere
            + "|\\bcase\\s+" + KINDS + "\\b"                                   // case VLLM ->
            + "|\"(?:vllm|sglang|trtllm|llamacpp)\""                          // "sglang".equals(engine), Map.of("vllm", ...)
            + "|\\bengine(?:Kind)?\\(\\)\\s*[!=]="                             // rule.engine() == ..., engineKind() != ...
            + "|\\bswitch\\s*\\([^{;]*\\bengine(?:Kind)?\\(\\)");               // switch (rule.engine())
    private static final Pattern COMMENT = Pattern.compile("(?s)/\\*.*?\\*/|//[^\\n]*");

    @Test
    void noDataplaneCodeOutsideTheEnginePackageBranchesOnTheEngineKind() throws IOException {
        Path sources = Path.of(System.getProperty("kvgate.repo.root", ".."), "dataplane", "src", "main", "java",
            "io", "kvgate", "dataplane").toAbsolutePath().normalize();
        assertTrue(Files.isDirectory(sources.resolve("engine")), "dataplane sources not found at " + sources);
        List<String> found = new ArrayList<>();
        int scanned = 0;
        try (Stream<Path> files = Files.walk(sources)) {
            for (Path f : files.filter(p -> p.toString().endsWith(".java")).sorted().toList()) {
                if (f.startsWith(sources.resolve("engine"))) {
                    continue;
                }
                scanned++;
                for (String v : branches(Files.readString(f))) {
                    found.add(sources.relativize(f) + ":" + v);
                }
            }
        }
        assertTrue(scanned > 100, "scanned only " + scanned + " files under " + sources);
        assertEquals(List.of(), found, "engine-kind branches outside the engine package: ask the rule's EngineProfile");
    }

    /** The scan finds each form it forbids (so a pass above means none is there, not that the pattern is blind). */
    @Test
    void theScanRecognisesEveryFormOfBranch() {
        for (String branch : List.of("if (rule.engine() == RuleConfig.Engine.SGLANG) {}", "boolean b = engine != Engine.VLLM;",
            "return switch (engine) {\n case TRTLLM -> 1;\n default -> 0; };", "switch (r.config().engineKind()) { default -> {} }",
            "if (r.engineKind() != x) {}", "boolean s = \"sglang\".equals(engine);", "Map.of(\"llamacpp\", 1);")) {
            assertFalse(branches(branch).isEmpty(), branch);
        }
        assertEquals(List.of(), branches("// rule.engine() == Engine.SGLANG in a comment\n/* case VLLM */"
            + "\nString n = rule.profile().name(); boolean b = rule.profile().answers503WhileLoading();"
            + "\nString field = \"vllm_xargs\";"));
    }

    /** Each branch in {@code source} (comments removed) as "line: text". */
    static List<String> branches(String source) {
        String code = COMMENT.matcher(source).replaceAll(m -> m.group().replaceAll("[^\\n]", " "));
        List<String> out = new ArrayList<>();
        Matcher m = BRANCH.matcher(code);
        while (m.find()) {
            int line = 1 + (int) code.substring(0, m.start()).chars().filter(c -> c == '\n').count();
            out.add(line + ": " + m.group());
        }
        return out;
    }
}
