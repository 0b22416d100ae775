package io.kvgate.tools;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Ports for sockets a test must name before binding (ZeroMQ endpoints). They are drawn below the kernel's
 * ephemeral range (32768+): a port taken from {@code new ServerSocket(0)} and released can be handed out again as
 * the local port of any outgoing connection before the test binds it, which then fails or talks to a stranger.
 */
public final class TestPorts {
    private TestPorts() {}

    /** A base port with {@code count} consecutive ports free on loopback right now (checked, then released). */
    public static int free(int count) {
        for (int attempt = 0; attempt < 500; attempt++) {
            int base = 20_000 + ThreadLocalRandom.current().nextInt(12_000 - count);
            boolean ok = true;
            for (int i = 0; i < count && ok; i++) {
                try (ServerSocket s = new ServerSocket(base + i, 1, InetAddress.getLoopbackAddress())) {
                    s.setReuseAddress(true);
                } catch (IOException e) {
                    ok = false;
                }
            }
            if (ok) {
                return base;
            }
        }
        throw new IllegalStateException("no free port range below 32000");
    }

    public static int free() {
        return free(1);
    }
}
