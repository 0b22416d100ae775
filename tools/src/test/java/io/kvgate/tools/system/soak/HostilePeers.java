package io.kvgate.tools.system.soak;

import io.kvgate.testkit.ZmtpPeer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The soak's hostile peers, each bounded in bytes and time and each reporting what the gateway did with it. They
 * attack; they assert nothing: the soak's criteria (no failed request, flat RSS, no stuck subscription) judge
 * whether the gateway held.
 */
final class HostilePeers {
    private HostilePeers() {}

    /**
     * Review B-1: a peer of a KV bind socket completes a NULL ZMTP 3 handshake as a PUB and declares a frame of
     * negative size. Returns whether the gateway dropped the connection within {@code waitMs}.
     */
    static String negativeZmtpFrame(int bindPort, int waitMs) throws IOException {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), bindPort), 5_000);
            s.setSoTimeout(waitMs);
            s.getOutputStream().write(ZmtpPeer.pubHandshakeThenFrameHeader(ZmtpPeer.NEGATIVE_FRAME_SIZE));
            s.getOutputStream().flush();
            long t0 = System.nanoTime();
            InputStream in = s.getInputStream();
            byte[] sink = new byte[4096];
            try {
                while (in.read(sink) >= 0) {
                    // the gateway's greeting and READY: keep reading until it closes or the wait ends
                }
                return "dropped by the gateway after " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0) + " ms";
            } catch (SocketTimeoutException e) {
                return "still connected after " + waitMs + " ms";
            } catch (IOException e) {
                return "reset by the gateway after " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0) + " ms";
            }
        }
    }

    /**
     * Review B-3: pipelines {@code GET /health} on one connection with a 4 KiB receive buffer and never reads, for at
     * most {@code maxRequests} or {@code seconds}. Returns how many requests the gateway let it write (a gateway that
     * stops reading a connection whose answers pile up lets through little more than the socket buffers).
     */
    static String pipelinedHealthWithoutReading(int port, int maxRequests, int seconds) throws Exception {
        byte[] one = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".getBytes(StandardCharsets.US_ASCII);
        int perWrite = 256;
        byte[] batch = new byte[one.length * perWrite];
        for (int i = 0; i < perWrite; i++) {
            System.arraycopy(one, 0, batch, i * one.length, one.length);
        }
        Socket s = new Socket();
        s.setReceiveBufferSize(4096);
        s.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 5_000);
        long[] written = {0};
        String[] ended = {"time limit"};
        Thread writer = Thread.ofVirtual().start(() -> {
            try {
                OutputStream out = s.getOutputStream();
                while (written[0] < maxRequests) {
                    out.write(batch);
                    written[0] += perWrite;
                }
                ended[0] = "all written";
            } catch (IOException e) {
                if (!s.isClosed()) {
                    ended[0] = "gateway closed: " + e.getMessage();
                }
            }
        });
        writer.join(TimeUnit.SECONDS.toMillis(seconds));
        s.close(); // unblocks a write the gateway no longer reads
        writer.join(5_000);
        return written[0] + " requests (" + written[0] * one.length / 1024 + " KiB) written in <= " + seconds + " s ("
            + ended[0] + ")";
    }

    /**
     * A slowloris head on {@code connections} connections: a request line, then one header byte every 500 ms, for at
     * most {@code seconds}. Returns how many the gateway cut (408 or close) and after how long.
     */
    static String slowlorisHeads(int port, int connections, int seconds) throws InterruptedException {
        List<Thread> threads = new ArrayList<>();
        long[] cutAfterMs = new long[connections];
        for (int c = 0; c < connections; c++) {
            int slot = c;
            threads.add(Thread.ofVirtual().start(() -> cutAfterMs[slot] = oneSlowHead(port, seconds)));
        }
        for (Thread t : threads) {
            t.join(TimeUnit.SECONDS.toMillis(seconds + 10));
        }
        int cut = 0;
        long min = Long.MAX_VALUE;
        long max = 0;
        for (long ms : cutAfterMs) {
            if (ms >= 0) {
                cut++;
                min = Math.min(min, ms);
                max = Math.max(max, ms);
            }
        }
        return cut + "/" + connections + " cut by the gateway" + (cut > 0 ? " after " + min + ".." + max + " ms" : "")
            + " (trickling for at most " + seconds + " s)";
    }

    /** Milliseconds until the gateway answered or closed the trickling head; -1 when it held it open to the end. */
    private static long oneSlowHead(int port, int seconds) {
        long t0 = System.nanoTime();
        long end = t0 + TimeUnit.SECONDS.toNanos(seconds);
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 5_000);
            s.setSoTimeout(500); // the read below paces the trickle: one byte per 500 ms unless the gateway speaks
            OutputStream out = s.getOutputStream();
            InputStream in = s.getInputStream();
            out.write("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".getBytes(StandardCharsets.US_ASCII));
            while (System.nanoTime() - end < 0) {
                out.write('a');
                out.flush();
                try {
                    in.read(); // any byte (a 408) or end of stream: the gateway cut it
                    return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
                } catch (SocketTimeoutException e) {
                    // nothing from the gateway yet: send the next byte
                }
            }
            return -1;
        } catch (IOException e) {
            return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0); // reset by the gateway
        }
    }
}
