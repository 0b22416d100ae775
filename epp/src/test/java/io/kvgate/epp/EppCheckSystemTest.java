package io.kvgate.epp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.epp.check.EppCheck;
import io.kvgate.tools.sim.EngineSimulator;
import io.kvgate.tools.sim.SimulatorConfig;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code epp-check} against kvgate's own picker: a gateway with {@code epp_listen} over two simulated engines passes
 * every protocol requirement, through the command line (exit 0) as through the API. The same check fails a picker
 * that breaks the protocol (the check can fail): a gateway whose model the check does not ask for answers every pick
 * with an ImmediateResponse, and the decision's requirements FAIL with exit status 1.
 */
@Tag("system")
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class EppCheckSystemTest {
    static SimulatorConfig fast() {
        return new SimulatorConfig().dialect(SimulatorConfig.Dialect.VLLM).model("m").ttftMs(0).itlMs(0).prefillUsPerToken(0);
    }

    static String yaml(String policy, EngineSimulator... sims) {
        StringBuilder eps = new StringBuilder();
        for (EngineSimulator s : sims) {
            eps.append("      - url: ").append(s.baseUrl()).append('\n');
        }
        return """
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            epp_listen: 127.0.0.1:0
            api_keys: [epp-key]
            health: {interval_ms: 60000}
            rules:
              - name: chat
                models: [m]
                policy: %s
                endpoints:
            %s""".formatted(policy, eps);
    }

    @Test
    void kvgatesPickerPassesEveryRequirement() throws Exception {
        try (EngineSimulator a = EngineSimulator.start(fast()); EngineSimulator b = EngineSimulator.start(fast());
             Gateway g = Gateway.start(GatewayConfig.parse(yaml("least_outstanding", a, b)))) {
            assertTrue(g.eppPort() > 0, "the picker is bound");
            List<EppCheck.Result> results = EppCheck.check(new EppCheck.Target("127.0.0.1", g.eppPort(), "m",
                "/v1/chat/completions", Map.of("authorization", "Bearer epp-key"), 20_000));
            assertTrue(results.size() >= 18, results.toString());
            assertEquals(List.of(), results.stream().filter(r -> !r.passed()).toList());

            ByteArrayOutputStream out = new ByteArrayOutputStream();
            int exit = EppCheck.run(new String[] {"--target", "127.0.0.1:" + g.eppPort(), "--model", "m",
                "--path", "/v1/completions", "--header", "Authorization: Bearer epp-key"},
                new PrintStream(out, true, StandardCharsets.UTF_8), System.err);
            String printed = out.toString(StandardCharsets.UTF_8);
            assertEquals(0, exit, printed);
            assertTrue(printed.contains("PASS  subset.empty") && printed.contains("requirements pass"), printed);
            assertEquals(0, a.stats().get("requests") + b.stats().get("requests"), "the check never reaches an engine");

            ByteArrayOutputStream load = new ByteArrayOutputStream();
            int loadExit = EppCheck.run(new String[] {"--target", "127.0.0.1:" + g.eppPort(), "--model", "m", "--header",
                "Authorization: Bearer epp-key", "--load", "--rate", "20", "--seconds", "1", "--prompt-bytes", "2000"},
                new PrintStream(load, true, StandardCharsets.UTF_8), System.err);
            String report = load.toString(StandardCharsets.UTF_8);
            assertEquals(0, loadExit, report);
            assertTrue(report.startsWith("{\"started\":20,\"ok\":20,\"failed\":0,\"missed\":0,"), "a bounded load run: " + report);
        }
    }

    @Test
    void aPickerThatNeverPicksFailsTheCheck() throws Exception {
        try (EngineSimulator a = EngineSimulator.start(fast());
             Gateway g = Gateway.start(GatewayConfig.parse(yaml("round_robin", a)))) {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            int exit = EppCheck.run(new String[] {"--target", "127.0.0.1:" + g.eppPort(), "--model", "m"},
                new PrintStream(out, true, StandardCharsets.UTF_8), System.err); // no API key: every pick is refused (401)
            String printed = out.toString(StandardCharsets.UTF_8);
            assertEquals(1, exit, printed);
            assertTrue(printed.contains("FAIL  pick.decision  ImmediateResponse 401"), printed);
            assertTrue(printed.contains("PASS  health.readiness"), printed);
        }
    }

    @Test
    void aWrongCommandLineIsAUsageError() {
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8);
        assertEquals(2, EppCheck.run(new String[] {"--model", "m"}, System.out, e));
        assertEquals(2, EppCheck.run(new String[] {"--target", "nohostport", "--model", "m"}, System.out, e));
        assertEquals(2, EppCheck.run(new String[] {"--target", "127.0.0.1:1", "--model", "m", "--header", "novalue"}, System.out, e));
        assertEquals(2, EppCheck.run(new String[] {"--bogus"}, System.out, e));
        String text = err.toString(StandardCharsets.UTF_8);
        assertTrue(text.contains("--target HOST:PORT and --model MODEL are required") && text.contains("must be HOST:PORT")
            && text.contains("'Name: value'") && text.contains("unknown option '--bogus'"), text);
    }
}
