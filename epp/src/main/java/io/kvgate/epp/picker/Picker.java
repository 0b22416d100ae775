package io.kvgate.epp.picker;

import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.stub.StreamObserver;
import io.kvgate.control.clock.NanoClock;
import io.kvgate.dataplane.exchange.GatewayContext;
import io.kvgate.dataplane.http.DrainState;
import io.kvgate.dataplane.http.RequestPipeline;
import io.kvgate.dataplane.metrics.GatewayMetrics;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.EventLoop;
import io.netty.channel.EventLoopGroup;
import io.netty.util.concurrent.EventExecutor;
import io.netty.util.concurrent.FastThreadLocal;

/**
 * The ext_proc service: each {@code Process} stream is one {@link PickerStream} on the event loop that carries it.
 * What every stream shares: the gateway's data path and the one request pipeline (stateless apart from its
 * collaborators, as the HTTP listener's).
 */
final class Picker extends ExternalProcessorGrpc.ExternalProcessorImplBase {
    private final GatewayContext gateway;
    private final RequestPipeline pipeline;
    private final EventLoopGroup loops;
    /** The calling thread's event loop, looked up once per thread. */
    private final FastThreadLocal<EventLoop> current = new FastThreadLocal<>();

    Picker(GatewayContext gateway, DrainState drain, EventLoopGroup loops) {
        this.gateway = gateway;
        this.pipeline = new RequestPipeline(gateway, drain);
        this.loops = loops;
    }

    @Override
    public StreamObserver<ProcessingRequest> process(StreamObserver<ProcessingResponse> responses) {
        return new PickerStream(this, loop(), responses);
    }

    /** The event loop running this call (the direct executor runs it on its connection's loop), else any loop. */
    private EventLoop loop() {
        EventLoop l = current.get();
        if (l != null) {
            return l;
        }
        for (EventExecutor e : loops) {
            if (e.inEventLoop()) {
                current.set((EventLoop) e);
                return (EventLoop) e;
            }
        }
        return loops.next();
    }

    GatewayContext gateway() {
        return gateway;
    }

    RequestPipeline pipeline() {
        return pipeline;
    }

    GatewayMetrics metrics() {
        return gateway.metrics();
    }

    NanoClock clock() {
        return gateway.clock();
    }

    ByteBufAllocator alloc() {
        return ByteBufAllocator.DEFAULT;
    }
}
