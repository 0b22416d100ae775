package io.kvgate.tools.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.control.clock.NanoClock;
import io.kvgate.tools.sim.EngineSimulator;
import io.kvgate.tools.sim.SimulatorConfig;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code --engine-metrics} against real simulators: the engines' own counters over the measured window say who
 * served the requests and how much of the prompt came from cache, in agreement with what the clients saw.
 */
@Timeout(60)
@Tag("system")
class EngineMetricsBenchSystemTest {
    private static SimulatorConfig engine() {
        return new SimulatorConfig().dialect(SimulatorConfig.Dialect.VLLM).model("m").ttftMs(0).itlMs(0)
            .prefillUsPerToken(0).blockSize(16).cacheBlocks(4096);
    }

    @Test
    void theReportSaysWhichEngineServedTheRequestsAndItsCacheHitRatio(@TempDir Path dir) throws Exception {
        try (EngineSimulator served = EngineSimulator.start(engine()); EngineSimulator idle = EngineSimulator.start(engine())) {
            BenchConfig.Builder b = BenchConfig.builder().target("sim=" + served.baseUrl()).model("m").progress(false)
                .arrival(ArrivalScheduler.Arrival.CONSTANT).rate(100).duration(1).timeout(10).drain(5)
                .workload(BenchConfig.Workload.SHARED_PREFIX).maxTokens(2).stream(true).out(dir.resolve("r.json"))
                .engineMetrics(served.baseUrl()).engineMetrics(idle.baseUrl() + "/");
            b.groups = 2;
            b.systemTokens = 200;
            b.questionTokens = 5;
            ByteArrayOutputStream log = new ByteArrayOutputStream();
            BenchReport report = BenchRunner.run(b.build(), NanoClock.SYSTEM, new PrintStream(log, true, StandardCharsets.UTF_8));
            TargetReport t = report.first();
            EngineShares e = report.engines(0);
            assertEquals(100, t.ok, log.toString(StandardCharsets.UTF_8));
            // No warm-up: the counters were read before the first request and after the last one settled.
            long counted = e.engines().get(0).requests();
            assertEquals(t.ok, counted, "counted by the engine vs by the client");
            assertEquals(0, e.engines().get(1).requests(), "nothing reached the other engine");
            assertEquals(2.0, e.busiestShareVsMean(), 0.01, "everything on one of two engines");
            assertTrue(e.hitRatio() > 0.5, "shared prefixes hit the engine's cache: " + e.hitRatio());
            assertEquals(t.cachedTokensRatio, e.hitRatio(), 0.02, "the engine's accounting agrees with the usage the clients saw");
            assertTrue(report.summary().contains("busiest share / mean 2.000"), report.summary());

            JsonNode json = new ObjectMapper().readTree(Files.readString(dir.resolve("r.json")));
            JsonNode engines = json.get("engines");
            assertEquals(counted, engines.get("requests").asLong());
            assertEquals(2.0, engines.get("busiest_share_vs_mean").asDouble(), 0.01);
            assertEquals(idle.baseUrl(), engines.at("/per_engine/1/url").asText());
            assertEquals(0.0, engines.at("/per_engine/1/share").asDouble());
            assertEquals(2, json.at("/config/engine_metrics").size());
            assertEquals(engines, json.at("/targets/0/engines"));
        }
    }
}
