package io.kvgate.control.config;

import java.util.ArrayList;

/**
 * Sections {@code tls} (the client listener) and {@code upstream_tls} (https engines), and the top-level
 * {@code proxy_protocol} key ({@link GatewayKeys#PROXY_PROTOCOL}): read by {@link TlsConfig#read}.
 */
public final class TlsKeys {
    private TlsKeys() {}

    public static final ConfigSection<TlsConfig.Listener> LISTENER = ConfigSection.optionalMapping(GatewayKeys.SECTION, "tls",
        "TLS on the client listener (see [tls](tls.md)); absent = plain HTTP", (GatewayConfig c) -> c.tls().listener(),
        l -> true);

    public static final ConfigKey<TlsConfig.Listener, String> CERT_FILE = LISTENER.stringKey("cert_file", null)
        .typeText("path").defaultText("required").doc("PEM certificate chain, leaf first (re-read on reload and when it changes)")
        .readBack(TlsConfig.Listener::certFile);
    public static final ConfigKey<TlsConfig.Listener, String> KEY_FILE = LISTENER.stringKey("key_file", null)
        .typeText("path").defaultText("required").doc("PEM PKCS#8 private key (RSA or EC) of the leaf certificate")
        .readBack(TlsConfig.Listener::keyFile);
    public static final ConfigKey<TlsConfig.Listener, String> CLIENT_CA_FILE = LISTENER.stringKey("client_ca_file", null)
        .typeText("path").doc("PEM CA certificates client certificates must chain to (with `client_auth` optional or require)")
        .readBack(TlsConfig.Listener::clientCaFile);
    public static final ConfigKey<TlsConfig.Listener, String> CLIENT_AUTH = LISTENER.oneOfKey("client_auth", "none",
            TlsConfig.CLIENT_AUTH_MODES)
        .doc("whether a client certificate is asked for (`optional`) or required (`require`)")
        .readBack(TlsConfig.Listener::clientAuth);
    public static final ConfigKey<TlsConfig.Listener, String> PROVIDER = LISTENER.oneOfKey("provider", "openssl",
            TlsConfig.PROVIDERS)
        .doc("TLS implementation: BoringSSL through netty-tcnative (measured faster) or the JDK's")
        .readBack(TlsConfig.Listener::provider);
    public static final ConfigKey<TlsConfig.Listener, java.util.List<String>> CLIENT_IDENTITIES =
        LISTENER.stringListKey("client_identities")
            .doc("subject CNs of verified client certificates that count as callers exactly like a valid API key")
            .readBack(l -> l.clientIdentities().isEmpty() ? null : new ArrayList<>(l.clientIdentities()));
    public static final ConfigKey<TlsConfig.Listener, Long> WATCH_INTERVAL_MS = LISTENER.longKey("watch_interval_ms", 5_000, 0,
            86_400_000L)
        .doc("how often the certificate files are checked for changes (0 = only on reload)")
        .readBack(TlsConfig.Listener::watchIntervalMs);

    public static final ConfigSection<TlsConfig.Upstream> UPSTREAM = ConfigSection.optionalMapping(GatewayKeys.SECTION,
        "upstream_tls", "TLS to `https://` engines: trust and client certificate (mTLS); absent = the JDK's default trust",
        (GatewayConfig c) -> c.tls().upstream(), u -> true);

    public static final ConfigKey<TlsConfig.Upstream, String> CA_FILE = UPSTREAM.stringKey("ca_file", null)
        .typeText("path").defaultText("the JDK's trust store").doc("PEM CA certificates engines' certificates must chain to")
        .readBack(TlsConfig.Upstream::caFile);
    public static final ConfigKey<TlsConfig.Upstream, String> UPSTREAM_CERT_FILE = UPSTREAM.stringKey("cert_file", null)
        .typeText("path").doc("PEM client certificate chain presented to engines (with `key_file`)")
        .readBack(TlsConfig.Upstream::certFile);
    public static final ConfigKey<TlsConfig.Upstream, String> UPSTREAM_KEY_FILE = UPSTREAM.stringKey("key_file", null)
        .typeText("path").doc("PEM PKCS#8 key of that client certificate (with `cert_file`)")
        .readBack(TlsConfig.Upstream::keyFile);

    public static final ConfigSection<TlsConfig.Picker> PICKER = ConfigSection.optionalMapping(GatewayKeys.SECTION,
        "epp_tls", "TLS (ALPN h2) on the endpoint picker's gRPC port `epp_listen` (see [kubernetes](kubernetes.md));"
            + " absent = cleartext HTTP/2", (GatewayConfig c) -> c.tls().picker(), p -> true).restartAsWhole();

    public static final ConfigKey<TlsConfig.Picker, String> EPP_CERT_FILE = PICKER.stringKey("cert_file", null)
        .typeText("path").defaultText("required").doc("PEM certificate chain, leaf first (read at start)")
        .restartOnly()
        .readBack(TlsConfig.Picker::certFile);
    public static final ConfigKey<TlsConfig.Picker, String> EPP_KEY_FILE = PICKER.stringKey("key_file", null)
        .typeText("path").defaultText("required").doc("PEM PKCS#8 private key (RSA or EC) of the leaf certificate")
        .restartOnly()
        .readBack(TlsConfig.Picker::keyFile);
    public static final ConfigKey<TlsConfig.Picker, String> EPP_CLIENT_CA_FILE = PICKER.stringKey("client_ca_file", null)
        .typeText("path").defaultText("no client certificate asked for")
        .doc("PEM CA certificates the gateway's (Envoy's) client certificate must chain to: set, a client without one is refused (mTLS)")
        .restartOnly()
        .readBack(TlsConfig.Picker::clientCaFile);
}
