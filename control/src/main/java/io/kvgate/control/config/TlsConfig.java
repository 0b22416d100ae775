package io.kvgate.control.config;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Transport security of the gateway (top-level keys {@code tls}, {@code proxy_protocol} and {@code upstream_tls}):
 * TLS on the client listener, the PROXY protocol header in front of it, and TLS to {@code https://} engines.
 * Immutable; file paths are resolved against the configuration file's directory when parsed, and must be readable
 * then. Whether their contents are a usable certificate chain and key is decided where the TLS contexts are built
 * (the dataplane), which reports the field and the file the same way.
 *
 * @param listener      {@code tls}: TLS on the client listener, or null for plain HTTP
 * @param proxyProtocol {@code proxy_protocol}: every client connection starts with a PROXY protocol v1 or v2 header
 *                      (HAProxy {@code send-proxy}/{@code send-proxy-v2}, a cloud L4 balancer); the client address
 *                      it names is the one limits and logs use
 * @param upstream      {@code upstream_tls}: trust and client certificate for {@code https://} engines, or null
 *                      (https engines are then verified against the JDK's default trust store, no client certificate)
 */
public record TlsConfig(Listener listener, boolean proxyProtocol, Upstream upstream, Picker picker) {
    /** No TLS, no PROXY protocol: the configuration before this section existed. */
    public static final TlsConfig NONE = new TlsConfig(null, false, null, null);

    /** The shape before {@code epp_tls} existed: the endpoint picker in cleartext. */
    public TlsConfig(Listener listener, boolean proxyProtocol, Upstream upstream) {
        this(listener, proxyProtocol, upstream, null);
    }

    /**
     * {@code epp_tls}: TLS on the endpoint picker's gRPC port ({@code epp_listen}), ALPN {@code h2}. Its context is
     * built once at start (the picker's port is restart-only), from the same PEM rules as the client listener's.
     *
     * @param certFile     PEM certificate chain, leaf first (absolute path)
     * @param keyFile      PEM PKCS#8 private key (RSA or EC) of the leaf (absolute path)
     * @param clientCaFile PEM CA certificates Envoy's client certificate must chain to (then required: mTLS), or null
     */
    public record Picker(String certFile, String keyFile, String clientCaFile) {}

    public static final List<String> CLIENT_AUTH_MODES = List.of("none", "optional", "require");
    public static final List<String> PROVIDERS = List.of("openssl", "jdk");

    /** How the listener treats client certificates ({@code tls.client_auth}). */
    public enum ClientAuth { NONE, OPTIONAL, REQUIRE }

    /**
     * TLS on the client listener.
     *
     * @param certFile         PEM certificate chain, leaf first (absolute path)
     * @param keyFile          PEM PKCS#8 private key (RSA or EC) of the leaf (absolute path)
     * @param clientCaFile     PEM CA certificates that client certificates must chain to, or null
     * @param clientAuth       {@code none | optional | require}
     * @param provider         {@code openssl} (netty-tcnative BoringSSL, the default: measured faster) or {@code jdk}
     * @param clientIdentities subject common names (CN) of verified client certificates that count as authorized
     *                         callers of {@code /v1/*} exactly like a valid API key
     * @param watchIntervalMs  how often the certificate files are checked for changes (0 = only on reload)
     */
    public record Listener(String certFile, String keyFile, String clientCaFile, String clientAuth, String provider,
                           List<String> clientIdentities, long watchIntervalMs) {
        public ClientAuth clientAuthKind() {
            return ClientAuth.valueOf(clientAuth.toUpperCase(Locale.ROOT));
        }

        /** The files whose contents make the listener's TLS context (what the file watch compares). */
        public List<String> files() {
            List<String> f = new ArrayList<>(List.of(certFile, keyFile));
            if (clientCaFile != null) {
                f.add(clientCaFile);
            }
            return f;
        }
    }

    /**
     * TLS to engines whose URL is {@code https://}: hostname verification against the URL's host (also sent as SNI).
     *
     * @param caFile   PEM CA certificates engines' certificates must chain to, or null for the JDK's default trust
     * @param certFile PEM client certificate chain presented to engines (mTLS), or null
     * @param keyFile  PEM PKCS#8 key of that certificate, required with it
     */
    public record Upstream(String caFile, String certFile, String keyFile) {}

    /** Reads {@code tls}, {@code proxy_protocol} and {@code upstream_tls} of the root node. */
    public static TlsConfig read(ConfigNode root, Path baseDir) {
        Listener listener = null;
        if (root.has("tls")) {
            ConfigNode t = root.child("tls");
            String cert = file(t, TlsKeys.CERT_FILE, true, baseDir);
            String key = file(t, TlsKeys.KEY_FILE, true, baseDir);
            String ca = file(t, TlsKeys.CLIENT_CA_FILE, false, baseDir);
            String auth = TlsKeys.CLIENT_AUTH.read(t);
            if (!auth.equals("none") && ca == null && !t.has("client_ca_file")) {
                t.problem("client_auth", auth, "needs tls.client_ca_file (the CA client certificates are verified against)");
            }
            if (ca != null && auth.equals("none")) {
                t.problem("client_ca_file", t.string("client_ca_file", null), "applies only with client_auth: optional or"
                    + " require (with none no client certificate is asked for)");
            }
            String provider = TlsKeys.PROVIDER.read(t);
            List<String> identities = TlsKeys.CLIENT_IDENTITIES.read(t);
            if (!identities.isEmpty() && auth.equals("none")) {
                t.problem("client_identities", identities, "applies only with client_auth: optional or require"
                    + " (an identity is read from a verified client certificate)");
            }
            long watch = TlsKeys.WATCH_INTERVAL_MS.read(t);
            t.finish();
            listener = new Listener(cert, key, ca, auth, provider, List.copyOf(identities), watch);
        }
        Picker picker = null;
        if (root.has("epp_tls")) {
            ConfigNode e = root.child("epp_tls");
            String cert = file(e, TlsKeys.EPP_CERT_FILE, true, baseDir);
            String key = file(e, TlsKeys.EPP_KEY_FILE, true, baseDir);
            String ca = file(e, TlsKeys.EPP_CLIENT_CA_FILE, false, baseDir);
            e.finish();
            picker = new Picker(cert, key, ca);
        }
        boolean proxyProtocol = GatewayKeys.PROXY_PROTOCOL.read(root);
        Upstream upstream = null;
        if (root.has("upstream_tls")) {
            ConfigNode u = root.child("upstream_tls");
            String ca = file(u, TlsKeys.CA_FILE, false, baseDir);
            String cert = file(u, TlsKeys.UPSTREAM_CERT_FILE, false, baseDir);
            String key = file(u, TlsKeys.UPSTREAM_KEY_FILE, false, baseDir);
            if (u.has("cert_file") != u.has("key_file")) {
                u.problem(u.has("cert_file") ? "key_file" : "cert_file", null,
                    "is required with upstream_tls." + (u.has("cert_file") ? "cert_file" : "key_file")
                        + " (a client certificate needs its key)");
            }
            u.finish();
            upstream = new Upstream(ca, cert, key);
        }
        return listener == null && !proxyProtocol && upstream == null && picker == null ? NONE
            : new TlsConfig(listener, proxyProtocol, upstream, picker);
    }

    /** A file key: absent (null, or a problem when required), or its absolute path, which must be readable now. */
    private static String file(ConfigNode n, ConfigKey<?, String> declared, boolean required, Path baseDir) {
        String key = declared.name();
        String s = declared.read(n);
        if (s == null) {
            if (required) {
                n.problem(key, null, "is required in " + n.path() + " (a PEM file)");
            }
            return null;
        }
        Path p = Path.of(s);
        if (!p.isAbsolute() && baseDir != null) {
            p = baseDir.resolve(p).normalize();
        }
        if (!Files.isRegularFile(p) || !Files.isReadable(p)) {
            n.problem(key, s, "is not a readable file" + (p.toString().equals(s) ? "" : " (" + p + ")"));
        }
        return p.toString();
    }
}
