package io.kvgate.control.config;

import java.util.ArrayList;
import java.util.List;

/** The top-level keys of the configuration (the sections below it are declared in their own {@code *Keys}). */
public final class GatewayKeys {
    private GatewayKeys() {}

    public static final ConfigSection<GatewayConfig> SECTION = ConfigSection.root("the gateway as a whole");

    public static final ConfigKey<GatewayConfig, String> LISTEN = SECTION.stringKey("listen", "127.0.0.1:8080")
        .typeText("host:port").doc("client listener").restartOnly().readBack(c -> c.listen().toString());
    public static final ConfigKey<GatewayConfig, String> ADMIN_LISTEN = SECTION.stringKey("admin_listen", "127.0.0.1:8081")
        .typeText("host:port").doc("admin API; a non-loopback address requires `admin_token` (at least 16 characters)")
        .restartOnly().readBack(c -> c.adminListen().toString());
    public static final ConfigKey<GatewayConfig, String> EPP_LISTEN = SECTION.stringKey("epp_listen", null)
        .typeText("host:port").defaultText("off")
        .doc("also serve as a Gateway API Inference Extension endpoint picker (Envoy ext_proc over gRPC, protocol 004, with"
            + " gRPC health on the same port) over the same rules; see [kubernetes](kubernetes.md)")
        .restartOnly().readBack(c -> c.eppListen() == null ? null : c.eppListen().toString());
    public static final ConfigKey<GatewayConfig, String> ADMIN_TOKEN_FILE = SECTION.stringKey("admin_token_file", null)
        .doc("file holding the admin token (relative to the config file; re-read on every reload); not with `admin_token`")
        .readBack(GatewayConfig::adminTokenFile);
    public static final ConfigKey<GatewayConfig, String> ADMIN_TOKEN = SECTION.stringKey("admin_token", null)
        .doc("`Authorization: Bearer` token for the admin API").secret()
        .readBack(c -> c.adminTokenFile() != null ? null : c.adminToken());
    public static final ConfigKey<GatewayConfig, String> TRANSPORT = SECTION.enumKey("transport", "io_uring",
            GatewayConfig.TransportKind.class)
        .doc("socket transport; io_uring falls back to epoll (and epoll to nio) with a log line where the kernel lacks it")
        .restartOnly().readBack(GatewayConfig::transport);
    public static final ConfigKey<GatewayConfig, Integer> IO_THREADS = SECTION.intKey("io_threads", 0, 0, 256)
        .defaultText("0 (one per core)").doc("Netty I/O threads").restartOnly().readBack(GatewayConfig::ioThreads);
    public static final ConfigKey<GatewayConfig, Object> CONTROL_SOCKET = SECTION.customKey("control_socket", "path or `off`")
        .defaultText("see [operations](operations.md)")
        .doc("Unix socket path of the control socket (`off`, quoted or not, = none; `true` is refused)")
        .restartOnly().readBack(GatewayConfig::controlSocket);
    public static final ConfigKey<GatewayConfig, List<Integer>> CONTROL_ALLOWED_UIDS = SECTION.intListKey("control_allowed_uids",
            0, 0xFFFF_FFFEL)
        .doc("uids besides the gateway's own that may use the control socket")
        .readBack(c -> c.controlAllowedUids().isEmpty() ? null : new ArrayList<>(c.controlAllowedUids()));
    public static final ConfigKey<GatewayConfig, String> API_KEYS_FILE = SECTION.stringKey("api_keys_file", null)
        .doc("file with one API key per line (`#` comments; empty is refused); not with `api_keys`")
        .readBack(GatewayConfig::apiKeysFile);
    public static final ConfigKey<GatewayConfig, List<String>> API_KEYS = SECTION.stringListKey("api_keys")
        .doc("when set, every `/v1/*` route and `/metrics` require `Authorization: Bearer <key>`").secret()
        .readBack(c -> c.apiKeysFile() != null || c.apiKeys().isEmpty() ? null : new ArrayList<>(c.apiKeys()));
    public static final ConfigKey<GatewayConfig, Boolean> PROXY_PROTOCOL = SECTION.boolKey("proxy_protocol", false)
        .doc("every client connection starts with a PROXY protocol v1 or v2 header (HAProxy, an L4 balancer); its client"
            + " address is the one limits and logs use (new connections follow a reload)")
        .readBack(c -> c.tls().proxyProtocol() ? Boolean.TRUE : null);
    public static final ConfigKey<GatewayConfig, Integer> REPLICAS = SECTION.intKey("replicas", 1, 1, 1024)
        .doc("gateway replicas sharing the fleet: without `rate_limit_store` (or when it fails with `on_failure: local`) each"
            + " enforces `limit / replicas` of every tenant limit (see [tenants](tenants.md))")
        .readBack(c -> c.tenancy().replicas() > 1 ? c.tenancy().replicas() : null);
}
