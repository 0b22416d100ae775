package io.kvgate.dataplane.pd;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.dataplane.route.Decision;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.Role;
import io.kvgate.dataplane.trace.RequestTrace;
import io.kvgate.dataplane.wire.EngineRequest;
import io.opentelemetry.api.trace.Span;
import java.util.Locale;

/**
 * A sampled P/D request's spans that its exchange owns: each routing decision (one at a time: prefill, decode, or the
 * pair), the admission wait under it, and the prefill leg, whose span context the prefill engine gets as its parent.
 * The decode leg and the relay trace themselves. {@link #OFF} for a request that is not sampled: every call does
 * nothing. Event-loop only, like the exchange.
 */
final class PdSpans {
    /** A request that is not sampled. */
    static final PdSpans OFF = new PdSpans(null, null);

    private final RequestTrace trace;
    private final NanoClock clock;
    private Span routeSpan;
    /** When admission control held a leg's request (routing thread's writes, read after the decision): 0 when not. */
    private long admissionQueuedAtNs;
    private long admissionAdmittedAtNs;
    private Span prefillSpan;

    PdSpans(RequestTrace trace, NanoClock clock) {
        this.trace = trace;
        this.clock = clock;
    }

    /** A routing decision is asked for. */
    void routing() {
        if (trace != null) {
            routeSpan = trace.child("kvgate.route", clock.nanoTime());
        }
    }

    /** The decision arrived: when admission control held the request, how long (the wait goes under its route span). */
    void admission(Decision d) {
        if (trace != null && d.waitedForAdmission()) {
            admissionQueuedAtNs = d.admissionQueuedAtNs();
            admissionAdmittedAtNs = d.admissionAdmittedAtNs();
        }
    }

    /** The decision for {@code role} chose {@code ep} (null: none) for {@code why}; {@code failed} an error code, or null. */
    void routed(EndpointState ep, String why, Role role, String failed) {
        if (routeSpan == null) {
            return;
        }
        trace.decision(routeSpan, ep == null ? null : ep.key(), why, role.name().toLowerCase(Locale.ROOT));
        if (admissionAdmittedAtNs != 0) {
            trace.stageUnder(routeSpan, "kvgate.admission_wait", admissionQueuedAtNs, admissionAdmittedAtNs);
            admissionAdmittedAtNs = 0;
        }
        if (failed != null) {
            trace.fail(routeSpan, failed, clock.nanoTime());
        } else {
            trace.end(routeSpan, clock.nanoTime());
        }
        routeSpan = null;
    }

    /** The prefill leg starts at {@code startNs}: returns {@code request} carrying the leg span's context when sampled. */
    EngineRequest prefillStarted(EngineRequest request, long startNs, String endpoint, int attempt) {
        if (trace == null) {
            return request;
        }
        prefillSpan = trace.leg("kvgate.prefill_leg", startNs, endpoint, attempt);
        return request.withTrace(RequestTrace.traceHeaders(prefillSpan)); // the engine's parent
    }

    /** Ends the prefill leg's span, if open: {@code failed} is the error code, or null for a successful leg. */
    void prefillEnded(String failed) {
        if (prefillSpan == null) {
            return;
        }
        if (failed != null) {
            trace.fail(prefillSpan, failed, clock.nanoTime());
        } else {
            trace.end(prefillSpan, clock.nanoTime());
        }
        prefillSpan = null;
    }

    /**
     * The exchange ended: a prefill span still open ends with it (the request ended before the prefill answered, and
     * the leg was cancelled with it), and a decision still awaited fails as {@code client_gone}.
     */
    void ended() {
        prefillEnded(null);
        if (routeSpan != null) {
            trace.fail(routeSpan, "client_gone", clock.nanoTime());
            routeSpan = null;
        }
    }
}
