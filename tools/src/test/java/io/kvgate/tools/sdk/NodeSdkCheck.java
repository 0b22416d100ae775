package io.kvgate.tools.sdk;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Runs {@code tools/src/test/node/sdk-check.mjs} (the official OpenAI Node SDK) against a base URL, as a subprocess
 * with a hard deadline, and parses its one-JSON-line-per-scenario report. Also checks the prerequisites (node on the
 * PATH, the pinned {@code openai} package installed by {@code .ci/setup}) and explains how to get them.
 *
 * <p>Threading: plain blocking calls from the test thread; instances are immutable results.
 */
final class NodeSdkCheck {
    static final String SKIP_PROPERTY = "kvgate.skipNodeSdk";
    /** The environment variable that hands the script a limited tenant's key. */
    static final String TENANT_KEY_ENV = "KVGATE_SDK_TENANT_KEY";
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final long NODE_VERSION_TIMEOUT_MS = 10_000;
    private static final int MIN_NODE_MAJOR = 20;
    /** Environment the SDK reads; the run must not depend on the caller's OpenAI setup (OPENAI_LOG even writes to stdout). */
    private static final List<String> SCRUBBED_ENV = List.of("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID",
        "OPENAI_PROJECT_ID", "OPENAI_LOG", "OPENAI_WEBHOOK_SECRET", "NODE_OPTIONS");

    /** What one run of the script produced. */
    record Result(int exitCode, String stdout, String stderr, Map<String, JsonNode> scenarios) {
        JsonNode scenario(String name) {
            JsonNode n = scenarios.get(name);
            if (n == null) {
                throw new AssertionError("sdk-check.mjs printed no line for scenario '" + name + "'\n" + diagnostics());
            }
            return n;
        }

        String diagnostics() {
            return "exit code " + exitCode + "\n--- stdout ---\n" + stdout + "\n--- stderr ---\n" + stderr;
        }
    }

    private final Path nodeDir;
    private final String pinnedOpenAiVersion;

    private NodeSdkCheck(Path nodeDir, String pinnedOpenAiVersion) {
        this.nodeDir = nodeDir;
        this.pinnedOpenAiVersion = pinnedOpenAiVersion;
    }

    String pinnedOpenAiVersion() {
        return pinnedOpenAiVersion;
    }

    /**
     * Verifies node and the installed SDK, or throws an AssertionError that says how to fix it: a missing toolchain
     * must fail the build loudly, not skip the only test that speaks to the gateway through a real SDK.
     */
    static NodeSdkCheck locate(Path repoRoot) throws IOException, InterruptedException {
        Path nodeDir = repoRoot.resolve("tools/src/test/node");
        String fix = "run `./kvgate test` (installs it on first use) or `.ci/setup` (npm ci in tools/src/test/node), "
            + "or opt out explicitly with -D"
            + SKIP_PROPERTY + "=true";
        Path packageJson = nodeDir.resolve("package.json");
        if (!Files.isRegularFile(packageJson)) {
            throw new AssertionError("missing " + packageJson);
        }
        String pinned = JSON.readTree(packageJson.toFile()).path("dependencies").path("openai").asText("");
        if (!pinned.matches("6\\.\\d+\\.\\d+")) {
            throw new AssertionError(packageJson + ": dependency 'openai' must be pinned to an exact 6.x version, found '" + pinned + "'");
        }
        String nodeVersion = nodeVersion();
        if (nodeVersion == null) {
            throw new AssertionError("Node.js is not on the PATH (`node --version` failed): the OpenAI Node SDK system "
                + "test needs Node " + MIN_NODE_MAJOR + "+ and npm; install them, then " + fix);
        }
        int major = Integer.parseInt(nodeVersion.replaceFirst("^v?(\\d+).*$", "$1"));
        if (major < MIN_NODE_MAJOR) {
            throw new AssertionError("Node.js " + nodeVersion + " is too old: the OpenAI Node SDK system test needs Node "
                + MIN_NODE_MAJOR + "+");
        }
        Path installed = nodeDir.resolve("node_modules/openai/package.json");
        if (!Files.isRegularFile(installed)) {
            throw new AssertionError("the OpenAI Node SDK is not installed (" + installed + " is missing): " + fix);
        }
        String version = JSON.readTree(installed.toFile()).path("version").asText("");
        if (!version.equals(pinned)) {
            throw new AssertionError("installed openai " + version + " differs from the pinned " + pinned + ": " + fix);
        }
        return new NodeSdkCheck(nodeDir, pinned);
    }

    private static String nodeVersion() throws InterruptedException {
        try {
            Process p = new ProcessBuilder("node", "--version").redirectErrorStream(true).start();
            if (!p.waitFor(NODE_VERSION_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
                p.destroyForcibly();
                return null;
            }
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
            return p.exitValue() == 0 && out.matches("v?\\d+\\..*") ? out : null;
        } catch (IOException e) {
            return null;
        }
    }

    /**
     * Runs the script against {@code baseUrl}; on the deadline the process tree is killed and the run fails with
     * whatever it printed so far.
     */
    Result run(String baseUrl, long timeoutMs) throws IOException, InterruptedException {
        return run(baseUrl, null, timeoutMs);
    }

    /**
     * As {@link #run(String, long)}, with the key of a tenant limited to 2 requests per minute for the script's
     * {@code tenant_rate_limit} scenario ({@code KVGATE_SDK_TENANT_KEY}; null: the scenario is skipped).
     */
    Result run(String baseUrl, String tenantKey, long timeoutMs) throws IOException, InterruptedException {
        Path out = Files.createTempFile("kvgate-sdk-check", ".out");
        Path err = Files.createTempFile("kvgate-sdk-check", ".err");
        try {
            ProcessBuilder pb = new ProcessBuilder("node", "sdk-check.mjs", baseUrl)
                .directory(nodeDir.toFile())
                .redirectOutput(out.toFile())
                .redirectError(err.toFile());
            SCRUBBED_ENV.forEach(pb.environment()::remove);
            pb.environment().remove(TENANT_KEY_ENV);
            if (tenantKey != null) {
                pb.environment().put(TENANT_KEY_ENV, tenantKey);
            }
            Process p = pb.start();
            boolean finished = p.waitFor(timeoutMs, TimeUnit.MILLISECONDS);
            if (!finished) {
                p.descendants().forEach(ProcessHandle::destroyForcibly);
                p.destroyForcibly();
                p.waitFor(10, TimeUnit.SECONDS);
            }
            String stdout = Files.readString(out, StandardCharsets.UTF_8);
            String stderr = Files.readString(err, StandardCharsets.UTF_8);
            if (!finished) {
                throw new AssertionError("node sdk-check.mjs " + baseUrl + " did not finish within " + timeoutMs
                    + " ms and was killed\n--- stdout ---\n" + stdout + "\n--- stderr ---\n" + stderr);
            }
            return new Result(p.exitValue(), stdout, stderr, parse(stdout));
        } finally {
            Files.deleteIfExists(out);
            Files.deleteIfExists(err);
        }
    }

    private static Map<String, JsonNode> parse(String stdout) throws IOException {
        Map<String, JsonNode> byScenario = new LinkedHashMap<>();
        for (String line : stdout.split("\n")) {
            if (!line.startsWith("{\"scenario\":")) {
                continue; // anything else on stdout is noise from the runtime, not a report line
            }
            JsonNode n = JSON.readTree(line);
            byScenario.put(n.get("scenario").asText(), n);
        }
        return byScenario;
    }
}
