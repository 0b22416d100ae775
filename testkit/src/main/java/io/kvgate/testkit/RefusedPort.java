package io.kvgate.testkit;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ConnectException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;

/**
 * A loopback TCP port held bound but not listening: a connection to it is answered with RST ("connection refused")
 * for as long as this handle is open. {@code SO_REUSEADDR} stays off, so nothing else can bind or listen on the port,
 * and Linux does not choose a bound port as the local port of an outgoing connection (no loopback self-connect).
 * Use in try-with-resources around everything that must see the refusal.
 */
public final class RefusedPort implements AutoCloseable {
    private final Socket holder;
    private final int port;

    private RefusedPort(Socket holder) {
        this.holder = holder;
        this.port = holder.getLocalPort();
    }

    static RefusedPort open() {
        Socket s = new Socket();
        try {
            s.setReuseAddress(false);
            s.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            RefusedPort p = new RefusedPort(s);
            p.checkRefused();
            return p;
        } catch (IOException e) {
            closeQuietly(s);
            throw new UncheckedIOException("cannot hold a refused loopback port", e);
        }
    }

    public int port() {
        return port;
    }

    /** {@code http://127.0.0.1:PORT}: an engine URL that is down for the whole test. */
    public String url() {
        return "http://127.0.0.1:" + port;
    }

    /** The promise, checked once: a connect attempt is refused rather than accepted or left hanging. */
    private void checkRefused() throws IOException {
        try (Socket probe = new Socket()) {
            probe.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 5_000);
            throw new IllegalStateException("port " + port + " accepted a connection; it must refuse");
        } catch (ConnectException expected) {
            // refused: what this class promises
        }
    }

    @Override
    public void close() {
        closeQuietly(holder);
    }

    private static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException ignored) {
            // nothing was listening; nothing to clean up
        }
    }
}
