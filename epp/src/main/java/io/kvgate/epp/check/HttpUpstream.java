package io.kvgate.epp.check;

import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Envoy's {@code ORIGINAL_DST} cluster with {@code use_http_header}: the request goes to {@code http://ENDPOINT} as the
 * picker named it, with the body the picker echoed and the headers it set; the answer comes back in the pieces it
 * arrived in (up to 16 KiB each), for the emulator to stream through the picker's response phase.
 */
public final class HttpUpstream implements EnvoyEmulator.Upstream {
    private static final int PIECE_BYTES = 16 * 1024;
    private final HttpClient client;
    private final Duration timeout;

    public HttpUpstream(Duration timeout) {
        this.client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(timeout).build();
        this.timeout = timeout;
    }

    @Override
    public EnvoyEmulator.Response forward(String endpoint, EnvoyEmulator.Request request, byte[] body,
                                          Map<String, String> added) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://" + endpoint + request.path())).timeout(timeout)
            .method(request.method(), HttpRequest.BodyPublishers.ofByteArray(body));
        request.headers().forEach((k, v) -> {
            if (!RESTRICTED.contains(k.toLowerCase(java.util.Locale.ROOT))) {
                b.header(k, v);
            }
        });
        added.forEach(b::header);
        HttpResponse<InputStream> r = client.send(b.build(), HttpResponse.BodyHandlers.ofInputStream());
        List<byte[]> pieces = new ArrayList<>();
        try (InputStream in = r.body()) {
            byte[] buf = new byte[PIECE_BYTES];
            for (int n; (n = in.read(buf)) > 0; ) {
                pieces.add(Arrays.copyOf(buf, n));
            }
        }
        Map<String, String> headers = new LinkedHashMap<>();
        r.headers().map().forEach((k, v) -> {
            if (!k.startsWith(":") && !v.isEmpty()) {
                headers.put(k, v.getFirst());
            }
        });
        return new EnvoyEmulator.Response(r.statusCode(), headers, pieces, false);
    }

    /** Headers the JDK client sets itself. */
    private static final java.util.Set<String> RESTRICTED = java.util.Set.of("content-length", "host", "connection",
        "expect", "upgrade");
}
