package io.kvgate.tools.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.testkit.TestPorts;
import io.kvgate.tools.sim.EngineSimulator;
import io.kvgate.tools.sim.SimulatorConfig;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code ./kvgate ctl doctor} over the control socket against a gateway in front of the vLLM simulator (issue #36): an
 * engine keying at another block size, or hashing with another seed, is reported with the fix and exit status 1; an
 * engine that matches passes with 0.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("system")
class DoctorCommandSystemTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    @TempDir
    Path dir;
    private final ByteArrayOutputStream out = new ByteArrayOutputStream();
    private final ByteArrayOutputStream err = new ByteArrayOutputStream();

    @Test
    void aMatchingEngineIsCleanAndExitsZero() throws Exception {
        Outcome o = doctor(new SimulatorConfig().blockSize(16).hashSeed("0"), 16, "0");
        assertEquals(0, o.status, o.text + o.err);
        assertTrue(o.text.contains("doctor: every check that could be judged matches"), o.text);
        JsonNode report = JSON.readTree(o.json);
        assertTrue(report.get("ok").asBoolean(), o.json);
        List<String> ok = checks(report, "ok");
        assertTrue(ok.contains("hash.hash_contract"), ok.toString());
        assertTrue(ok.contains("block_size"), ok.toString());
        assertTrue(ok.contains("dp_ranks"), ok.toString());
        assertTrue(ok.contains("context_length"), ok.toString());
    }

    /** vLLM with DCP 2 (or a backend-picked size) keys at 32 while the rule says 16. */
    @Test
    void aWrongBlockSizeIsReportedWithItsFix() throws Exception {
        Outcome o = doctor(new SimulatorConfig().blockSize(32).hashSeed("0"), 16, "0");
        assertEquals(1, o.status, o.text + o.err);
        assertTrue(o.text.contains("fix: set the rule's block_size: 32"), o.text);
        JsonNode report = JSON.readTree(o.json);
        assertTrue(!report.get("ok").asBoolean() && report.get("mismatches").asInt() >= 2, o.json);
        assertTrue(checks(report, "mismatch").containsAll(List.of("block_size", "hash.hash_contract")), o.json);
    }

    /** vLLM PR #51875: sha256_cbor without PYTHONHASHSEED seeds from "vllm-none-hash"; the rule says "0". */
    @Test
    void aWrongSeedIsReportedWithTheEnginesSeed() throws Exception {
        Outcome o = doctor(new SimulatorConfig().blockSize(16).hashSeed("vllm-none-hash"), 16, "0");
        assertEquals(1, o.status, o.text + o.err);
        assertTrue(o.text.contains("fix: set the rule's hash_seed: \"vllm-none-hash\""), o.text);
        assertTrue(checks(JSON.readTree(o.json), "ok").contains("block_size"), o.json);
    }

    @Test
    void anUnknownRuleAndABadTimeoutAreRefused() throws Exception {
        Outcome o = doctor(new SimulatorConfig().blockSize(16).hashSeed("0"), 16, "0", "nope");
        assertEquals(1, o.status, o.text + o.err);
        assertTrue(o.err.contains("no rule named 'nope'"), o.err);
    }

    /**
     * TensorRT-LLM (issue #36 item 10, T9/T11): its /prometheus/metrics states its tokens per block; a rule keyed at
     * another block size is reported with the fix, and an engine without return_perf_metrics with that fix.
     */
    @Test
    void trtllmsBlockSizeIsCheckedOnItsPrometheusPageAndAMissingPageNamesTheFlag() throws Exception {
        Outcome o = doctorTrtllm(new SimulatorConfig().enableMetrics(true).blockSize(64), 32);
        assertEquals(1, o.status, o.text + o.err);
        assertTrue(o.text.contains("fix: set the rule's block_size: 64"), o.text);
        JsonNode report = JSON.readTree(o.json);
        assertEquals(List.of("tokens_per_block"), checks(report, "mismatch"), o.json);
        assertTrue(checks(report, "ok").contains("metrics"), o.json);
        assertTrue(o.json.contains("/prometheus/metrics carries the load families"), o.json);

        Outcome clean = doctorTrtllm(new SimulatorConfig().enableMetrics(true).blockSize(32), 32);
        assertEquals(0, clean.status, clean.text + clean.err);
        assertTrue(checks(JSON.readTree(clean.json), "ok").containsAll(List.of("metrics", "tokens_per_block")), clean.json);

        Outcome bare = doctorTrtllm(new SimulatorConfig().blockSize(32), 32);
        assertEquals(1, bare.status, bare.text + bare.err);
        assertEquals(List.of("metrics"), checks(JSON.readTree(bare.json), "mismatch"), bare.json);
        assertTrue(bare.text.contains("return_perf_metrics: true"), bare.text);
    }

    private Outcome doctorTrtllm(SimulatorConfig sim, int ruleBlockSize) throws Exception {
        try (EngineSimulator engine = EngineSimulator.start(sim.dialect(SimulatorConfig.Dialect.TRTLLM).model("m").ttftMs(1)
            .itlMs(1))) {
            Path config = dir.resolve("kvgate.yaml");
            Files.writeString(config, """
                listen: 127.0.0.1:0
                admin_listen: 127.0.0.1:0
                health: {interval_ms: 200}
                load: {scrape_interval_ms: 50}
                rules:
                  - name: trt
                    models: [m]
                    engine: trtllm
                    policy: least_outstanding
                    block_size: %d
                    max_model_len: 8192
                    endpoints:
                      - url: %s
                """.formatted(ruleBlockSize, engine.baseUrl()));
            Path socket = dir.resolve("ctl.sock");
            Gateway gw = Gateway.start(new Gateway.Options(GatewayConfig.load(config), NanoClock.SYSTEM, config, socket));
            try {
                List<String> args = List.of("--socket", socket.toString(), "doctor", "--timeout-ms", "3000");
                List<String> json = new ArrayList<>(args);
                json.add("--json");
                Outcome last = null;
                for (long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30); ; ) {
                    int status = run(args);
                    String text = out.toString(StandardCharsets.UTF_8);
                    String errText = err.toString(StandardCharsets.UTF_8);
                    run(json);
                    last = new Outcome(status, text, out.toString(StandardCharsets.UTF_8), errText);
                    // until the page was scraped (the first scrape runs at start; a round every 50 ms) before BOTH runs:
                    // the text run comes first, so a scrape landing between the two left its status and text unscraped
                    if (!last.text.contains("not scraped yet") && !last.json.contains("not scraped yet")
                        || System.nanoTime() - deadline > 0) {
                        return last;
                    }
                    TimeUnit.MILLISECONDS.sleep(50);
                }
            } finally {
                gw.close(100);
            }
        }
    }

    private record Outcome(int status, String text, String json, String err) {}

    private Outcome doctor(SimulatorConfig sim, int ruleBlockSize, String ruleSeed, String... extra) throws Exception {
        int kv = TestPorts.free();
        try (EngineSimulator engine = EngineSimulator.start(sim.dialect(SimulatorConfig.Dialect.VLLM).model("m").ttftMs(1)
            .itlMs(1).kvEvents("tcp://127.0.0.1:" + kv).kvEventsMode("bind"))) {
            Path config = dir.resolve("kvgate.yaml");
            Files.writeString(config, """
                listen: 127.0.0.1:0
                admin_listen: 127.0.0.1:0
                health: {interval_ms: 200}
                load: {scrape_interval_ms: 100}
                rules:
                  - name: kv
                    models: [m]
                    engine: vllm
                    policy: kv_exact
                    block_size: %d
                    hash_seed: "%s"
                    endpoints:
                      - url: %s
                        kv_events: tcp://127.0.0.1:%d
                """.formatted(ruleBlockSize, ruleSeed, engine.baseUrl(), kv));
            Path socket = dir.resolve("ctl.sock");
            Gateway gw = Gateway.start(new Gateway.Options(GatewayConfig.load(config), NanoClock.SYSTEM, config, socket));
            try {
                List<String> args = new ArrayList<>(List.of("--socket", socket.toString(), "doctor", "--timeout-ms", "3000"));
                args.addAll(List.of(extra));
                // The subscription and the first probes settle in the first rounds: ask until the report is complete
                // (the parity probe's events arrived and the metrics were scraped), bounded.
                Outcome last = null;
                for (int round = 0; round < 6; round++) {
                    int status = run(args);
                    String text = out.toString(StandardCharsets.UTF_8);
                    String errText = err.toString(StandardCharsets.UTF_8);
                    List<String> json = new ArrayList<>(args);
                    json.add("--json");
                    run(json);
                    last = new Outcome(status, text, out.toString(StandardCharsets.UTF_8), errText);
                    // complete in both runs (the text run comes first: an event landing between them left it incomplete)
                    if (extra.length > 0 || (!last.json.contains("no stored KV event yet") && !last.json.contains("no_events")
                        && !last.text.contains("no stored KV event yet"))) {
                        break;
                    }
                }
                return last;
            } finally {
                gw.close(100);
            }
        }
    }

    private int run(List<String> args) {
        out.reset();
        err.reset();
        return ControlCommand.run(args.toArray(String[]::new), new PrintStream(out, true, StandardCharsets.UTF_8),
            new PrintStream(err, true, StandardCharsets.UTF_8));
    }

    private static List<String> checks(JsonNode report, String status) {
        List<String> out = new ArrayList<>();
        for (JsonNode c : report.get("checks")) {
            if (c.get("status").asText().equals(status)) {
                out.add(c.get("check").asText());
            }
        }
        return out;
    }
}
