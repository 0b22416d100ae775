package io.kvgate.dataplane.http;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.accesslog.AccessRecord;
import io.kvgate.dataplane.accesslog.TraceIds;
import io.kvgate.dataplane.exchange.RequestContext;
import io.kvgate.dataplane.request.FrontRoute;
import io.kvgate.dataplane.request.Refusal;
import io.kvgate.dataplane.request.RequestFieldExtractor;
import io.kvgate.dataplane.route.PriorityClass;
import io.kvgate.dataplane.tenant.Tenant;
import io.kvgate.dataplane.tenant.TenantDirectory;
import io.kvgate.dataplane.trace.RequestTrace;
import io.kvgate.dataplane.trace.Tracing;
import io.netty.handler.codec.TooLongFrameException;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaders;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.TooLongHttpHeaderException;
import io.netty.handler.codec.http.TooLongHttpLineException;
import java.util.function.Supplier;

/**
 * The head stage: what is decided from the request head alone, before a body byte is buffered — a head the decoder
 * could not read, drain, route, method, the API key (or a client certificate standing in for one), Content-Type and
 * the declared length. A refused head never gets {@code 100 Continue} and its body is never read. On success the
 * context has its route, path, trace and (JSON routes) the body's field extractor. Event-loop only; no channel
 * needed.
 */
final class HeadStage {
    private final DrainState drain;
    private final Supplier<Tracing> tracing;

    /** @param tracing the gateway's tracer, read per request (it is installed at start-up, after this is built) */
    HeadStage(DrainState drain, Supplier<Tracing> tracing) {
        this.drain = drain;
        this.tracing = tracing;
    }

    /** @return the refusal that answers the request from its head, or null: read its body */
    Refusal run(RequestContext rc) {
        HttpRequest req = rc.head();
        GatewayConfig cfg = rc.config();
        AccessRecord access = rc.access();
        access.traceId = TraceIds.fromTraceparent(req.headers().get(TraceIds.HEADER));
        if (req.decoderResult().isFailure()) {
            return undecodable(req.decoderResult().cause(), cfg);
        }
        if (drain.draining()) {
            return Refusal.draining(cfg.health().retryAfterSeconds());
        }
        String uri = req.uri();
        int q = uri.indexOf('?');
        String path = q < 0 ? uri : uri.substring(0, q);
        FrontRoute route = FrontRoute.of(path);
        rc.route(route, path);
        if (route == FrontRoute.CHAT || route == FrontRoute.COMPLETIONS) {
            RequestTrace trace = tracing.get().begin(req.headers(), rc.startNs(), rc.startNs(), path, route.chat());
            rc.trace(trace);
            if (trace != null) {
                access.traceId = trace.traceId(); // a new trace when the client sent none: the log names the gateway's
            }
        }
        if (route == FrontRoute.UNKNOWN) {
            // An unknown /v1/ route reveals nothing to a client without a key: it gets the same 401 as a known one.
            if (path.startsWith("/v1/") && !authorized(rc)) {
                return Refusal.UNAUTHORIZED;
            }
            return Refusal.of(HttpResponseStatus.NOT_FOUND, "unknown_route", "Unknown route: " + req.method() + " " + path);
        }
        if (!route.allows(req.method())) {
            return Refusal.methodNotAllowed(path, route.allowed());
        }
        if (route.needsApiKey() && !authorized(rc)) {
            return Refusal.UNAUTHORIZED;
        }
        if (route.jsonBody()) {
            String ct = req.headers().get(HttpHeaderNames.CONTENT_TYPE);
            if (ct != null && !ct.regionMatches(true, 0, "application/json", 0, 16)) {
                return Refusal.of(HttpResponseStatus.UNSUPPORTED_MEDIA_TYPE, "content_type",
                    "Content-Type must be application/json (got '" + ct + "').");
            }
        }
        long declared = HttpUtil.getContentLength(req, -1L);
        int max = cfg.limits().maxBodyBytes();
        if (declared > max) {
            return Refusal.closing(HttpResponseStatus.REQUEST_ENTITY_TOO_LARGE, "body_too_large",
                "The request body (" + declared + " bytes) exceeds the limit of " + max + " bytes.");
        }
        if (route.jsonBody()) {
            rc.extractor(new RequestFieldExtractor(rc.fields()));
        }
        return null;
    }

    /** A head the decoder gave up on: the connection cannot go on (where would the next request start?). */
    private static Refusal undecodable(Throwable cause, GatewayConfig cfg) {
        if (cause instanceof TooLongHttpLineException) {
            return Refusal.closing(HttpResponseStatus.REQUEST_URI_TOO_LONG, "request_line_too_long",
                "The request line exceeds " + cfg.limits().maxInitialLineBytes() + " bytes.");
        }
        if (cause instanceof TooLongHttpHeaderException || cause instanceof TooLongFrameException) {
            return Refusal.closing(HttpResponseStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "headers_too_large",
                "The request headers exceed " + cfg.limits().maxHeaderBytes() + " bytes.");
        }
        return Refusal.closing(HttpResponseStatus.BAD_REQUEST, "malformed_http", "Malformed HTTP request: " + cause.getMessage());
    }

    /**
     * Whether the caller may use {@code /v1/*}: a key of a tenant ({@code tenants[].api_key_sha256}), a flat
     * {@code api_keys} key, or a verified client certificate whose subject CN is one of {@code tls.client_identities};
     * or any caller when no key of either kind is configured. The context gets the caller's tenant (the flat keys,
     * certificates and key-less gateways name the anonymous one); the access log names the caller by key id or
     * {@code cn:NAME}, never a key. The directory is the configuration captured at the head, so a reload that revokes
     * a key refuses it from the next request on.
     */
    private static boolean authorized(RequestContext rc) {
        GatewayConfig cfg = rc.config();
        TenantDirectory tenants = TenantDirectory.of(cfg);
        HttpHeaders headers = rc.head().headers();
        TenantDirectory.Resolved byKey = tenants.byKey(headers);
        if (byKey != null) {
            rc.access().keyId = byKey.keyId();
            caller(rc, byKey.tenant());
            return true;
        }
        java.util.List<String> keys = cfg.apiKeys();
        int key = ApiKeyAuth.matchedKey(keys, headers);
        rc.access().keyId = ApiKeyAuth.keyId(keys, key);
        if (key >= 0 || key == ApiKeyAuth.NO_KEYS && !tenants.hasKeys()) {
            caller(rc, tenants.anonymous());
            return true;
        }
        var tls = cfg.tls().listener();
        String identity = rc.clientIdentity();
        if (tls != null && ApiKeyAuth.identityAuthorized(tls.clientIdentities(), identity)) {
            rc.access().keyId = "cn:" + identity;
            caller(rc, tenants.anonymous());
            return true;
        }
        return false;
    }

    /**
     * Records the caller's tenant and makes its admission class the trusted one: a tenant's class replaces whatever
     * {@code X-Kvgate-Priority} the client sent unless the tenant lets its clients choose ({@code priority_header});
     * the anonymous tenant keeps the header (the behaviour before tenants). Admission reads the header downstream,
     * so rewriting it here is the one place the class is decided.
     */
    private static void caller(RequestContext rc, Tenant tenant) {
        rc.tenant(tenant);
        HttpHeaders headers = rc.head().headers();
        if (!tenant.priorityHeader()) {
            headers.remove(PriorityClass.HEADER);
            if (tenant.priority() != null) {
                headers.set(PriorityClass.HEADER, tenant.priority().label);
            }
        } else if (tenant.priority() != null && !headers.contains(PriorityClass.HEADER)) {
            headers.set(PriorityClass.HEADER, tenant.priority().label);
        }
    }
}
