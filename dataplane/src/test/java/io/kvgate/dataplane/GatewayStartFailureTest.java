package io.kvgate.dataplane;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.GatewayConfig;
import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.file.Path;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** A gateway that fails half-way through start-up closes everything it had already opened. */
@Timeout(60)
@Tag("system")
class GatewayStartFailureTest {
    @TempDir
    Path dir;

    private static Set<String> gatewayThreads() {
        Set<String> names = new TreeSet<>();
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.isAlive() && t.getName().startsWith("kvgate-")) {
                names.add(t.getName());
            }
        }
        return names;
    }

    @Test
    void aFailureAfterTheListenersAreBoundClosesWhatWasOpened() throws Exception {
        Path sock = dir.resolve("taken.sock");
        Set<String> before = gatewayThreads();
        try (ServerSocketChannel other = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
            other.bind(UnixDomainSocketAddress.of(sock)); // another process's live control socket
            // The control socket is the last thing bound: event loops, the routing thread, the KV index and its
            // ingest thread, the client and admin listeners are all open when it fails.
            GatewayConfig cfg = GatewayConfig.parse("""
                listen: 127.0.0.1:0
                admin_listen: 127.0.0.1:0
                control_socket: %s
                rules:
                  - name: chat
                    models: [m]
                    endpoints:
                      - url: http://127.0.0.1:9
                        kv_events: tcp://127.0.0.1:1
                """.formatted(sock));
            IOException e = assertThrows(IOException.class, () -> Gateway.start(cfg));
            assertTrue(e.getMessage().contains("is in use by another process"), e.getMessage());
        }
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (!gatewayThreads().equals(before) && System.nanoTime() < deadline) {
            Thread.sleep(10); // ingest and event-loop threads finish their last duty cycle
        }
        assertEquals(before, gatewayThreads(), "no thread of the failed gateway is left running");
    }
}
