package io.kvgate.testkit;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The one place tests get loopback ports from. Two kinds:
 *
 * <ul>
 *   <li>{@link #free(int)}: ports a test must <em>name before anything binds them</em> (ZeroMQ endpoints, a
 *       simulator's {@code port + rank} publishers). They come from below the kernel's ephemeral range
 *       ({@code net.ipv4.ip_local_port_range}, 32768-60999 by default): a port taken from
 *       {@code new ServerSocket(0)} and released is an ephemeral port, and the kernel may hand it out as the
 *       local port of any outgoing connection (the test's own HTTP clients, a ZeroMQ reconnect) before the test
 *       binds it; the bind then fails, or a connect reaches a stranger. Every port handed out is bind-checked on
 *       127.0.0.1 first, and one JVM never hands out the same port twice (a previous test's lingering subscriber
 *       or reconnecting publisher must not meet the next test's socket).</li>
 *   <li>{@link #refused()}: a port on which a connection is <em>guaranteed</em> to be refused, for "engine is
 *       down" tests. Releasing a {@code ServerSocket(0)} does not guarantee that: the port can be re-bound or
 *       become the local port of a loopback self-connect. The returned port stays bound (without listening) until
 *       closed, so nothing can listen on it and the kernel will not pick it for an outgoing connection.</li>
 * </ul>
 *
 * Servers that report their own port after binding (the gateway's {@code listen: 127.0.0.1:0}, simulators with
 * port 0, Netty servers) need neither: binding port 0 is atomic.
 */
public final class TestPorts {
    /** Lowest port handed out: keeps clear of the well-known/registered services most machines run. */
    private static final int LOWEST = 10_000;
    private static final int HIGHEST = 65_535;
    private static final int ATTEMPTS = 2_000;

    private static final int[] RANGE = allowedRange(readEphemeralRange());
    /** Next candidate; starts at a random point so concurrent test JVMs (other checkouts) rarely meet. */
    private static final AtomicInteger NEXT = new AtomicInteger(
        RANGE[0] + ThreadLocalRandom.current().nextInt(RANGE[1] - RANGE[0]));

    private TestPorts() {}

    /** A loopback port outside the ephemeral range, free right now (bind-checked, then released). */
    public static int free() {
        return free(1);
    }

    /**
     * A base port {@code p} such that {@code p .. p + count - 1} are all outside the ephemeral range and free on
     * 127.0.0.1 right now (each bind-checked, then released); for endpoints that derive ports from a base
     * (a DP rank publishes on {@code port + rank}, a replay socket next to it).
     */
    public static int free(int count) {
        if (count < 1 || count > 64) {
            throw new IllegalArgumentException("count must be in 1..64, got " + count);
        }
        int span = RANGE[1] - RANGE[0];
        for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
            int base = RANGE[0] + Math.floorMod(NEXT.getAndAdd(count) - RANGE[0], span);
            if (base + count > RANGE[1]) {
                continue; // the block would wrap past the end of the range
            }
            if (allBindable(base, count)) {
                return base;
            }
        }
        throw new IllegalStateException("no " + count + " consecutive free loopback ports in " + RANGE[0] + ".."
            + (RANGE[1] - 1) + " after " + ATTEMPTS + " attempts");
    }

    /** A loopback port on which every connection is refused until the returned handle is closed. */
    public static RefusedPort refused() {
        return RefusedPort.open();
    }

    /**
     * For failure messages: the kernel's view of the TCP sockets on {@code port} ({@code ss -tanpe}), so a test that
     * fails on a port shows who else was there. Never throws.
     */
    public static String socketsOn(int port) {
        try {
            Process p = new ProcessBuilder("ss", "-tanpe", "( sport = :" + port + " or dport = :" + port + " )")
                .redirectErrorStream(true).start();
            if (!p.waitFor(5, java.util.concurrent.TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return "(ss timed out)";
            }
            return "sockets on port " + port + ":\n" + new String(p.getInputStream().readAllBytes(),
                java.nio.charset.StandardCharsets.UTF_8).strip();
        } catch (IOException e) {
            return "(ss unavailable: " + e.getMessage() + ")";
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "(interrupted)";
        }
    }

    private static boolean allBindable(int base, int count) {
        for (int p = base; p < base + count; p++) {
            // ServerSocket sets SO_REUSEADDR on Linux, as JeroMQ and Netty do: TIME_WAIT leftovers do not block the
            // real bind either, while any socket bound or connected on the port makes this check fail.
            try {
                new ServerSocket(p, 1, InetAddress.getLoopbackAddress()).close();
            } catch (IOException e) {
                return false;
            }
        }
        return true;
    }

    /** [low, high] of the kernel's ephemeral range; the Linux default when it cannot be read (not Linux). */
    static int[] readEphemeralRange() {
        try {
            String[] parts = Files.readString(Path.of("/proc/sys/net/ipv4/ip_local_port_range")).trim().split("\\s+");
            return new int[] {Integer.parseInt(parts[0]), Integer.parseInt(parts[1])};
        } catch (IOException | RuntimeException e) {
            return new int[] {32_768, 60_999};
        }
    }

    /** [from, to) to draw from: below the ephemeral range when there is room there, else above it. */
    static int[] allowedRange(int[] ephemeral) {
        int below = ephemeral[0] - LOWEST;
        int above = HIGHEST - ephemeral[1];
        if (below >= 2_000 || below >= above) {
            return new int[] {LOWEST, ephemeral[0]};
        }
        return new int[] {ephemeral[1] + 1, HIGHEST + 1};
    }
}
