package io.kvgate.tools.sim;

import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * How much one simulator (one event loop) serves, so benchmarks know when the simulator, not the gateway, is the
 * bottleneck. Prints numbers; asserts only that every request succeeded. Run with
 * {@code -Dtest=SimulatorCapacitySoakTest -Dsurefire.excludedGroups=none}.
 */
@Tag("soak")
@Timeout(120)
class SimulatorCapacitySoakTest {

    @Test
    void streamingAndNonStreamingThroughput() throws Exception {
        for (boolean stream : new boolean[] {false, true}) {
            try (EngineSimulator sim = EngineSimulator.start(new SimulatorConfig().dialect(Dialect.VLLM).model("m")
                .ttftMs(0).itlMs(0).prefillUsPerToken(0).maxConcurrency(256))) {
                String body = SimHttp.chat("m", "a prompt of a few words for the capacity check", "\"max_tokens\":16"
                    + (stream ? ",\"stream\":true" : ""));
                AtomicLong ok = new AtomicLong();
                AtomicLong failed = new AtomicLong();
                long endNs = System.nanoTime() + 5_000_000_000L;
                List<Thread> threads = new ArrayList<>();
                HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
                for (int t = 0; t < 32; t++) {
                    Thread th = Thread.ofVirtual().start(() -> {
                        HttpRequest req = HttpRequest.newBuilder(URI.create(sim.baseUrl() + "/v1/chat/completions"))
                            .POST(HttpRequest.BodyPublishers.ofString(body)).build();
                        while (System.nanoTime() < endNs) {
                            try {
                                int code = client.send(req, HttpResponse.BodyHandlers.ofString()).statusCode();
                                (code == 200 ? ok : failed).incrementAndGet();
                            } catch (Exception e) {
                                failed.incrementAndGet();
                            }
                        }
                    });
                    threads.add(th);
                }
                for (Thread th : threads) {
                    th.join();
                }
                System.out.printf("simulator capacity (%s, 32 clients, 16 tokens): %.0f req/s, %.0f tokens/s, %d failed%n",
                    stream ? "stream" : "json", ok.get() / 5.0, ok.get() * 16 / 5.0, failed.get());
                if (failed.get() > 0) {
                    throw new AssertionError(failed.get() + " requests failed");
                }
            }
        }
    }
}
