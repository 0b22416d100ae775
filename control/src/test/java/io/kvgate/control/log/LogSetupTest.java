package io.kvgate.control.log;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.regex.Pattern;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.core.LoggerContext;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.parallel.Isolated;

/**
 * The operator log through Log4j: both formats carry an ISO-8601 UTC timestamp, the level and the logger; JSON lines
 * parse; the run-time level reaches Log4j. stderr is captured (the console appender follows System.err), and a
 * reconfiguration stops the asynchronous loggers after they wrote their queue.
 */
@Isolated // swaps System.err and the process-wide log configuration
class LogSetupTest {
    private static final Pattern ISO_UTC = Pattern.compile("\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}Z");
    private final PrintStream realErr = System.err;

    @AfterEach
    void restore() {
        System.setErr(realErr);
        LogSetup.configure(LogSetup.Format.TEXT, Log.Level.INFO);
    }

    /** Runs {@code body} with the log in {@code format} at {@code level} and returns the lines it wrote. */
    private List<String> captured(LogSetup.Format format, Log.Level level, Runnable body) {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        System.setErr(new PrintStream(bytes, true, StandardCharsets.UTF_8));
        LogSetup.configure(format, level);
        body.run();
        LogSetup.configure(LogSetup.Format.TEXT, Log.Level.INFO); // stops the old loggers: their queue is written first
        System.setErr(realErr);
        return bytes.toString(StandardCharsets.UTF_8).lines().toList();
    }

    @Test
    void jsonLinesParseAndCarryTimeLevelLoggerMessage() throws Exception {
        List<String> lines = captured(LogSetup.Format.JSON, Log.Level.INFO, () -> {
            Log.info("configuration version 2 applied: \"quoted\"\nsecond line");
            Log.warn("a warning");
            Log.debug("not at info");
        });
        assertEquals(2, lines.size(), String.join("\n", lines));
        ObjectMapper json = new ObjectMapper();
        JsonNode first = json.readTree(lines.get(0));
        assertTrue(ISO_UTC.matcher(first.path("time").asText()).matches(), lines.get(0));
        assertEquals("INFO", first.path("level").asText());
        assertEquals("kvgate", first.path("logger").asText());
        assertEquals("configuration version 2 applied: \"quoted\"\nsecond line", first.path("message").asText());
        assertFalse(first.has("error"), "no exception, no error member");
        assertEquals("WARN", json.readTree(lines.get(1)).path("level").asText());
    }

    @Test
    void textLinesStartWithAnIsoUtcTimestampAndTheLevel() {
        List<String> lines = captured(LogSetup.Format.TEXT, Log.Level.INFO, () -> Log.error("engine down"));
        assertEquals(1, lines.size(), String.join("\n", lines));
        String line = lines.get(0);
        assertTrue(ISO_UTC.matcher(line.substring(0, 24)).matches(), line);
        assertTrue(line.endsWith(" ERROR kvgate: engine down"), line);
    }

    @Test
    void runTimeLevelChangeReachesLog4j() {
        List<String> lines = captured(LogSetup.Format.TEXT, Log.Level.INFO, () -> {
            Log.debug("hidden");
            Log.level(Log.Level.DEBUG);
            assertEquals(org.apache.logging.log4j.Level.DEBUG, ((LoggerContext) LogManager.getContext(false))
                .getConfiguration().getLoggerConfig(Log.LOGGER).getLevel());
            Log.debug("shown");
            Log.level(Log.Level.ERROR);
            Log.warn("hidden too");
        });
        assertEquals(1, lines.size(), String.join("\n", lines));
        assertTrue(lines.get(0).endsWith("DEBUG kvgate: shown"), lines.get(0));
    }

    @Test
    void formatNamesParse() {
        assertEquals(LogSetup.Format.JSON, LogSetup.parseFormat(" JSON "));
        assertEquals(LogSetup.Format.TEXT, LogSetup.parseFormat("text"));
        assertNull(LogSetup.parseFormat("xml"));
    }
}
