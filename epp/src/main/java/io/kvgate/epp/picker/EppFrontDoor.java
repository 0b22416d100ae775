package io.kvgate.epp.picker;

import io.grpc.Server;
import io.grpc.netty.NettyServerBuilder;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.log.Log;
import io.kvgate.dataplane.FrontDoor;
import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;

/**
 * {@code epp_listen}: kvgate as a Gateway API Inference Extension endpoint picker. One gRPC server (HTTP/2 cleartext,
 * or TLS with ALPN h2 under {@code epp_tls}: {@link EppTls})
 * on the gateway's own accept and I/O event loops, with a direct executor: each ext_proc stream runs on its
 * connection's loop, the same threads and routing-stage ports as the HTTP front door. It serves
 * {@code envoy.service.ext_proc.v3.ExternalProcessor} ({@link Picker}) and {@code grpc.health.v1.Health}
 * ({@link PickerHealth}) on the same port.
 */
public final class EppFrontDoor implements FrontDoor {
    /** The largest gRPC message taken: a body piece Envoy relays is far smaller, a whole body at most this. */
    private static final int MIN_INBOUND_MESSAGE_BYTES = 4 << 20;
    /** How long the close waits for streams to end after cancelling them. */
    private static final long CLOSE_WAIT_MS = 5_000;

    @Override
    public boolean configured(GatewayConfig config) {
        return config.eppListen() != null;
    }

    @Override
    public Open open(Wiring w) throws Exception {
        GatewayConfig.HostPort at = w.config().eppListen();
        int maxMessage = Math.max(MIN_INBOUND_MESSAGE_BYTES, w.config().limits().maxBodyBytes() + (64 << 10));
        var tls = w.config().tls().picker();
        NettyServerBuilder builder = NettyServerBuilder.forAddress(new InetSocketAddress(at.host(), at.port()));
        if (tls != null) {
            builder.sslContext(EppTls.context(tls));
        }
        Server server = builder
            .bossEventLoopGroup(w.boss())
            .workerEventLoopGroup(w.workers())
            .channelType(w.serverChannel())
            .directExecutor()
            .maxInboundMessageSize(maxMessage)
            .addService(new Picker(w.gateway(), w.drain(), w.workers()))
            .addService(new PickerHealth(w.readiness(), w.workers()))
            .build()
            .start();
        Log.info("endpoint picker (Envoy ext_proc, protocol 004, gRPC health" + (tls == null ? ", cleartext HTTP/2" : ", TLS"
            + (tls.clientCaFile() == null ? "" : " with required client certificates")) + ") on " + at.host() + ":"
            + server.getPort());
        return new Open() {
            @Override
            public int port() {
                return server.getPort();
            }

            @Override
            public void stopAccepting() {
                server.shutdown();
            }

            @Override
            public void close() {
                server.shutdownNow();
                try {
                    server.awaitTermination(CLOSE_WAIT_MS, TimeUnit.MILLISECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        };
    }
}
