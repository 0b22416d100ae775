package io.kvgate.control.client;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.URI;
import java.net.UnixDomainSocketAddress;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Locale;

/**
 * The client side of the admin/control protocol (HTTP/1.1 + JSON): over the gateway's control socket (a Unix domain
 * socket; the kernel vouches for who we are, no token) or over the admin HTTP listener (with the admin token). One
 * request per connection. Used by {@code ./kvgate ctl} and by tests.
 */
public final class ControlClient {
    /** One answer: status and body (JSON, or YAML for the configuration). */
    public record Response(int status, String body) {
        public boolean ok() {
            return status / 100 == 2;
        }
    }

    private final Path socket;
    private final String adminUrl;
    private final String token;

    private ControlClient(Path socket, String adminUrl, String token) {
        this.socket = socket;
        this.adminUrl = adminUrl;
        this.token = token;
    }

    public static ControlClient socket(Path path) {
        return new ControlClient(path, null, null);
    }

    public static ControlClient http(String adminUrl, String token) {
        return new ControlClient(null, adminUrl.endsWith("/") ? adminUrl.substring(0, adminUrl.length() - 1) : adminUrl, token);
    }

    /** Where requests go, for messages. */
    public String target() {
        return socket != null ? "control socket " + socket : "admin API " + adminUrl;
    }

    public Response send(String method, String path, String body) throws IOException, InterruptedException {
        return socket != null ? overSocket(method, path, body) : overHttp(method, path, body);
    }

    private static String contentType(String path) {
        return path.endsWith("/config") || path.contains("/config/") ? "application/yaml" : "application/json";
    }

    private Response overHttp(String method, String path, String body) throws IOException, InterruptedException {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(adminUrl + path)).timeout(Duration.ofSeconds(30))
            .method(method, body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body));
        if (token != null) {
            b.header("Authorization", "Bearer " + token);
        }
        if (body != null) {
            b.header("Content-Type", contentType(path));
        }
        HttpResponse<String> r = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build()
            .send(b.build(), HttpResponse.BodyHandlers.ofString());
        return new Response(r.statusCode(), r.body());
    }

    private Response overSocket(String method, String path, String body) throws IOException {
        byte[] content = body == null ? new byte[0] : body.getBytes(StandardCharsets.UTF_8);
        String head = method + " " + path + " HTTP/1.1\r\nHost: kvgate\r\nConnection: close\r\nContent-Length: " + content.length
            + "\r\n" + (body == null ? "" : "Content-Type: " + contentType(path) + "\r\n") + "\r\n";
        ByteArrayOutputStream in = new ByteArrayOutputStream();
        try (SocketChannel ch = SocketChannel.open(StandardProtocolFamily.UNIX)) {
            ch.connect(UnixDomainSocketAddress.of(socket));
            ByteBuffer out = ByteBuffer.allocate(head.length() + content.length);
            out.put(head.getBytes(StandardCharsets.US_ASCII)).put(content).flip();
            IOException writeFailed = null;
            try {
                while (out.hasRemaining()) {
                    ch.write(out);
                }
            } catch (IOException e) {
                // A refused peer is answered (403) and closed as soon as it connects: read that answer anyway.
                writeFailed = e;
            }
            ByteBuffer buf = ByteBuffer.allocate(16 << 10);
            try {
                while (ch.read(buf) >= 0) {
                    buf.flip();
                    in.write(buf.array(), 0, buf.limit());
                    buf.clear();
                }
            } catch (IOException e) {
                if (in.size() == 0) {
                    throw e; // a reset after a complete answer (a refused peer) is not an error
                }
            }
            if (in.size() == 0 && writeFailed != null) {
                throw writeFailed;
            }
        }
        return parse(in.toString(StandardCharsets.UTF_8));
    }

    /** Parses a Content-Length-framed HTTP/1.1 response. */
    static Response parse(String raw) throws IOException {
        int end = raw.indexOf("\r\n\r\n");
        if (!raw.startsWith("HTTP/1.") || end < 0) {
            throw new IOException("not an HTTP response from the control socket: '" + raw.substring(0, Math.min(80, raw.length())) + "'");
        }
        int status = Integer.parseInt(raw.substring(9, 12));
        int length = -1;
        for (String line : raw.substring(0, end).split("\r\n")) {
            if (line.toLowerCase(Locale.ROOT).startsWith("content-length:")) {
                length = Integer.parseInt(line.substring(15).trim());
            }
        }
        String body = raw.substring(end + 4);
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        if (length >= 0 && bytes.length > length) {
            body = new String(bytes, 0, length, StandardCharsets.UTF_8);
        }
        return new Response(status, body);
    }
}
