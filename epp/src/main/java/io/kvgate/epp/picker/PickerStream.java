package io.kvgate.epp.picker;

import com.google.protobuf.ByteString;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.service.ext_proc.v3.CommonResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.HeaderMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.HeadersResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.ImmediateResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.TrailersResponse;
import io.envoyproxy.envoy.type.v3.HttpStatus;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import io.kvgate.dataplane.exchange.RequestContext;
import io.kvgate.dataplane.http.RequestPipeline;
import io.kvgate.dataplane.openai.OpenAiErrors;
import io.kvgate.dataplane.request.FrontRoute;
import io.kvgate.dataplane.request.PriorityInputs;
import io.kvgate.dataplane.request.Refusal;
import io.kvgate.dataplane.route.Admission;
import io.kvgate.dataplane.route.Breaker;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.Outcome;
import io.kvgate.dataplane.route.Role;
import io.kvgate.dataplane.route.Rule;
import io.kvgate.epp.protocol.EppProtocol;
import io.netty.buffer.Unpooled;
import io.netty.channel.EventLoop;
import io.netty.handler.codec.http.DefaultHttpContent;
import io.netty.handler.codec.http.DefaultHttpRequest;
import io.netty.handler.codec.http.DefaultLastHttpContent;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpVersion;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Map;

/**
 * One ext_proc stream: one HTTP request as Envoy relays it in {@code FULL_DUPLEX_STREAMED} mode, through the same
 * request stages as the HTTP front door ({@link io.kvgate.dataplane.http.RequestPipeline}: head, body, validate,
 * prompt), then the routing stage, then the answer Envoy acts on:
 *
 * <ol>
 *   <li>request headers: the head stage (drain, route, method, API key, content type, declared length); a refusal is
 *       an {@code ImmediateResponse} with the OpenAI error object, as the front door would answer;</li>
 *   <li>request body pieces: buffered (the decision needs the whole prompt) and kept as received; the end of stream
 *       (or request trailers) runs validate and prompt, then routing;</li>
 *   <li>the decision: a {@code HeadersResponse} setting {@code x-gateway-destination-endpoint} (the endpoint, then its
 *       fallbacks) with {@code clear_route_cache}, the same value in {@code dynamic_metadata["envoy.lb"]}, then the body
 *       echoed unchanged in pieces of at most 62,000 bytes, then the request trailers' answer when there were any. A
 *       P/D rule's pick is its decode pod, with its prefill pod in {@code x-prefiller-host-port}. No endpoint: 503;
 *       shed: 429 with Retry-After;</li>
 *   <li>the response: headers and every body piece answered in order (the body echoed); the first bytes hand the
 *       routed prefill charge back, the served-endpoint report and the status decide how the request ended on its
 *       endpoint (the load model and the breaker), and the body's last bytes give the usage and the TTFT.</li>
 * </ol>
 *
 * <p>Threading: every callback runs on the event loop of the stream's connection (the gRPC server has a direct
 * executor on the gateway's I/O loops), which is also where the routing stage delivers the decision; a callback that
 * arrives elsewhere is moved to that loop first.
 */
final class PickerStream implements StreamObserver<ProcessingRequest>, PickerRouting.Decided {
    private enum Phase { HEADERS, BODY, RESERVING, DECIDING, FORWARDED, RESPONSE, DONE }

    /** Response bytes kept to read the usage from (it is in the answer's last bytes: a JSON body or the last SSE event). */
    private static final int USAGE_TAIL_BYTES = 2048;
    /** At most this many fallback endpoints follow the pick (Envoy's retries within the pool). */
    static final int MAX_FALLBACKS = 2;

    private final Picker picker;
    private final EventLoop loop;
    private final StreamObserver<ProcessingResponse> out;
    private final RequestContext rc = new RequestContext();
    /** The request body as Envoy sent it: echoed unchanged, whatever the stages edit for their own reading. */
    private ByteString received = ByteString.EMPTY;
    private Phase phase = Phase.HEADERS;
    private List<String> subset;
    private boolean requestTrailers;
    private PickerRouting routing;
    private Rule rule;
    private String model;
    private EndpointState chosen;
    private EndpointState prefill;
    private long startNs;
    private int status;
    private String served;
    private boolean sawBody;
    private ByteString tail = ByteString.EMPTY;
    /** What the tenant's reservation settles to when the stream ends: the engine's usage, else released (-1). */
    private long usedTokens = -1;

    PickerStream(Picker picker, EventLoop loop, StreamObserver<ProcessingResponse> out) {
        this.picker = picker;
        this.loop = loop;
        this.out = out;
    }

    // ---- inbound (Envoy -> picker) ----------------------------------------------------------------------------

    @Override
    public void onNext(ProcessingRequest req) {
        if (!loop.inEventLoop()) {
            loop.execute(() -> onNext(req));
            return;
        }
        try {
            switch (req.getRequestCase()) {
                case REQUEST_HEADERS -> requestHeaders(req);
                case REQUEST_BODY -> requestBody(req.getRequestBody());
                case REQUEST_TRAILERS -> requestTrailers();
                case RESPONSE_HEADERS -> responseHeaders(req);
                case RESPONSE_BODY -> responseBody(req);
                case RESPONSE_TRAILERS -> responseTrailers(req);
                default -> protocolError("a ProcessingRequest without a request");
            }
        } catch (RuntimeException e) {
            picker.metrics().badRequest("epp_internal_error");
            fail(Status.INTERNAL.withDescription("endpoint picker: " + e).withCause(e));
        }
    }

    @Override
    public void onError(Throwable t) {
        if (!loop.inEventLoop()) {
            loop.execute(() -> onError(t));
            return;
        }
        // Envoy reset the stream (the client went away, a timeout): nothing more of this request reaches an engine.
        end(phase == Phase.RESPONSE && status >= 500 ? Outcome.FAILURE : Outcome.RELEASED);
    }

    @Override
    public void onCompleted() {
        if (!loop.inEventLoop()) {
            loop.execute(this::onCompleted);
            return;
        }
        if (phase != Phase.DONE) {
            end(Outcome.RELEASED); // Envoy closed before the response ended: no verdict on the engine
        }
        out.onCompleted();
    }

    private void requestHeaders(ProcessingRequest req) {
        if (phase != Phase.HEADERS) {
            protocolError("request headers arrived twice");
            return;
        }
        HttpHeaders h = req.getRequestHeaders();
        subset = EppProtocol.subset(req.getMetadataContext());
        startNs = picker.clock().nanoTime();
        rc.begin(head(h), picker.gateway().config(), picker.gateway().router().table(), startNs, null);
        Refusal r = picker.pipeline().head(rc);
        if (r != null) {
            refuse(r);
            return;
        }
        if (rc.route() != FrontRoute.CHAT && rc.route() != FrontRoute.COMPLETIONS) {
            refuse(Refusal.of(HttpResponseStatus.NOT_FOUND, "epp_route_not_picked", "The endpoint picker routes POST"
                + " /v1/chat/completions and /v1/completions; " + rc.path() + " is not routed to an engine by it."));
            return;
        }
        phase = Phase.BODY;
        if (h.getEndOfStream()) {
            endOfRequest(); // no body: the validate stage answers as for an empty one
        }
    }

    private void requestBody(HttpBody b) {
        if (phase == Phase.DONE) {
            return; // answered already (an ImmediateResponse): Envoy may have had pieces in flight
        }
        if (phase != Phase.BODY) {
            protocolError("a request body piece arrived " + (phase == Phase.HEADERS ? "before the headers" : "after its end"));
            return;
        }
        received = received.concat(b.getBody());
        // The stages read (and may edit in place) a copy: the echo stays the bytes Envoy sent.
        HttpContent piece = b.getEndOfStream() ? new DefaultLastHttpContent(Unpooled.wrappedBuffer(b.getBody().toByteArray()))
            : new DefaultHttpContent(Unpooled.wrappedBuffer(b.getBody().toByteArray()));
        Refusal r;
        try {
            r = picker.pipeline().body(rc, piece, picker.alloc());
        } finally {
            piece.release();
        }
        if (r != null) {
            refuse(r);
        } else if (b.getEndOfStream()) {
            endOfRequest();
        }
    }

    private void requestTrailers() {
        switch (phase) {
            case BODY -> {
                // Trailers end a request whose last body piece said no end of stream.
                requestTrailers = true;
                Refusal r = picker.pipeline().body(rc, new DefaultLastHttpContent(), picker.alloc());
                if (r != null) {
                    refuse(r);
                } else {
                    endOfRequest();
                }
            }
            case RESERVING, DECIDING -> requestTrailers = true; // answered after the body's echo
            case FORWARDED -> out.onNext(ProcessingResponse.newBuilder()
                .setRequestTrailers(TrailersResponse.getDefaultInstance()).build());
            case DONE -> { }
            default -> protocolError("request trailers arrived before the request headers");
        }
    }

    /**
     * The whole request is in: the rest of the stages, then the tenant's reservation in the store the configuration
     * names (the front door's: the shared {@code rate_limit_store} when set, so the picker's requests count against the
     * same fleet-wide limits; its answer comes back on this stream's loop), then a decision.
     */
    private void endOfRequest() {
        Refusal r = picker.pipeline().beforeLimits(rc, picker.alloc());
        if (r != null) {
            refuse(r);
            return;
        }
        phase = Phase.RESERVING;
        picker.pipeline().reserve(rc, limitLoop(), this::reserved);
    }

    private io.kvgate.dataplane.tenant.Loop limitLoop() {
        return io.kvgate.dataplane.tenant.Loop.of(loop);
    }

    private void reserved(io.kvgate.dataplane.tenant.Reservation res) {
        if (phase != Phase.RESERVING) {
            picker.gateway().tenants().settle(res, -1); // the stream ended while the store answered: give the hold back
            return;
        }
        Refusal r = RequestPipeline.reserved(rc, res);
        if (r != null) {
            refuse(r);
            return;
        }
        rule = rc.rule();
        model = rc.fields().model;
        int[] serving = rc.servingEndpoints();
        int[] decodeServing = serving;
        if (subset != null) {
            decodeServing = withinSubset(rule, serving, subset);
            if (decodeServing.length == 0) {
                picker.metrics().shed("epp_subset_empty");
                immediate(HttpResponseStatus.SERVICE_UNAVAILABLE, "no_endpoint", subset.isEmpty()
                    ? "The gateway's subset hint lists no endpoint."
                    : "No endpoint of rule '" + rule.name() + "' is in the gateway's subset hint " + subset + ".", null);
                return;
            }
        }
        var head = rc.head();
        String lora = rule.config().entryFor(model) == null ? model : null;
        routing = new PickerRouting(picker.gateway().routing(loop), rule, rc.inputs(), lora, decodeServing, serving,
            PriorityInputs.priority(head.headers(), rule.config().admission()), PriorityInputs.tenant(head.headers()), this);
        phase = Phase.DECIDING;
        if (!routing.route(rule.isPd() ? Role.PREFILL : Role.ANY)) {
            shedFull();
        }
    }

    private void responseHeaders(ProcessingRequest req) {
        if (phase != Phase.FORWARDED) {
            protocolError("response headers arrived " + (phase == Phase.RESPONSE ? "twice" : "before the request was forwarded"));
            return;
        }
        readServed(req);
        HttpHeaders h = req.getResponseHeaders();
        String s = EppProtocol.header(h.getHeaders(), ":status");
        status = parseStatus(s);
        routing.firstBytes();
        phase = Phase.RESPONSE;
        out.onNext(ProcessingResponse.newBuilder().setResponseHeaders(HeadersResponse.newBuilder()
            .setResponse(CommonResponse.getDefaultInstance())).build());
        if (h.getEndOfStream()) {
            responseEnded();
        }
    }

    private void responseBody(ProcessingRequest req) {
        if (phase != Phase.RESPONSE) {
            if (phase != Phase.DONE) {
                protocolError("a response body piece arrived before the response headers");
            }
            return;
        }
        readServed(req);
        HttpBody b = req.getResponseBody();
        if (!sawBody && !b.getBody().isEmpty()) {
            sawBody = true;
            picker.metrics().timeToFirstToken(rule.name(), picker.clock().nanoTime() - startNs, null);
        }
        keepTail(b.getBody());
        out.onNext(ProcessingResponse.newBuilder().setResponseBody(EppProtocol.streamed(b.getBody(), b.getEndOfStream())).build());
        if (b.getEndOfStream()) {
            responseEnded();
        }
    }

    private void responseTrailers(ProcessingRequest req) {
        if (phase != Phase.RESPONSE) {
            if (phase != Phase.DONE) {
                protocolError("response trailers arrived before the response headers");
            }
            return;
        }
        readServed(req);
        out.onNext(ProcessingResponse.newBuilder().setResponseTrailers(TrailersResponse.getDefaultInstance()).build());
        responseEnded();
    }

    // ---- the decision (on the loop, from the routing stage) ----------------------------------------------------

    @Override
    public void routed(Role role, EndpointState endpoint, String why) {
        if (endpoint == null) {
            picker.metrics().shed("no_endpoint");
            immediate(HttpResponseStatus.SERVICE_UNAVAILABLE, "no_endpoint", why == null
                ? "No endpoint of rule '" + rule.name() + "' is available." : why, null);
            return;
        }
        if (role == Role.PREFILL) {
            prefill = endpoint;
            if (!routing.route(Role.DECODE)) {
                shedFull();
            }
            return;
        }
        chosen = endpoint;
        String destination = destination(endpoint);
        ProcessingResponse.Builder decision = ProcessingResponse.newBuilder().setRequestHeaders(HeadersResponse.newBuilder()
            .setResponse(CommonResponse.newBuilder().setClearRouteCache(true)
                .setHeaderMutation(EppProtocol.destinationHeaders(destination, prefill == null ? null : prefill.hostHeader()))))
            .setDynamicMetadata(EppProtocol.namespaced(EppProtocol.LB_NAMESPACE, EppProtocol.DESTINATION, destination));
        out.onNext(decision.build());
        List<ByteString> pieces = EppProtocol.chunks(received);
        for (int i = 0; i < pieces.size(); i++) {
            boolean last = i == pieces.size() - 1;
            out.onNext(ProcessingResponse.newBuilder()
                .setRequestBody(EppProtocol.streamed(pieces.get(i), last && !requestTrailers)).build());
        }
        if (requestTrailers) {
            out.onNext(ProcessingResponse.newBuilder().setRequestTrailers(TrailersResponse.getDefaultInstance()).build());
        }
        received = ByteString.EMPTY;
        rc.end();
        phase = Phase.FORWARDED;
    }

    @Override
    public void shed(String message) {
        if (phase != Phase.DECIDING) {
            return;
        }
        picker.metrics().shed("admission");
        immediate(HttpResponseStatus.TOO_MANY_REQUESTS, "rate_limit_exceeded", message,
            Long.toString(Admission.retryAfterSeconds(rule.config().admission())));
    }

    private void shedFull() {
        picker.metrics().shed("router_ring_full");
        immediate(HttpResponseStatus.TOO_MANY_REQUESTS, "overloaded", "The gateway is overloaded; retry shortly.",
            Long.toString(picker.gateway().config().health().retryAfterSeconds()));
    }

    /**
     * The endpoint, then up to {@link #MAX_FALLBACKS} others Envoy may retry within the pool: endpoints the request
     * may take (its route, adapter and subset), neither drained nor with an open breaker, least loaded first.
     */
    private String destination(EndpointState pick) {
        int[] allowed = routing.servingEndpoints();
        List<EndpointState> others = new ArrayList<>();
        for (EndpointState e : rule.endpoints()) {
            if (e != pick && !e.drained() && e.breaker().state() != Breaker.State.OPEN
                && (allowed == null || Arrays.binarySearch(allowed, e.id()) >= 0)) {
                others.add(e);
            }
        }
        others.sort(Comparator.comparingInt(EndpointState::load));
        StringBuilder sb = new StringBuilder(pick.hostHeader());
        for (int i = 0; i < Math.min(MAX_FALLBACKS, others.size()); i++) {
            sb.append(',').append(others.get(i).hostHeader());
        }
        return sb.toString();
    }

    /** The sorted ids of {@code rule}'s endpoints named in the subset hint (and serving the request, when limited). */
    static int[] withinSubset(Rule rule, int[] serving, List<String> subset) {
        return rule.endpoints().stream()
            .filter(e -> subset.contains(e.hostHeader()))
            .mapToInt(EndpointState::id)
            .filter(id -> serving == null || Arrays.binarySearch(serving, id) >= 0)
            .sorted().toArray();
    }

    // ---- ends -------------------------------------------------------------------------------------------------

    /** The response is over: how the request ended on its endpoint, its usage, its count. */
    private void responseEnded() {
        Outcome outcome = status >= 500 || status == 0 ? Outcome.FAILURE : Outcome.SUCCESS;
        if (served != null && chosen != null && !served.equals(chosen.hostHeader())) {
            // Envoy moved to a fallback: the pick did not answer (connect failure, 5xx under its retry policy).
            picker.metrics().upstreamError(chosen.hostHeader(), "epp_served_elsewhere");
            outcome = Outcome.FAILURE;
        }
        picker.metrics().request(rule.name(), model, status, picker.clock().nanoTime() - startNs);
        Usage u = Usage.read(tail.toStringUtf8());
        if (u != null) {
            picker.metrics().tokens(rule.name(), model, u.prompt(), u.completion(), u.cached());
        }
        // Settled from the usage; without it, kept whole for an answer that succeeded (the engine did the work).
        io.kvgate.dataplane.tenant.Reservation res = rc.reservation();
        usedTokens = u != null ? u.prompt() + u.completion() : res != null && status > 0 && status < 400 ? res.tokens() : -1;
        end(outcome);
    }

    private void end(Outcome outcome) {
        phase = Phase.DONE;
        if (routing != null) {
            routing.end(outcome);
        }
        // Once (settling is idempotent): the usage of an answer that ended, else released (a refusal, Envoy gone).
        picker.gateway().tenants().settle(rc.reservation(), usedTokens);
        rc.end();
        received = ByteString.EMPTY;
    }

    private void refuse(Refusal r) {
        if (r.shed()) {
            picker.metrics().shed(r.reason());
        } else {
            picker.metrics().badRequest(r.reason());
        }
        FullHttpResponse resp = r.response(picker.alloc());
        try {
            ImmediateResponse.Builder ir = ImmediateResponse.newBuilder()
                .setStatus(HttpStatus.newBuilder().setCodeValue(resp.status().code()))
                .setBody(ByteString.copyFrom(resp.content().nioBuffer()));
            HeaderMutation.Builder hm = HeaderMutation.newBuilder();
            for (Map.Entry<String, String> e : resp.headers()) {
                if (!e.getKey().equalsIgnoreCase("content-length")) {
                    hm.addSetHeaders(EppProtocol.set(e.getKey().toLowerCase(java.util.Locale.ROOT), e.getValue()));
                }
            }
            ir.setHeaders(hm).setDetails(r.reason());
            answer(ir.build());
        } finally {
            resp.release();
        }
    }

    /** An ImmediateResponse with the OpenAI error object ({@code retryAfter}: a Retry-After header, or null). */
    private void immediate(HttpResponseStatus s, String code, String message, String retryAfter) {
        String body = OpenAiErrors.json(message, OpenAiErrors.typeFor(s.code()), null, code);
        HeaderMutation.Builder hm = HeaderMutation.newBuilder().addSetHeaders(EppProtocol.set("content-type", "application/json"));
        if (retryAfter != null) {
            hm.addSetHeaders(EppProtocol.set("retry-after", retryAfter));
        }
        answer(ImmediateResponse.newBuilder().setStatus(HttpStatus.newBuilder().setCodeValue(s.code()))
            .setHeaders(hm).setBody(ByteString.copyFromUtf8(body)).setDetails(code).build());
    }

    private void answer(ImmediateResponse ir) {
        end(Outcome.RELEASED);
        out.onNext(ProcessingResponse.newBuilder().setImmediateResponse(ir).build());
        out.onCompleted(); // Envoy answers the client itself and ends the stream
    }

    private void protocolError(String what) {
        picker.metrics().badRequest("epp_protocol");
        fail(Status.FAILED_PRECONDITION.withDescription("ext_proc protocol: " + what));
    }

    private void fail(Status s) {
        boolean wasDone = phase == Phase.DONE;
        end(Outcome.RELEASED);
        if (!wasDone) {
            out.onError(s.asRuntimeException());
        }
    }

    // ---- reading ----------------------------------------------------------------------------------------------

    private void readServed(ProcessingRequest req) {
        if (req.hasMetadataContext()) {
            String s = EppProtocol.served(req.getMetadataContext());
            if (s != null) {
                served = s;
            }
        }
    }

    private void keepTail(ByteString piece) {
        ByteString t = tail.concat(piece);
        tail = t.size() <= USAGE_TAIL_BYTES ? t : t.substring(t.size() - USAGE_TAIL_BYTES);
    }

    private static int parseStatus(String s) {
        try {
            return s == null ? 0 : Integer.parseInt(s.strip());
        } catch (NumberFormatException e) {
            return 0;
        }
    }

    /** The request head the stages read, from Envoy's pseudo-headers and headers. */
    static HttpRequest head(HttpHeaders h) {
        String method = "GET";
        String path = "/";
        String authority = null;
        List<HeaderValue> plain = new ArrayList<>();
        for (HeaderValue v : h.getHeaders().getHeadersList()) {
            switch (v.getKey()) {
                case ":method" -> method = EppProtocol.value(v);
                case ":path" -> path = EppProtocol.value(v);
                case ":authority" -> authority = EppProtocol.value(v);
                default -> {
                    if (!v.getKey().startsWith(":")) {
                        plain.add(v);
                    }
                }
            }
        }
        HttpRequest req = new DefaultHttpRequest(HttpVersion.HTTP_1_1, HttpMethod.valueOf(method), path);
        if (authority != null) {
            req.headers().set("host", authority);
        }
        for (HeaderValue v : plain) {
            req.headers().add(v.getKey(), EppProtocol.value(v));
        }
        return req;
    }

    /** Token counts from the answer's {@code usage}. */
    record Usage(long prompt, long completion, long cached) {
        private static final java.util.regex.Pattern PROMPT = java.util.regex.Pattern.compile("\"prompt_tokens\"\\s*:\\s*(\\d+)");
        private static final java.util.regex.Pattern COMPLETION = java.util.regex.Pattern.compile("\"completion_tokens\"\\s*:\\s*(\\d+)");
        private static final java.util.regex.Pattern CACHED = java.util.regex.Pattern.compile("\"cached_tokens\"\\s*:\\s*(\\d+)");

        /** The last usage object in {@code text}, or null. */
        static Usage read(String text) {
            int at = text.lastIndexOf("\"usage\"");
            if (at < 0) {
                return null;
            }
            String u = text.substring(at);
            long p = first(PROMPT, u);
            long c = first(COMPLETION, u);
            if (p < 0 && c < 0) {
                return null;
            }
            return new Usage(Math.max(0, p), Math.max(0, c), Math.max(0, first(CACHED, u)));
        }

        private static long first(java.util.regex.Pattern p, String s) {
            var m = p.matcher(s);
            return m.find() ? Long.parseLong(m.group(1)) : -1;
        }
    }
}
