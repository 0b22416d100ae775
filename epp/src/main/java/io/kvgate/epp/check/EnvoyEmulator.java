package io.kvgate.epp.check;

import com.google.protobuf.ByteString;
import io.envoyproxy.envoy.config.core.v3.HeaderMap;
import io.envoyproxy.envoy.config.core.v3.HeaderValueOption;
import io.envoyproxy.envoy.config.core.v3.Metadata;
import io.envoyproxy.envoy.service.ext_proc.v3.BodyMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.CommonResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpTrailers;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.ManagedChannel;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.StreamObserver;
import io.kvgate.epp.protocol.EppProtocol;
import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * What Envoy's {@code envoy.filters.http.ext_proc} filter does with an endpoint picker, for one HTTP request, in the
 * configuration the Inference Extension's guides use: request and response headers sent, both bodies
 * {@code FULL_DUPLEX_STREAMED}, trailers sent. Request headers go out (raw values, pseudo-headers first, the subset
 * hint in the metadata context), then the body in Envoy-sized pieces (end of stream on the last, or trailers after
 * it); the picker's answer is read the way Envoy reads it (an {@code ImmediateResponse} ends the request; otherwise
 * headers, then the echoed body, then the trailers' answer, in that order); the request goes to the first endpoint of
 * {@code x-gateway-destination-endpoint} (ORIGINAL_DST with {@code use_http_header}) or to a scripted answer; the
 * response phase reports the served endpoint and streams the answer through the picker piece by piece. Everything
 * that departs from the protocol is recorded as a violation instead of thrown, so {@code epp-check} can report each
 * requirement. Blocking; one exchange per call, many calls may run at once over one channel.
 */
public final class EnvoyEmulator implements AutoCloseable {
    private final ManagedChannel channel;
    private final ExternalProcessorGrpc.ExternalProcessorStub stub;
    private final long timeoutMs;

    public EnvoyEmulator(String host, int port, long timeoutMs) {
        this(host, port, timeoutMs, null);
    }

    /**
     * TLS to a picker (Envoy's {@code UpstreamTlsContext} on the ext_proc cluster): trust {@code caFile}'s CAs, or the
     * JDK's without one, verify the host name, and present {@code certFile}/{@code keyFile} when given (mTLS).
     */
    public record ClientTls(String caFile, String certFile, String keyFile) {}

    /** Over TLS when {@code tls} is not null, else cleartext HTTP/2 (prior knowledge), as Envoy's ext_proc cluster does. */
    public EnvoyEmulator(String host, int port, long timeoutMs, ClientTls tls) {
        NettyChannelBuilder b = NettyChannelBuilder.forAddress(host, port).maxInboundMessageSize(64 << 20);
        if (tls == null) {
            b.usePlaintext();
        } else {
            try {
                var ssl = io.grpc.netty.GrpcSslContexts.forClient();
                if (tls.caFile() != null) {
                    ssl.trustManager(new java.io.File(tls.caFile()));
                }
                if (tls.certFile() != null) {
                    ssl.keyManager(new java.io.File(tls.certFile()), new java.io.File(tls.keyFile()));
                }
                b.useTransportSecurity().sslContext(ssl.build());
            } catch (javax.net.ssl.SSLException | IllegalArgumentException e) {
                throw new IllegalArgumentException("epp-check --tls: cannot use the certificate files (" + e.getMessage() + ")", e);
            }
        }
        this.channel = b.build();
        this.stub = ExternalProcessorGrpc.newStub(channel);
        this.timeoutMs = timeoutMs;
    }

    public ManagedChannel channel() {
        return channel;
    }

    /** An HTTP request as the client sent it to Envoy. */
    public record Request(String method, String path, Map<String, String> headers, byte[] body, int pieceBytes,
                          boolean trailers, List<String> subset) {
        public static Request post(String path, Map<String, String> headers, byte[] body) {
            return new Request("POST", path, headers, body, 16 * 1024, false, null);
        }

        public Request withPieces(int bytes) {
            return new Request(method, path, headers, body, bytes, trailers, subset);
        }

        public Request withTrailers() {
            return new Request(method, path, headers, body, pieceBytes, true, subset);
        }

        public Request withSubset(List<String> endpoints) {
            return new Request(method, path, headers, body, pieceBytes, trailers, endpoints);
        }
    }

    /** An engine's answer, in the pieces it arrived in. */
    public record Response(int status, Map<String, String> headers, List<byte[]> pieces, boolean trailers) {}

    /** Where the request goes once picked: an engine at {@code endpoint} (host:port), or a scripted answer. */
    @FunctionalInterface
    public interface Upstream {
        Response forward(String endpoint, Request request, byte[] forwardedBody, Map<String, String> addedHeaders) throws Exception;
    }

    /** What happened to one request. */
    public static final class Outcome {
        /** Set when the picker answered the request itself. */
        public Integer immediateStatus;
        public String immediateBody;
        public Map<String, String> immediateHeaders = new LinkedHashMap<>();
        /** The header mutation's destination, and the dynamic metadata's. */
        public String destinationHeader;
        public String destinationMetadata;
        public String prefiller;
        public boolean clearRouteCache;
        public byte[] echoedRequestBody;
        public List<Integer> echoedPieceSizes = new ArrayList<>();
        public boolean requestTrailersAnswered;
        public Response response;
        public byte[] echoedResponseBody;
        public boolean responseTrailersAnswered;
        public boolean streamCompleted;
        public final List<String> violations = new ArrayList<>();
        /** From the first request message sent to the last piece of the request's echo (the picker's added latency). */
        public long requestPhaseNs;
        /** Round trips of the response pieces through the picker, summed. */
        public long responsePhaseNs;

        /** The endpoint Envoy sends the request to: the first of the destination list. */
        public String endpoint() {
            String d = destinationHeader != null ? destinationHeader : destinationMetadata;
            if (d == null || d.isBlank()) {
                return null;
            }
            int comma = d.indexOf(',');
            return (comma < 0 ? d : d.substring(0, comma)).strip();
        }
    }

    private static final Object COMPLETED = new Object();

    /**
     * Runs one request through the picker and, when it picks, through {@code upstream}. {@code served}: the endpoint
     * reported as having served it (null: the one picked).
     */
    public Outcome exchange(Request req, Upstream upstream, String served) throws Exception {
        Outcome o = new Outcome();
        LinkedBlockingQueue<Object> in = new LinkedBlockingQueue<>();
        StreamObserver<ProcessingRequest> call = stub.process(new StreamObserver<>() {
            @Override
            public void onNext(ProcessingResponse r) {
                in.add(r);
            }

            @Override
            public void onError(Throwable t) {
                in.add(t);
            }

            @Override
            public void onCompleted() {
                in.add(COMPLETED);
            }
        });
        try {
            long t0 = System.nanoTime();
            sendRequest(call, req);
            Object first = next(in);
            if (!(first instanceof ProcessingResponse r)) {
                o.violations.add("request headers: expected a HeadersResponse or an ImmediateResponse, got " + describe(first));
                return o;
            }
            if (r.hasImmediateResponse()) {
                readImmediate(o, r);
                Object end = next(in);
                if (end == COMPLETED) {
                    o.streamCompleted = true;
                } else if (end instanceof ProcessingResponse) {
                    o.violations.add("a message followed the ImmediateResponse: " + describe(end));
                }
                return o;
            }
            if (!r.hasRequestHeaders()) {
                o.violations.add("request direction: the first answer must be the request headers' (headers before body),"
                    + " got " + r.getResponseCase());
                return o;
            }
            readDecision(o, r);
            readEcho(o, in, req);
            o.requestPhaseNs = System.nanoTime() - t0;
            if (o.endpoint() == null) {
                o.violations.add("no destination: neither " + EppProtocol.DESTINATION + " nor dynamic_metadata[envoy.lb] names one");
                call.onCompleted();
                return o;
            }
            Map<String, String> added = new LinkedHashMap<>();
            added.put(EppProtocol.DESTINATION, o.destinationHeader);
            if (o.prefiller != null) {
                added.put(EppProtocol.PREFILLER, o.prefiller);
            }
            byte[] forwarded = o.echoedRequestBody;
            o.response = upstream.forward(o.endpoint(), req, forwarded, added);
            respond(o, call, in, served != null ? served : o.endpoint());
            call.onCompleted();
            Object end = next(in);
            if (end == COMPLETED) {
                o.streamCompleted = true;
            } else {
                o.violations.add("after the response: expected the stream to end, got " + describe(end));
            }
            return o;
        } catch (Exception e) {
            call.onError(io.grpc.Status.CANCELLED.withDescription("emulator failed").asRuntimeException());
            throw e;
        }
    }

    private void sendRequest(StreamObserver<ProcessingRequest> call, Request req) {
        HeaderMap.Builder hm = HeaderMap.newBuilder()
            .addHeaders(EppProtocol.headerValue(":method", req.method()))
            .addHeaders(EppProtocol.headerValue(":path", req.path()))
            .addHeaders(EppProtocol.headerValue(":authority", "gateway.example"))
            .addHeaders(EppProtocol.headerValue(":scheme", "http"));
        req.headers().forEach((k, v) -> hm.addHeaders(EppProtocol.headerValue(k.toLowerCase(java.util.Locale.ROOT), v)));
        if (req.body().length > 0 && !req.headers().keySet().stream().anyMatch(k -> k.equalsIgnoreCase("content-length"))) {
            hm.addHeaders(EppProtocol.headerValue("content-length", Integer.toString(req.body().length)));
        }
        boolean bodyless = req.body().length == 0 && !req.trailers();
        ProcessingRequest.Builder headers = ProcessingRequest.newBuilder()
            .setRequestHeaders(HttpHeaders.newBuilder().setHeaders(hm).setEndOfStream(bodyless));
        if (req.subset() != null) {
            headers.setMetadataContext(EppProtocol.subsetHint(req.subset()));
        }
        call.onNext(headers.build());
        if (bodyless) {
            return;
        }
        byte[] b = req.body();
        int step = Math.max(1, req.pieceBytes());
        for (int i = 0; i < b.length || i == 0; i += step) {
            int end = Math.min(b.length, i + step);
            boolean last = end >= b.length;
            call.onNext(ProcessingRequest.newBuilder().setRequestBody(HttpBody.newBuilder()
                .setBody(ByteString.copyFrom(b, i, end - i)).setEndOfStream(last && !req.trailers())).build());
            if (last) {
                break;
            }
        }
        if (req.trailers()) {
            call.onNext(ProcessingRequest.newBuilder().setRequestTrailers(HttpTrailers.newBuilder()
                .setTrailers(HeaderMap.newBuilder().addHeaders(EppProtocol.headerValue("x-client-trailer", "1")))).build());
        }
    }

    private static void readImmediate(Outcome o, ProcessingResponse r) {
        var ir = r.getImmediateResponse();
        o.immediateStatus = ir.getStatus().getCodeValue();
        o.immediateBody = ir.getBody().toStringUtf8();
        for (HeaderValueOption h : ir.getHeaders().getSetHeadersList()) {
            o.immediateHeaders.put(h.getHeader().getKey(), EppProtocol.value(h.getHeader()));
        }
        if (!r.getDynamicMetadata().getFieldsMap().isEmpty() && EppProtocol.destination(r.getDynamicMetadata()) != null) {
            o.violations.add("an ImmediateResponse named a destination");
        }
    }

    private static void readDecision(Outcome o, ProcessingResponse r) {
        CommonResponse c = r.getRequestHeaders().getResponse();
        o.clearRouteCache = c.getClearRouteCache();
        for (HeaderValueOption h : c.getHeaderMutation().getSetHeadersList()) {
            String k = h.getHeader().getKey();
            if (k.equalsIgnoreCase(EppProtocol.DESTINATION)) {
                o.destinationHeader = EppProtocol.value(h.getHeader());
            } else if (k.equalsIgnoreCase(EppProtocol.PREFILLER)) {
                o.prefiller = EppProtocol.value(h.getHeader());
            }
        }
        o.destinationMetadata = EppProtocol.destination(r.getDynamicMetadata());
    }

    /** The request body's echo, then the trailers' answer when the request had trailers. */
    private void readEcho(Outcome o, LinkedBlockingQueue<Object> in, Request req) throws InterruptedException, java.io.IOException {
        ByteArrayOutputStream echo = new ByteArrayOutputStream();
        boolean bodyless = req.body().length == 0 && !req.trailers();
        boolean ended = bodyless;
        while (!ended) {
            Object m = next(in);
            if (!(m instanceof ProcessingResponse r)) {
                o.violations.add("request body: the stream ended before the body's echo did (" + describe(m) + ")");
                break;
            }
            if (r.hasRequestTrailers()) {
                if (!req.trailers()) {
                    o.violations.add("request trailers answered but none were sent");
                }
                if (echo.size() < req.body().length) {
                    o.violations.add("request direction: trailers answered before the body's echo ended (headers -> body ->"
                        + " trailers)");
                }
                o.requestTrailersAnswered = true;
                break;
            }
            if (!r.hasRequestBody()) {
                o.violations.add("request body: expected a BodyResponse, got " + r.getResponseCase());
                break;
            }
            BodyMutation bm = r.getRequestBody().getResponse().getBodyMutation();
            if (!bm.hasStreamedResponse()) {
                o.violations.add("request body: FULL_DUPLEX_STREAMED needs streamed_response, got " + bm.getMutationCase());
                break;
            }
            var s = bm.getStreamedResponse();
            o.echoedPieceSizes.add(s.getBody().size());
            if (s.getBody().size() > EppProtocol.MAX_ECHO_CHUNK) {
                o.violations.add("request body: an echoed piece of " + s.getBody().size() + " bytes (at most "
                    + EppProtocol.MAX_ECHO_CHUNK + ")");
            }
            s.getBody().writeTo(echo);
            if (s.getEndOfStream()) {
                if (req.trailers()) {
                    o.violations.add("request body: end_of_stream on the echo of a request that ends with trailers");
                }
                ended = true;
            } else if (req.trailers() && echo.size() >= req.body().length) {
                // The body is all back; its end is the trailers' answer, which comes next.
                Object t = next(in);
                if (t instanceof ProcessingResponse tr && tr.hasRequestTrailers()) {
                    o.requestTrailersAnswered = true;
                } else {
                    o.violations.add("request trailers: expected a TrailersResponse after the body, got " + describe(t));
                }
                ended = true;
            }
        }
        o.echoedRequestBody = echo.toByteArray();
    }

    private void respond(Outcome o, StreamObserver<ProcessingRequest> call, LinkedBlockingQueue<Object> in, String served)
            throws InterruptedException, java.io.IOException {
        Response resp = o.response;
        Metadata servedReport = EppProtocol.servedReport(served);
        HeaderMap.Builder hm = HeaderMap.newBuilder().addHeaders(EppProtocol.headerValue(":status", Integer.toString(resp.status())));
        resp.headers().forEach((k, v) -> hm.addHeaders(EppProtocol.headerValue(k.toLowerCase(java.util.Locale.ROOT), v)));
        boolean bodyless = resp.pieces().isEmpty() && !resp.trailers();
        long t = System.nanoTime();
        call.onNext(ProcessingRequest.newBuilder().setResponseHeaders(HttpHeaders.newBuilder().setHeaders(hm)
            .setEndOfStream(bodyless)).setMetadataContext(servedReport).build());
        Object h = next(in);
        o.responsePhaseNs += System.nanoTime() - t;
        if (!(h instanceof ProcessingResponse hr) || !hr.hasResponseHeaders()) {
            o.violations.add("response headers: expected a HeadersResponse, got " + describe(h));
            return;
        }
        ByteArrayOutputStream echo = new ByteArrayOutputStream();
        for (int i = 0; i < resp.pieces().size(); i++) {
            boolean last = i == resp.pieces().size() - 1 && !resp.trailers();
            t = System.nanoTime();
            call.onNext(ProcessingRequest.newBuilder().setResponseBody(HttpBody.newBuilder()
                .setBody(ByteString.copyFrom(resp.pieces().get(i))).setEndOfStream(last)).setMetadataContext(servedReport).build());
            Object m = next(in);
            o.responsePhaseNs += System.nanoTime() - t;
            if (!(m instanceof ProcessingResponse r) || !r.hasResponseBody()
                || !r.getResponseBody().getResponse().getBodyMutation().hasStreamedResponse()) {
                o.violations.add("response body: expected a streamed BodyResponse for piece " + i + ", got " + describe(m));
                return;
            }
            var s = r.getResponseBody().getResponse().getBodyMutation().getStreamedResponse();
            s.getBody().writeTo(echo);
            if (s.getEndOfStream() != last) {
                o.violations.add("response body: piece " + i + " echoed with end_of_stream " + s.getEndOfStream());
            }
        }
        o.echoedResponseBody = echo.toByteArray();
        if (resp.trailers()) {
            call.onNext(ProcessingRequest.newBuilder().setResponseTrailers(HttpTrailers.newBuilder()
                .setTrailers(HeaderMap.newBuilder().addHeaders(EppProtocol.headerValue("grpc-status", "0")))).build());
            Object m = next(in);
            if (m instanceof ProcessingResponse r && r.hasResponseTrailers()) {
                o.responseTrailersAnswered = true;
            } else {
                o.violations.add("response trailers: expected a TrailersResponse, got " + describe(m));
            }
        }
    }

    private Object next(LinkedBlockingQueue<Object> in) throws InterruptedException {
        Object m = in.poll(timeoutMs, TimeUnit.MILLISECONDS);
        return m == null ? "nothing within " + timeoutMs + " ms" : m;
    }

    private static String describe(Object m) {
        if (m == COMPLETED) {
            return "the end of the stream";
        }
        if (m instanceof ProcessingResponse r) {
            return r.getResponseCase().toString();
        }
        if (m instanceof Throwable t) {
            return "an error (" + io.grpc.Status.fromThrowable(t) + ")";
        }
        return String.valueOf(m);
    }

    @Override
    public void close() {
        channel.shutdownNow();
        try {
            channel.awaitTermination(5, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
