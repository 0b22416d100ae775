package io.kvgate.tools.sim;

import static io.kvgate.tools.sim.SimHttp.get;
import static io.kvgate.tools.sim.SimHttp.json;
import static io.kvgate.tools.sim.SimHttp.post;
import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The planned TTFT of each request (recorded in /sim/stats) charges prefill time only for uncached tokens. */
@Timeout(60)
@Tag("system")
class LatencyAccountingTest {

    @Test
    void cacheHitsShortenThePlannedTimeToFirstToken() throws Exception {
        SimulatorConfig c = new SimulatorConfig().dialect(Dialect.VLLM).model("m").ttftMs(1).itlMs(0)
            .prefillUsPerToken(10);
        try (EngineSimulator sim = EngineSimulator.start(c)) {
            StringBuilder prompt = new StringBuilder("[");
            for (int i = 0; i < 100; i++) {
                prompt.append(i == 0 ? "" : ",").append(7000 + i);
            }
            String body = "{\"model\":\"m\",\"prompt\":" + prompt + "],\"max_tokens\":1}";
            post(sim, "/v1/completions", body);
            post(sim, "/v1/completions", body);
            JsonNode recent = json(get(sim, "/sim/stats")).get("recent");
            // cold: 1 ms + 100 tokens x 10 us; warm: 96 of 100 tokens cached (6 full blocks), 4 computed
            assertEquals(1_000 + 100 * 10, recent.get(0).get("planned_ttft_us").asLong());
            assertEquals(96, recent.get(1).get("cached_tokens").asInt());
            assertEquals(1_000 + 4 * 10, recent.get(1).get("planned_ttft_us").asLong());
        }
    }
}
