package io.kvgate.control.log;

import java.net.URI;
import java.util.Locale;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.core.LoggerContext;
import org.apache.logging.log4j.core.appender.ConsoleAppender;
import org.apache.logging.log4j.core.config.Configuration;
import org.apache.logging.log4j.core.config.ConfigurationFactory;
import org.apache.logging.log4j.core.config.ConfigurationSource;
import org.apache.logging.log4j.core.config.Configurator;
import org.apache.logging.log4j.core.config.LoggerConfig;
import org.apache.logging.log4j.core.config.builder.api.AppenderComponentBuilder;
import org.apache.logging.log4j.core.config.builder.api.ConfigurationBuilder;
import org.apache.logging.log4j.core.config.builder.api.ConfigurationBuilderFactory;
import org.apache.logging.log4j.core.config.builder.impl.BuiltConfiguration;

/**
 * The operator log's Log4j 2 configuration, built in code: no {@code log4j2.xml} is searched for or read, so what
 * the log looks like follows {@code logging.format} and {@code logging.level} and nothing else. One appender on
 * stderr, either text ({@code 2026-12-07T14:33:19.123Z INFO  kvgate: message}) or JSON (Log4j's
 * JsonTemplateLayout, one object per line: {@code time}, {@code level}, {@code logger}, {@code thread},
 * {@code message}, {@code error}). Loggers are asynchronous (Log4j's AsyncLogger on the Disruptor): an I/O thread
 * that logs hands the line over and goes on. The facade's logger ({@link Log#LOGGER}) follows the operator's level;
 * libraries' loggers stay at {@code warn} (Netty at debug would drown the gateway's own lines).
 *
 * <p>{@link Factory} is named by {@code -Dlog4j2.configurationFactory} in {@code deploy/jvm.options}, so even a
 * library that logs before the gateway configures its log gets this configuration (default: text, info).
 */
public final class LogSetup {
    public enum Format { TEXT, JSON }

    /** Every line's timestamp: ISO-8601, UTC, milliseconds. */
    static final String TIME_PATTERN = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'";

    static final String TEXT_PATTERN = "%d{" + TIME_PATTERN + "}{UTC} %-5level %logger: %message%n%throwable";

    /** The JSON line's members (JsonTemplateLayout's resolvers); an absent exception writes no {@code error}. */
    static final String JSON_TEMPLATE = "{"
        + "\"time\":{\"$resolver\":\"timestamp\",\"pattern\":{\"format\":\"" + TIME_PATTERN + "\",\"timeZone\":\"UTC\"}},"
        + "\"level\":{\"$resolver\":\"level\",\"field\":\"name\"},"
        + "\"logger\":{\"$resolver\":\"logger\",\"field\":\"name\"},"
        + "\"thread\":{\"$resolver\":\"thread\",\"field\":\"name\"},"
        + "\"message\":{\"$resolver\":\"message\",\"stringified\":true},"
        + "\"error\":{\"$resolver\":\"exception\",\"field\":\"stackTrace\",\"stackTrace\":{\"stringified\":true}}"
        + "}";

    private static volatile Format format = Format.TEXT;
    private static volatile boolean configured;
    /**
     * The facade's level as last set ({@link Log#level(Log.Level)} reports each change here). Log4j's configuration
     * factory reads this, never {@link Log}: a thread whose first Log4j use (a Netty logger) holds Log4j's
     * initialization while another thread's {@code Log.<clinit>} configures Log4j would otherwise wait on each other
     * (seen: two test classes starting together hung their JVM).
     */
    private static volatile Log.Level level = Log.Level.INFO;

    private LogSetup() {}

    /** {@code text|json} (any case); null when neither. */
    public static Format parseFormat(String s) {
        if (s == null) {
            return null;
        }
        return switch (s.trim().toLowerCase(Locale.ROOT)) {
            case "text" -> Format.TEXT;
            case "json" -> Format.JSON;
            default -> null;
        };
    }

    public static Format format() {
        return format;
    }

    /**
     * Applies {@code logging.format} and {@code logging.level}: the operator log is rebuilt with them (lines already
     * handed to the asynchronous loggers are written first, in the old format).
     */
    public static synchronized void configure(Format f, Log.Level level) {
        format = f;
        configured = true;
        Log.level(level); // the facade's filter; the rebuilt configuration below carries the same level
        Configurator.reconfigure(build(f, level));
    }

    /** Installs the default configuration (text, the facade's level) unless one was applied already. */
    static synchronized void ensureConfigured() {
        if (!configured) {
            configured = true;
            Configurator.reconfigure(build(format, level));
        }
    }

    /** The run-time level change ({@code ctl log-level}): the facade logger's level in the live configuration. */
    static void applyLevel(Log.Level level) {
        LogSetup.level = level;
        if (!(LogManager.getContext(false) instanceof LoggerContext ctx)) {
            return;
        }
        LoggerConfig facade = ctx.getConfiguration().getLoggers().get(Log.LOGGER);
        if (facade != null) {
            facade.setLevel(log4j(level));
            ctx.updateLoggers();
        }
    }

    /** Flushes and stops the operator log (the process is exiting: the asynchronous loggers' queue is written). */
    public static void shutdown() {
        LogManager.shutdown();
    }

    static org.apache.logging.log4j.Level log4j(Log.Level l) {
        return switch (l) {
            case ERROR -> org.apache.logging.log4j.Level.ERROR;
            case WARN -> org.apache.logging.log4j.Level.WARN;
            case INFO -> org.apache.logging.log4j.Level.INFO;
            case DEBUG -> org.apache.logging.log4j.Level.DEBUG;
        };
    }

    static Configuration build(Format f, Log.Level level) {
        ConfigurationBuilder<BuiltConfiguration> b = ConfigurationBuilderFactory.newConfigurationBuilder();
        b.setConfigurationName("kvgate");
        b.setStatusLevel(org.apache.logging.log4j.Level.ERROR);
        // The gateway's own shutdown hook drains, logs, then calls shutdown(): Log4j's hook would stop the log first.
        b.setShutdownHook("disable");
        // follow: the stream is System.err as it is when a line is written (a test or a tool that swaps it is obeyed).
        AppenderComponentBuilder stderr = b.newAppender("stderr", "Console")
            .addAttribute("target", ConsoleAppender.Target.SYSTEM_ERR).addAttribute("follow", true);
        if (f == Format.JSON) {
            stderr.add(b.newLayout("JsonTemplateLayout").addAttribute("eventTemplate", JSON_TEMPLATE));
        } else {
            stderr.add(b.newLayout("PatternLayout").addAttribute("pattern", TEXT_PATTERN));
        }
        b.add(stderr);
        b.add(b.newAsyncLogger(Log.LOGGER, log4j(level)).add(b.newAppenderRef("stderr")).addAttribute("additivity", false));
        b.add(b.newAsyncRootLogger(org.apache.logging.log4j.Level.WARN).add(b.newAppenderRef("stderr")));
        return b.build(false);
    }

    /**
     * The configuration factory {@code deploy/jvm.options} names: whatever starts Log4j first (the facade, or a
     * library's SLF4J logger) gets the gateway's configuration instead of a file search.
     */
    public static final class Factory extends ConfigurationFactory {
        @Override
        protected String[] getSupportedTypes() {
            return new String[] {"*"};
        }

        @Override
        public Configuration getConfiguration(LoggerContext ctx, ConfigurationSource source) {
            return build(format, level);
        }

        @Override
        public Configuration getConfiguration(LoggerContext ctx, String name, URI location) {
            return build(format, level);
        }

        @Override
        public Configuration getConfiguration(LoggerContext ctx, String name, URI location, ClassLoader loader) {
            return build(format, level);
        }
    }
}
