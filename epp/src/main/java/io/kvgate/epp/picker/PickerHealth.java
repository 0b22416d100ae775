package io.kvgate.epp.picker;

import io.grpc.Status;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import io.kvgate.dataplane.ready.Readiness;
import io.kvgate.epp.protocol.EppProtocol;
import io.netty.channel.EventLoopGroup;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * gRPC health on the picker's port, under the names an EPP answers: {@code liveness} (and the server as a whole,
 * {@code ""}) while it runs; {@code readiness} and {@code envoy.service.ext_proc.v3.ExternalProcessor} (what Envoy's
 * health check names) exactly when the gateway's own {@code GET /ready} would say ready. Every replica is ready on
 * its own: kvgate's replicas route as one, so there is no leader to elect and no passive replica.
 */
final class PickerHealth extends HealthGrpc.HealthImplBase {
    /** How often a watch looks at readiness again. */
    static final long WATCH_INTERVAL_MS = 1_000;

    private final Supplier<Readiness.Report> readiness;
    private final EventLoopGroup loops;

    PickerHealth(Supplier<Readiness.Report> readiness, EventLoopGroup loops) {
        this.readiness = readiness;
        this.loops = loops;
    }

    /** The status of {@code service}, or null for a name this server does not answer. */
    ServingStatus status(String service) {
        return switch (service) {
            case "", EppProtocol.HEALTH_LIVENESS -> ServingStatus.SERVING;
            case EppProtocol.HEALTH_READINESS, EppProtocol.HEALTH_EXT_PROC ->
                readiness.get().ready() ? ServingStatus.SERVING : ServingStatus.NOT_SERVING;
            default -> null;
        };
    }

    @Override
    public void check(HealthCheckRequest request, StreamObserver<HealthCheckResponse> out) {
        ServingStatus s = status(request.getService());
        if (s == null) {
            out.onError(Status.NOT_FOUND.withDescription("unknown service '" + request.getService() + "'").asRuntimeException());
            return;
        }
        out.onNext(HealthCheckResponse.newBuilder().setStatus(s).build());
        out.onCompleted();
    }

    @Override
    public void watch(HealthCheckRequest request, StreamObserver<HealthCheckResponse> out) {
        ServerCallStreamObserver<HealthCheckResponse> call = (ServerCallStreamObserver<HealthCheckResponse>) out;
        new Object() {
            ServingStatus last;

            void look() {
                if (call.isCancelled()) {
                    return;
                }
                ServingStatus s = status(request.getService());
                ServingStatus now = s == null ? ServingStatus.SERVICE_UNKNOWN : s;
                if (now != last) {
                    last = now;
                    out.onNext(HealthCheckResponse.newBuilder().setStatus(now).build());
                }
                loops.next().schedule(this::look, WATCH_INTERVAL_MS, TimeUnit.MILLISECONDS);
            }
        }.look();
    }
}
