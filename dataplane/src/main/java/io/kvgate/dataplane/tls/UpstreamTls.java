package io.kvgate.dataplane.tls;

import io.kvgate.control.config.ConfigException;
import io.kvgate.control.config.EndpointConfig;
import io.kvgate.control.config.TlsConfig;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelPromise;
import io.netty.handler.ssl.JdkSslContext;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.ssl.SslHandler;
import io.netty.handler.ssl.SslProvider;
import java.net.http.HttpClient;
import java.security.PrivateKey;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.util.List;
import java.util.Objects;

/**
 * TLS to {@code https://} engines ({@code upstream_tls}): one client context, used by every place that connects to an
 * engine (the upstream pool, health probes, the load scraper, the model and parity probes). The engine's certificate
 * is verified against {@code upstream_tls.ca_file} (the JDK's default trust store without it) and its host name
 * against the endpoint URL's host, which is also sent as SNI; with {@code cert_file}/{@code key_file} the gateway
 * presents a client certificate (mTLS). The contexts are built lazily at the first https connection and rebuilt by a
 * reload when the section or its files changed; connections already open keep theirs. Thread-safe (one volatile).
 */
public final class UpstreamTls {
    private record Built(TlsConfig.Upstream config, String digest, SslContext netty, HttpClient jdk) {}

    private volatile Built built;
    private volatile TlsConfig.Upstream wanted;

    public UpstreamTls() {
        this(null);
    }

    /** @param cfg {@code upstream_tls}, or null (default trust, no client certificate) */
    public UpstreamTls(TlsConfig.Upstream cfg) {
        this.wanted = cfg;
    }

    /** Contexts built for a reload, not yet in effect ({@link #install}). */
    public static final class Prepared {
        private final Built built;

        private Prepared(Built built) {
            this.built = built;
        }
    }

    /**
     * Builds what {@code cfg} asks for now, so a reload refuses bad files before anything changes (a ConfigException
     * naming the key, the file and the problem); the contexts in effect when neither the section nor its files changed.
     */
    public synchronized Prepared prepare(TlsConfig.Upstream cfg) throws ConfigException {
        Built now = built;
        String digest = PemFiles.digest(files(cfg));
        if (now != null && Objects.equals(now.config(), cfg) && now.digest().equals(digest)) {
            return new Prepared(now);
        }
        if (now == null && cfg == null) {
            return new Prepared(null); // nothing to check: built with the defaults at the first https connection
        }
        try {
            return new Prepared(build(cfg, digest));
        } catch (PemFiles.BadFile e) {
            throw new ConfigException(e.getMessage() + " (connections to https engines keep the current TLS settings)");
        }
    }

    /** Whether {@code p} is what is in effect already (a reload with nothing new for engine TLS). */
    public boolean inEffect(Prepared p) {
        return p.built == built;
    }

    /** Puts prepared contexts in effect for new engine connections; returns what changed, for the reload's answer. */
    public synchronized List<String> install(Prepared p) {
        if (p.built == built) {
            return List.of();
        }
        boolean first = built == null;
        built = p.built;
        wanted = p.built == null ? null : p.built.config();
        return first ? List.of() : List.of("upstream_tls: new connections to https engines use the new CA/client certificate");
    }

    private static List<String> files(TlsConfig.Upstream cfg) {
        if (cfg == null) {
            return List.of();
        }
        return java.util.stream.Stream.of(cfg.caFile(), cfg.certFile(), cfg.keyFile()).filter(Objects::nonNull).toList();
    }

    private Built current() {
        Built b = built;
        if (b != null) {
            return b;
        }
        synchronized (this) {
            if (built == null) {
                try {
                    built = build(wanted, PemFiles.digest(files(wanted)));
                } catch (PemFiles.BadFile e) {
                    // Checked by the configuration and by apply() before it is put in effect: a file changed since.
                    throw new IllegalStateException(e.getMessage(), e);
                }
            }
            return built;
        }
    }

    /**
     * For an https endpoint, adds the TLS handler first in {@code ch}'s pipeline (SNI and hostname verification: the
     * URL's host) and returns a future that completes when the handshake is done, so a connection that fails it is a
     * failed connect (the caller's retry and breaker logic applies); for http, {@code connected} itself.
     */
    public ChannelFuture secure(Channel ch, EndpointConfig ep, ChannelFuture connected) {
        if (!ep.tls()) {
            return connected;
        }
        ChannelPromise ready = ch.newPromise();
        connected.addListener(f -> {
            if (!f.isSuccess()) {
                ready.tryFailure(f.cause());
                return;
            }
            SslHandler ssl = ch.pipeline().get(SslHandler.class);
            if (ssl == null) {
                ready.tryFailure(new IllegalStateException("no TLS handler on the connection to " + ep.url()));
                return;
            }
            ssl.handshakeFuture().addListener(h -> {
                if (h.isSuccess()) {
                    ready.trySuccess();
                } else {
                    ready.tryFailure(h.cause());
                }
            });
        });
        return ready;
    }

    /** Adds the TLS handler for an https endpoint at the head of a new connection's pipeline (nothing for http). */
    public void addHandler(Channel ch, EndpointConfig ep) {
        if (ep.tls()) {
            ch.pipeline().addFirst("tls", current().netty().newHandler(ch.alloc(), ep.host(), ep.port()));
        }
    }

    /** The JDK HTTP client for an https endpoint's probes (same trust and client certificate), or {@code plain}. */
    public HttpClient httpClient(EndpointConfig ep, HttpClient plain) {
        return ep.tls() ? current().jdk() : plain;
    }

    private static Built build(TlsConfig.Upstream cfg, String digest) throws PemFiles.BadFile {
        X509Certificate[] trust = null;
        PrivateKey key = null;
        X509Certificate[] chain = null;
        if (cfg != null && cfg.caFile() != null) {
            trust = PemFiles.certificates("upstream_tls.ca_file", cfg.caFile(), PemFiles.read("upstream_tls.ca_file",
                cfg.caFile())).toArray(X509Certificate[]::new);
        }
        if (cfg != null && cfg.certFile() != null) {
            chain = PemFiles.certificates("upstream_tls.cert_file", cfg.certFile(), PemFiles.read("upstream_tls.cert_file",
                cfg.certFile())).toArray(X509Certificate[]::new);
            key = PemFiles.privateKey("upstream_tls.key_file", cfg.keyFile(), PemFiles.read("upstream_tls.key_file",
                cfg.keyFile()));
            if (!PemFiles.matches(key, chain[0])) {
                throw new PemFiles.BadFile("upstream_tls.key_file", cfg.keyFile(), "is not the key of the certificate in"
                    + " upstream_tls.cert_file (" + cfg.certFile() + ")");
            }
        }
        try {
            SslContext netty = builder(trust, key, chain).sslProvider(SslProvider.isAlpnSupported(SslProvider.OPENSSL)
                && io.netty.handler.ssl.OpenSsl.isAvailable() ? SslProvider.OPENSSL : SslProvider.JDK).build();
            // The probes use the JDK's HTTP client: the same trust and key, as a JDK context.
            JdkSslContext jdk = (JdkSslContext) builder(trust, key, chain).sslProvider(SslProvider.JDK).build();
            HttpClient http = HttpClient.newBuilder().sslContext(jdk.context()).connectTimeout(Duration.ofSeconds(5)).build();
            return new Built(cfg, digest, netty, http);
        } catch (javax.net.ssl.SSLException | RuntimeException e) {
            String file = cfg == null ? "(default trust)" : String.valueOf(cfg.caFile());
            throw new PemFiles.BadFile("upstream_tls.ca_file", file, "cannot make a TLS context (" + e.getMessage() + ")");
        }
    }

    private static SslContextBuilder builder(X509Certificate[] trust, PrivateKey key, X509Certificate[] chain) {
        SslContextBuilder b = SslContextBuilder.forClient().protocols(ServerTls.PROTOCOLS)
            .endpointIdentificationAlgorithm("HTTPS");
        if (trust != null) {
            b.trustManager(trust);
        }
        if (key != null) {
            b.keyManager(key, chain);
        }
        return b;
    }
}
