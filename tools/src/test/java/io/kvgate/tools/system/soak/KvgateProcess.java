package io.kvgate.tools.system.soak;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * One {@code ./kvgate <command>} run as its own JVM, as the launcher runs it ({@code java @deploy/jvm.options ...
 * io.kvgate.tools.Main <command> ...}), on the test's own class path so it runs the code under test without a
 * packaged jar. Its output goes to a log file that is kept for diagnosis. Every process is ended by its PID.
 */
final class KvgateProcess implements AutoCloseable {
    private final String name;
    private final Process process;
    private final Path log;

    private KvgateProcess(String name, Process process, Path log) {
        this.name = name;
        this.process = process;
        this.log = log;
    }

    /** Starts {@code kvgate <args>} with {@code jvmOptions} before the main class; output to {@code log}. */
    static KvgateProcess start(String name, Path repoRoot, Path log, List<String> jvmOptions, List<String> args)
        throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.add("@" + repoRoot.resolve("deploy/jvm.options"));
        cmd.addAll(jvmOptions);
        cmd.add("-Dkvgate.home=" + repoRoot);
        cmd.add("-cp");
        cmd.add(testClassPath());
        cmd.add("io.kvgate.tools.Main");
        cmd.addAll(args);
        Files.createDirectories(log.getParent());
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        return new KvgateProcess(name, p, log);
    }

    /**
     * The class path of the code under test. Surefire may start the test JVM from a manifest-only jar, so
     * {@code java.class.path} can be that one jar; surefire also publishes the real path.
     */
    private static String testClassPath() {
        String cp = System.getProperty("surefire.test.class.path");
        return cp != null && !cp.isBlank() ? cp : System.getProperty("java.class.path");
    }

    String name() {
        return name;
    }

    long pid() {
        return process.pid();
    }

    boolean alive() {
        return process.isAlive();
    }

    String logText() {
        try {
            return Files.readString(log, StandardCharsets.UTF_8);
        } catch (IOException e) {
            return "(log " + log + " unreadable: " + e + ")";
        }
    }

    String logTail(int chars) {
        String s = logText();
        return s.length() <= chars ? s : "..." + s.substring(s.length() - chars);
    }

    /** Waits (bounded) for a log line matching {@code line}; fails at once, with the log, if the process exits. */
    Matcher awaitLine(Pattern line, Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            Matcher m = line.matcher(logText());
            if (m.find()) {
                return m;
            }
            if (!process.isAlive()) {
                throw new AssertionError(name + " (pid " + pid() + ") exited with " + process.exitValue()
                    + " before logging /" + line + "/:\n" + logTail(4000));
            }
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError(name + " (pid " + pid() + ") did not log /" + line + "/ within "
                    + timeout.toSeconds() + " s:\n" + logTail(4000));
            }
            TimeUnit.MILLISECONDS.sleep(50);
        }
    }

    /** Resident set size from {@code /proc/PID/status} (VmRSS), in KiB; -1 when the process is gone. */
    long rssKb() {
        try {
            for (String l : Files.readAllLines(Path.of("/proc/" + pid() + "/status"))) {
                if (l.startsWith("VmRSS:")) {
                    return Long.parseLong(l.substring(6).trim().split("\\s+")[0]);
                }
            }
        } catch (IOException | RuntimeException e) {
            return -1;
        }
        return -1;
    }

    /** Sends {@code signal} (e.g. {@code HUP}) to this process by its PID. */
    void signal(String signal) throws IOException, InterruptedException {
        Process kill = new ProcessBuilder("kill", "-s", signal, Long.toString(pid())).redirectErrorStream(true).start();
        if (!kill.waitFor(10, TimeUnit.SECONDS) || kill.exitValue() != 0) {
            kill.destroyForcibly();
            throw new AssertionError("kill -s " + signal + " " + pid() + " failed: "
                + new String(kill.getInputStream().readAllBytes(), StandardCharsets.UTF_8));
        }
    }

    /** SIGKILL, as a crashing engine dies: no shutdown hook, sockets reset by the kernel. Waits until it is gone. */
    void kill() throws InterruptedException {
        process.destroyForcibly();
        if (!process.waitFor(30, TimeUnit.SECONDS)) {
            throw new AssertionError(name + " (pid " + pid() + ") survived SIGKILL for 30 s");
        }
    }

    /** SIGTERM (the process drains and exits), SIGKILL after 10 s. */
    @Override
    public void close() {
        if (!process.isAlive()) {
            return;
        }
        process.destroy();
        try {
            if (!process.waitFor(10, TimeUnit.SECONDS)) {
                process.destroyForcibly();
                process.waitFor(10, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            process.destroyForcibly();
            Thread.currentThread().interrupt();
        }
    }
}
