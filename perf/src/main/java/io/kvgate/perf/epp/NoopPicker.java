package io.kvgate.perf.epp;

import com.google.protobuf.ByteString;
import io.envoyproxy.envoy.service.ext_proc.v3.CommonResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.HeadersResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.TrailersResponse;
import io.grpc.Server;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.StreamObserver;
import io.kvgate.epp.protocol.EppProtocol;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import java.net.InetSocketAddress;
import java.util.List;

/**
 * The baseline of {@code perf/epp-picker.sh}: an ext_proc server that does only what protocol 004 obliges any picker
 * to do (buffer the request body, answer the headers with a fixed destination in the header and
 * {@code dynamic_metadata["envoy.lb"]}, echo the body in pieces of at most 62,000 bytes, echo the response) and no
 * request work at all: no parse, no prompt, no routing. Timed through the same Envoy emulator on the same cores, its
 * round trips are the emulator's and gRPC's floor; kvgate's minus this floor is what kvgate's own stages add.
 * Plain grpc-netty on one NIO event loop, direct executor (as the picker runs its streams on its I/O loop).
 *
 * <pre>java -cp perf/target/kvgate-perf.jar:perf/target/lib/* io.kvgate.perf.epp.NoopPicker HOST:PORT DESTINATION</pre>
 */
public final class NoopPicker {
    private NoopPicker() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 2 || args[0].lastIndexOf(':') < 0) {
            System.err.println("usage: NoopPicker HOST:PORT DESTINATION (host:port of the endpoint every request is sent to)");
            System.exit(2);
        }
        int colon = args[0].lastIndexOf(':');
        String destination = args[1];
        EventLoopGroup loop = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory());
        Server server = NettyServerBuilder.forAddress(new InetSocketAddress(args[0].substring(0, colon),
                Integer.parseInt(args[0].substring(colon + 1))))
            .bossEventLoopGroup(loop).workerEventLoopGroup(loop).channelType(NioServerSocketChannel.class)
            .directExecutor().maxInboundMessageSize(8 << 20)
            .addService(new ExternalProcessorGrpc.ExternalProcessorImplBase() {
                @Override
                public StreamObserver<ProcessingRequest> process(StreamObserver<ProcessingResponse> out) {
                    return new Stream(out, destination);
                }
            })
            .build().start();
        System.err.println("no-op picker on " + args[0] + " -> " + destination);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            server.shutdownNow();
            loop.shutdownGracefully();
        }));
        server.awaitTermination();
    }

    /** One request's stream: nothing is read but what the protocol needs to answer in order. */
    private static final class Stream implements StreamObserver<ProcessingRequest> {
        private final StreamObserver<ProcessingResponse> out;
        private final String destination;
        private ByteString received = ByteString.EMPTY;
        private boolean decided;

        Stream(StreamObserver<ProcessingResponse> out, String destination) {
            this.out = out;
            this.destination = destination;
        }

        @Override
        public void onNext(ProcessingRequest req) {
            switch (req.getRequestCase()) {
                case REQUEST_HEADERS -> {
                    if (req.getRequestHeaders().getEndOfStream()) {
                        decide(false);
                    }
                }
                case REQUEST_BODY -> {
                    HttpBody b = req.getRequestBody();
                    received = received.concat(b.getBody());
                    if (b.getEndOfStream()) {
                        decide(false);
                    }
                }
                case REQUEST_TRAILERS -> {
                    if (!decided) {
                        decide(true);
                    } else {
                        out.onNext(ProcessingResponse.newBuilder().setRequestTrailers(TrailersResponse.getDefaultInstance()).build());
                    }
                }
                case RESPONSE_HEADERS -> out.onNext(ProcessingResponse.newBuilder().setResponseHeaders(HeadersResponse.newBuilder()
                    .setResponse(CommonResponse.getDefaultInstance())).build());
                case RESPONSE_BODY -> out.onNext(ProcessingResponse.newBuilder().setResponseBody(
                    EppProtocol.streamed(req.getResponseBody().getBody(), req.getResponseBody().getEndOfStream())).build());
                case RESPONSE_TRAILERS -> out.onNext(ProcessingResponse.newBuilder()
                    .setResponseTrailers(TrailersResponse.getDefaultInstance()).build());
                default -> { }
            }
        }

        /** The decision, then the body's echo (then the trailers' answer when the request ended with trailers). */
        private void decide(boolean trailers) {
            decided = true;
            out.onNext(ProcessingResponse.newBuilder().setRequestHeaders(HeadersResponse.newBuilder()
                    .setResponse(CommonResponse.newBuilder().setClearRouteCache(true)
                        .setHeaderMutation(EppProtocol.destinationHeaders(destination, null))))
                .setDynamicMetadata(EppProtocol.namespaced(EppProtocol.LB_NAMESPACE, EppProtocol.DESTINATION, destination))
                .build());
            List<ByteString> pieces = EppProtocol.chunks(received);
            for (int i = 0; i < pieces.size(); i++) {
                boolean last = i == pieces.size() - 1;
                out.onNext(ProcessingResponse.newBuilder()
                    .setRequestBody(EppProtocol.streamed(pieces.get(i), last && !trailers)).build());
            }
            if (trailers) {
                out.onNext(ProcessingResponse.newBuilder().setRequestTrailers(TrailersResponse.getDefaultInstance()).build());
            }
            received = ByteString.EMPTY;
        }

        @Override
        public void onError(Throwable t) {
            received = ByteString.EMPTY;
        }

        @Override
        public void onCompleted() {
            out.onCompleted();
        }
    }
}
