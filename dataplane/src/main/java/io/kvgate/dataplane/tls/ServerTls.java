package io.kvgate.dataplane.tls;

import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.kvgate.control.config.ConfigException;
import io.kvgate.control.config.TlsConfig;
import io.netty.channel.Channel;
import io.netty.handler.ssl.ApplicationProtocolConfig;
import io.netty.handler.ssl.ApplicationProtocolNames;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.OpenSsl;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.ssl.SslHandler;
import io.netty.handler.ssl.SslProvider;
import io.netty.util.AttributeKey;
import java.security.PrivateKey;
import java.security.cert.X509Certificate;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

/**
 * The client listener's TLS context, hot-swappable: one volatile owner of the context in effect; every new
 * connection takes the context current when it is accepted ({@link #newHandler}); a swap never touches a connection
 * already open (its {@code SslEngine} keeps the context it was made from).
 *
 * <p>A new context is made by a reload ({@link #prepare} then {@link #install}: the reload answers with the file and the
 * problem when a file is bad, and nothing changes) and by the file watch ({@link #checkFiles}, run every
 * {@code tls.watch_interval_ms} on the admin loop): when the contents of the certificate, key or client-CA file
 * changed, the context is rebuilt; if the new files cannot be used (a key that does not match the new certificate —
 * typically a certificate renewed before its key was written), the context in effect stays, the problem is logged
 * once per distinct file contents and counted ({@code kvgate_tls_certificate_reloads_total{result="error"}}), and the
 * next change is tried again.
 *
 * <p>Thread-safe: {@link #newHandler} reads one volatile (I/O threads); building and swapping are serialized on this
 * object (reload thread, admin loop).
 */
public final class ServerTls {
    /**
     * The subject CN of the connection's verified client certificate, set once its handshake is done (absent without
     * one): what {@code tls.client_identities} is matched against.
     */
    public static final AttributeKey<String> CLIENT_IDENTITY = AttributeKey.valueOf("kvgate.tls.clientIdentity");

    /** Protocols offered: TLS 1.3 and 1.2 only (1.0/1.1 are deprecated by RFC 8996). */
    static final String[] PROTOCOLS = {"TLSv1.3", "TLSv1.2"};

    /** A built context with what it was built from. */
    public record Loaded(TlsConfig.Listener config, SslContext context, String filesDigest, X509Certificate leaf) {
        /** What a log line or reload answer says about the certificate in effect. */
        public String describe() {
            return "certificate " + leaf.getSubjectX500Principal().getName() + " serial " + leaf.getSerialNumber().toString(16)
                + " valid until " + leaf.getNotAfter().toInstant() + " (" + config.provider() + ")";
        }
    }

    private volatile Loaded current;
    private final Consumer<String> log;
    private final AtomicLong reloadsOk = new AtomicLong();
    private final AtomicLong reloadsFailed = new AtomicLong();
    private final AtomicLong handshakeFailures = new AtomicLong();
    /** The file contents the watch last failed to use: reported once, not at every poll. */
    private String lastFailedDigest;
    private volatile String lastError;

    /** @param log where the file watch reports a swap or a refused file (a reload reports through its answer) */
    public ServerTls(Consumer<String> log) {
        this.log = log;
    }

    /** The context in effect, or null when the listener is plain HTTP. */
    public Loaded current() {
        return current;
    }

    /** The last problem the file watch or a reload found with the files, or null. */
    public String lastError() {
        return lastError;
    }

    /** An SslHandler for a new connection with the context in effect, or null (plain HTTP). Any thread. */
    public SslHandler newHandler(Channel ch) {
        Loaded l = current;
        if (l == null) {
            return null;
        }
        SslHandler h = l.context().newHandler(ch.alloc());
        h.handshakeFuture().addListener(f -> {
            if (!f.isSuccess()) {
                handshakeFailures.incrementAndGet();
                return;
            }
            try {
                if (h.engine().getSession().getPeerCertificates()[0] instanceof X509Certificate peer) {
                    String cn = PemFiles.commonName(peer);
                    if (cn != null) {
                        ch.attr(CLIENT_IDENTITY).set(cn);
                    }
                }
            } catch (javax.net.ssl.SSLPeerUnverifiedException noClientCertificate) {
                // client_auth optional and none presented: the caller is identified by its API key alone
            }
        });
        return h;
    }

    /**
     * The context {@code cfg} asks for, built now (null for plain HTTP); the one in effect when neither the settings nor
     * the files' contents changed. A bad file is a ConfigException naming its key, the file and the problem.
     */
    public synchronized Loaded prepare(TlsConfig.Listener cfg) throws ConfigException {
        if (cfg == null) {
            return null;
        }
        Loaded now = current;
        String digest = PemFiles.digest(cfg.files());
        if (now != null && now.config().equals(cfg) && now.filesDigest().equals(digest)) {
            return now;
        }
        try {
            return build(cfg, digest);
        } catch (PemFiles.BadFile e) {
            reloadsFailed.incrementAndGet();
            lastError = e.getMessage();
            throw new ConfigException(e.getMessage() + " (the listener keeps its current TLS context)");
        }
    }

    /** Puts {@code next} in effect for new connections; returns what changed, for the reload's answer (empty: nothing). */
    public synchronized List<String> install(Loaded next) {
        Loaded prev = current;
        if (prev == next) {
            return List.of();
        }
        current = next;
        lastError = null;
        lastFailedDigest = null;
        if (next == null) {
            return List.of("tls: the listener serves plain HTTP to new connections");
        }
        reloadsOk.incrementAndGet();
        return List.of("tls: new connections use " + next.describe());
    }

    /**
     * The file watch: rebuilds the context when the contents of its files changed. Returns true when a new context was
     * put in effect. A file that cannot be used keeps the context in effect and is reported once per contents.
     */
    public synchronized boolean checkFiles() {
        Loaded now = current;
        if (now == null) {
            return false;
        }
        String digest = PemFiles.digest(now.config().files());
        if (digest.equals(now.filesDigest()) || digest.equals(lastFailedDigest)) {
            return false;
        }
        try {
            Loaded next = build(now.config(), digest);
            install(next);
            log.accept("tls: certificate files changed; new connections use " + next.describe());
            return true;
        } catch (PemFiles.BadFile e) {
            reloadsFailed.incrementAndGet();
            lastFailedDigest = digest;
            lastError = e.getMessage();
            log.accept("tls: certificate files changed but cannot be used, the listener keeps " + now.describe() + ": "
                + e.getMessage());
            return false;
        }
    }

    private static Loaded build(TlsConfig.Listener cfg, String digest) throws PemFiles.BadFile {
        List<X509Certificate> chain = PemFiles.certificates("tls.cert_file", cfg.certFile(),
            PemFiles.read("tls.cert_file", cfg.certFile()));
        PrivateKey key = PemFiles.privateKey("tls.key_file", cfg.keyFile(), PemFiles.read("tls.key_file", cfg.keyFile()));
        if (!PemFiles.matches(key, chain.get(0))) {
            throw new PemFiles.BadFile("tls.key_file", cfg.keyFile(), "is not the key of the certificate in tls.cert_file ("
                + cfg.certFile() + ", " + chain.get(0).getSubjectX500Principal().getName() + ")");
        }
        List<X509Certificate> clientCas = cfg.clientCaFile() == null ? null : PemFiles.certificates("tls.client_ca_file",
            cfg.clientCaFile(), PemFiles.read("tls.client_ca_file", cfg.clientCaFile()));
        SslProvider provider = provider(cfg.provider());
        try {
            SslContextBuilder b = SslContextBuilder.forServer(key, chain.toArray(X509Certificate[]::new))
                .sslProvider(provider)
                .protocols(PROTOCOLS)
                .applicationProtocolConfig(new ApplicationProtocolConfig(ApplicationProtocolConfig.Protocol.ALPN,
                    ApplicationProtocolConfig.SelectorFailureBehavior.NO_ADVERTISE,
                    ApplicationProtocolConfig.SelectedListenerFailureBehavior.ACCEPT, ApplicationProtocolNames.HTTP_1_1))
                .clientAuth(switch (cfg.clientAuthKind()) {
                    case NONE -> ClientAuth.NONE;
                    case OPTIONAL -> ClientAuth.OPTIONAL;
                    case REQUIRE -> ClientAuth.REQUIRE;
                });
            if (clientCas != null) {
                b.trustManager(clientCas.toArray(X509Certificate[]::new));
            }
            return new Loaded(cfg, b.build(), digest, chain.get(0));
        } catch (javax.net.ssl.SSLException | RuntimeException e) {
            throw new PemFiles.BadFile("tls.cert_file", cfg.certFile(), "cannot make a TLS context with tls.key_file "
                + cfg.keyFile() + " (" + provider + ": " + e.getMessage() + ")");
        }
    }

    /** {@code tls.provider}: BoringSSL through netty-tcnative, or the JDK's SSLEngine. */
    static SslProvider provider(String name) throws PemFiles.BadFile {
        if (name.equals("jdk")) {
            return SslProvider.JDK;
        }
        if (!OpenSsl.isAvailable()) {
            throw new PemFiles.BadFile("tls.provider", name, "is not available on this machine (netty-tcnative: "
                + OpenSsl.unavailabilityCause() + "); use provider: jdk");
        }
        return SslProvider.OPENSSL;
    }

    /**
     * Registers the listener's TLS families; they have samples only while TLS is configured or a certificate reload
     * was tried (a plain-HTTP gateway shows none of them).
     */
    public void register(PrometheusRegistry registry) {
        CounterWithCallback.builder().name("kvgate_tls_certificate_reloads_total")
            .help("Listener TLS contexts built from changed files (reload or file watch), by result.").labelNames("result")
            .callback(cb -> {
                if (inUse()) {
                    cb.call(reloadsOk.get(), "ok");
                    cb.call(reloadsFailed.get(), "error");
                }
            }).register(registry);
        GaugeWithCallback.builder().name("kvgate_tls_certificate_error")
            .help("1 while the certificate files on disk cannot be used (the listener keeps its context).")
            .callback(cb -> {
                if (inUse()) {
                    cb.call(lastError == null ? 0 : 1);
                }
            }).register(registry);
        CounterWithCallback.builder().name("kvgate_tls_handshake_failures_total")
            .help("Client TLS handshakes that failed (no common protocol, refused or missing client certificate, timeout).")
            .callback(cb -> {
                if (inUse()) {
                    cb.call(handshakeFailures.get());
                }
            }).register(registry);
        GaugeWithCallback.builder().name("kvgate_tls_certificate_not_after_seconds")
            .help("Expiry of the listener's certificate in effect (Unix time).")
            .callback(cb -> {
                Loaded l = current;
                if (l != null) {
                    cb.call(l.leaf().getNotAfter().getTime() / 1000);
                }
            }).register(registry);
    }

    private boolean inUse() {
        return current != null || reloadsOk.get() != 0 || reloadsFailed.get() != 0;
    }
}
