package io.kvgate.epp.picker;

import io.grpc.netty.GrpcSslContexts;
import io.kvgate.control.config.ConfigException;
import io.kvgate.control.config.TlsConfig;
import io.kvgate.dataplane.tls.PemFiles;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import java.security.PrivateKey;
import java.security.cert.X509Certificate;
import java.util.List;

/**
 * {@code epp_tls}: the endpoint picker's server TLS context, built once at start from the same PEM rules as the client
 * listener's ({@link PemFiles}: PKCS#8 keys only, the key checked against the leaf). gRPC's own configuration
 * ({@link GrpcSslContexts}) sets ALPN {@code h2}, TLS 1.2/1.3 and HTTP/2's cipher suites; with {@code client_ca_file}
 * a client certificate chaining to it is required (mTLS between Envoy and the picker), and a client without one fails
 * the handshake.
 */
final class EppTls {
    private EppTls() {}

    /** The context for {@code cfg}, or a configuration error naming the key, the file and the problem. */
    static SslContext context(TlsConfig.Picker cfg) throws ConfigException {
        try {
            List<X509Certificate> chain = PemFiles.certificates("epp_tls.cert_file", cfg.certFile(),
                PemFiles.read("epp_tls.cert_file", cfg.certFile()));
            PrivateKey key = PemFiles.privateKey("epp_tls.key_file", cfg.keyFile(),
                PemFiles.read("epp_tls.key_file", cfg.keyFile()));
            if (!PemFiles.matches(key, chain.get(0))) {
                throw new ConfigException("epp_tls.key_file: value '" + cfg.keyFile() + "' is not the key of the certificate"
                    + " in epp_tls.cert_file (" + cfg.certFile() + ", " + chain.get(0).getSubjectX500Principal().getName() + ")");
            }
            SslContextBuilder b = GrpcSslContexts.configure(SslContextBuilder.forServer(key,
                chain.toArray(X509Certificate[]::new)));
            if (cfg.clientCaFile() != null) {
                List<X509Certificate> cas = PemFiles.certificates("epp_tls.client_ca_file", cfg.clientCaFile(),
                    PemFiles.read("epp_tls.client_ca_file", cfg.clientCaFile()));
                b.trustManager(cas.toArray(X509Certificate[]::new)).clientAuth(ClientAuth.REQUIRE);
            }
            return b.build();
        } catch (PemFiles.BadFile e) {
            throw new ConfigException(e.getMessage());
        } catch (javax.net.ssl.SSLException | RuntimeException e) {
            throw new ConfigException("epp_tls.cert_file: value '" + cfg.certFile() + "' cannot make a TLS context with"
                + " epp_tls.key_file " + cfg.keyFile() + " (" + e.getMessage() + ")");
        }
    }
}
