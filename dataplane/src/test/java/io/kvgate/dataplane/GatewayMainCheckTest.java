package io.kvgate.dataplane;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** {@code serve --config deploy/examples/kv-exact.yaml --check}, as an operator runs it, prints the memory budget. */
class GatewayMainCheckTest {

    @Test
    void checkPrintsTheMemoryBudgetOfTheKvExactExample() throws Exception {
        Path example = Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize()
            .resolve("deploy/examples/kv-exact.yaml");
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        int rc = GatewayMain.run(new String[] {"--config", example.toString(), "--check"},
            new PrintStream(bytes, true, StandardCharsets.UTF_8));
        String out = bytes.toString(StandardCharsets.UTF_8);
        assertEquals(0, rc, out);
        for (String expected : new String[] {"configuration OK: 1 rule(s)", "memory budget (worst case",
            "rule chat: kv routing state", "tokenizer ", "block index: 2000000 blocks in a Chronicle Map",
            "ingest: frame buffers", "ingest: 2 ZeroMQ subscription(s)", "client connections", "total heap "}) {
            assertTrue(out.contains(expected), "missing '" + expected + "' in:\n" + out);
        }
        // Sizes in the JVM's own syntax, megabytes (multiples of 64) or, from 10 GiB on, gigabytes.
        Matcher m = Pattern.compile("suggested JVM options: -Xmx(\\d+)m -XX:MaxDirectMemorySize=\\d+[mg]\n").matcher(out);
        assertTrue(m.find(), out);
        assertEquals(0, Long.parseLong(m.group(1)) % 64, out);
    }
}
