package io.kvgate.tools.system;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.tools.sim.EngineSimulator;
import io.kvgate.tools.sim.SimulatorConfig;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** A client that goes away mid-stream cancels its request at the engine (the gateway closes the upstream connection). */
@Timeout(60)
@Tag("system")
class ClientDisconnectSystemTest {
    @Test
    void disconnectCancelsTheEngineRequest() throws Exception {
        try (EngineSimulator sim = EngineSimulator.start(new SimulatorConfig().dialect(SimulatorConfig.Dialect.VLLM).model("m")
            .ttftMs(5).itlMs(50))) {
            Gateway gw = Gateway.start(GatewayConfig.parse("""
                listen: 127.0.0.1:0
                admin_listen: 127.0.0.1:0
                health: {interval_ms: 60000}
                rules:
                  - name: r
                    models: [m]
                    endpoints:
                      - url: %s
                """.formatted(sim.baseUrl())));
            try {
                try (Socket s = new Socket("127.0.0.1", gw.port())) {
                    String body = "{\"model\":\"m\",\"stream\":true,\"max_tokens\":400,\"messages\":[{\"role\":\"user\",\"content\":\"go\"}]}";
                    OutputStream out = s.getOutputStream();
                    out.write(("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
                        + body.getBytes(StandardCharsets.UTF_8).length + "\r\n\r\n" + body).getBytes(StandardCharsets.UTF_8));
                    out.flush();
                    String statusLine = readStatusLine(s.getInputStream());
                    assertTrue(statusLine.startsWith("HTTP/1.1 200"), statusLine);
                } // closed once the stream has started: 400 tokens at 50 ms would take 20 s
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                while (sim.stats().get("aborted_by_client") == 0 && System.nanoTime() - deadline < 0) {
                    TimeUnit.MILLISECONDS.sleep(20);
                }
                assertTrue(sim.stats().get("aborted_by_client") >= 1, "the engine saw its request cancelled: " + sim.stats().toJson());
                assertTrue(sim.stats().get("completion_tokens") < 400, sim.stats().toJson().toString());
            } finally {
                gw.close(100);
            }
        }
    }

    /** Reads up to the end of the first line, however the bytes are split into TCP segments. */
    private static String readStatusLine(InputStream in) throws IOException {
        StringBuilder line = new StringBuilder();
        int b;
        while ((b = in.read()) != -1 && b != '\n') {
            line.append((char) b);
        }
        return line.toString().strip();
    }
}
