package io.kvgate.dataplane.trace;

import com.sun.net.httpserver.HttpServer;
import io.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
import io.opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse;
import io.opentelemetry.proto.trace.v1.ResourceSpans;
import io.opentelemetry.proto.trace.v1.ScopeSpans;
import io.opentelemetry.proto.trace.v1.Span;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.zip.GZIPInputStream;

/**
 * A wire-level OTLP/HTTP collector on loopback for system tests: accepts {@code POST /v1/traces}, decodes each
 * protobuf {@code ExportTraceServiceRequest} with the OpenTelemetry proto classes and keeps the spans and the
 * resources' {@code service.name}.
 */
public final class OtlpReceiver implements AutoCloseable {
    private final HttpServer server;
    public final List<Span> spans = new CopyOnWriteArrayList<>();
    public final List<String> serviceNames = new CopyOnWriteArrayList<>();
    public final List<String> contentTypes = new CopyOnWriteArrayList<>();

    public OtlpReceiver() throws IOException {
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 16);
        server.setExecutor(Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "otlp-receiver");
            t.setDaemon(true);
            return t;
        }));
        server.createContext("/v1/traces", ex -> {
            contentTypes.add(String.valueOf(ex.getRequestHeaders().getFirst("Content-Type")));
            InputStream in = ex.getRequestBody();
            if ("gzip".equalsIgnoreCase(ex.getRequestHeaders().getFirst("Content-Encoding"))) {
                in = new GZIPInputStream(in);
            }
            ExportTraceServiceRequest req = ExportTraceServiceRequest.parseFrom(in.readAllBytes());
            for (ResourceSpans rs : req.getResourceSpansList()) {
                rs.getResource().getAttributesList().stream().filter(a -> a.getKey().equals("service.name"))
                    .forEach(a -> serviceNames.add(a.getValue().getStringValue()));
                for (ScopeSpans ss : rs.getScopeSpansList()) {
                    spans.addAll(ss.getSpansList());
                }
            }
            byte[] ok = ExportTraceServiceResponse.getDefaultInstance().toByteArray();
            ex.getResponseHeaders().set("Content-Type", "application/x-protobuf");
            ex.sendResponseHeaders(200, ok.length == 0 ? -1 : ok.length);
            try (OutputStream os = ex.getResponseBody()) {
                os.write(ok);
            }
        });
        server.start();
    }

    /** The traces URL to configure as {@code tracing.otlp_endpoint}. */
    public String endpoint() {
        return "http://127.0.0.1:" + server.getAddress().getPort() + "/v1/traces";
    }

    public static String hex(com.google.protobuf.ByteString id) {
        return HexFormat.of().formatHex(id.toByteArray());
    }

    /** The spans received so far with this name. */
    public List<Span> named(String name) {
        List<Span> out = new ArrayList<>();
        for (Span s : spans) {
            if (s.getName().equals(name)) {
                out.add(s);
            }
        }
        return out;
    }

    /** The string value of a span attribute, or null. */
    public static String attr(Span s, String key) {
        return s.getAttributesList().stream().filter(a -> a.getKey().equals(key)).findFirst()
            .map(a -> a.getValue().hasStringValue() ? a.getValue().getStringValue() : String.valueOf(a.getValue().getIntValue()))
            .orElse(null);
    }

    @Override
    public void close() {
        server.stop(0);
    }
}
