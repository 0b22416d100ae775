package io.kvgate.tools.launcher;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/** One finished process: exit code, stdout, stderr. Started with a hard timeout and ended by its PID if it overruns. */
record Launched(int exit, String out, String err) {

    static final Path REPO = Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize();

    static Launched run(Path dir, Map<String, String> env, List<String> command) throws IOException, InterruptedException {
        return run(dir, env, false, command);
    }

    /** Runs with exactly {@code env}: nothing inherited from the test JVM (no PATH to the repository, no JAVA_HOME). */
    static Launched runClean(Path dir, Map<String, String> env, String... command) throws IOException, InterruptedException {
        return run(dir, env, true, List.of(command));
    }

    private static Launched run(Path dir, Map<String, String> env, boolean clean, List<String> command)
        throws IOException, InterruptedException {
        Path out = Files.createTempFile("launched", ".out");
        Path err = Files.createTempFile("launched", ".err");
        try {
            ProcessBuilder pb = new ProcessBuilder(command).directory(dir.toFile())
                .redirectOutput(out.toFile()).redirectError(err.toFile()).redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
            if (clean) {
                pb.environment().clear();
            }
            pb.environment().putAll(env);
            Process p = pb.start();
            if (!p.waitFor(120, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new AssertionError(command + " did not finish in 120 s");
            }
            return new Launched(p.exitValue(), Files.readString(out, StandardCharsets.UTF_8), Files.readString(err, StandardCharsets.UTF_8));
        } finally {
            Files.deleteIfExists(out);
            Files.deleteIfExists(err);
        }
    }

    /** The JVM options the launchers give the command line {@code args}, as deploy/kvgate-java.sh computes them (one per line). */
    static List<String> launcherJvmArgs(String... args) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>(List.of("bash", "-c",
            ". deploy/kvgate-java.sh && kvgate_jvm_args deploy/jvm.options \"$@\" && printf '%s\\n' \"${KVGATE_JVM_ARGS[@]}\"",
            "args"));
        cmd.addAll(List.of(args));
        Launched l = run(REPO, Map.of(), cmd);
        if (l.exit() != 0) {
            throw new AssertionError("kvgate-java.sh failed: " + l.err());
        }
        return l.out().lines().toList();
    }

    /** {@code kvgate <args>} as the launcher runs it, on the test's class path (the code under test, no packaged jar). */
    static Launched kvgate(String... args) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.addAll(launcherJvmArgs(args));
        cmd.add("-Dkvgate.home=" + REPO);
        cmd.add("-cp");
        String cp = System.getProperty("surefire.test.class.path");
        cmd.add(cp != null && !cp.isBlank() ? cp : System.getProperty("java.class.path"));
        cmd.add("io.kvgate.tools.Main");
        cmd.addAll(List.of(args));
        return run(REPO, Map.of(), cmd);
    }
}
