package io.kvgate.control.config;

import java.io.IOException;
import java.io.Reader;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Locale;
import java.util.Objects;
import java.util.Set;
import java.util.function.Function;
import java.time.Duration;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.constructor.SafeConstructor;

/**
 * The whole applied configuration: immutable, validated once by {@link #parse}. The rule set inside it is handed
 * to the routing stage as one command, so a new configuration replaces the old one atomically while requests in
 * flight finish on the endpoints they already hold.
 */
public record GatewayConfig(
    HostPort listen,
    HostPort adminListen,
    String adminToken,
    String transport,
    int ioThreads,
    Limits limits,
    Upstream upstream,
    Health health,
    Router router,
    List<String> apiKeys,
    List<RuleConfig> rules,
    String apiKeysFile,
    String adminTokenFile,
    String controlSocket,
    List<Integer> controlAllowedUids,
    AdminLimits adminLimits,
    Ingest ingest,
    Load load,
    TlsConfig tls,
    TracingConfig tracing,
    LoggingConfig logging,
    ShutdownConfig shutdown,
    HostPort eppListen,
    TenancyConfig tenancy) {

    /** The shape before {@code epp_listen} and the tenancy keys existed: no endpoint picker, no tenants beyond {@code api_keys}. */
    public GatewayConfig(HostPort listen, HostPort adminListen, String adminToken, String transport, int ioThreads,
                         Limits limits, Upstream upstream, Health health, Router router, List<String> apiKeys,
                         List<RuleConfig> rules, String apiKeysFile, String adminTokenFile, String controlSocket,
                         List<Integer> controlAllowedUids, AdminLimits adminLimits, Ingest ingest, Load load, TlsConfig tls,
                         TracingConfig tracing, LoggingConfig logging, ShutdownConfig shutdown) {
        this(listen, adminListen, adminToken, transport, ioThreads, limits, upstream, health, router, apiKeys, rules,
            apiKeysFile, adminTokenFile, controlSocket, controlAllowedUids, adminLimits, ingest, load, tls, tracing, logging,
            shutdown, null, TenancyConfig.NONE);
    }

    /** The shape before the TLS, tracing, logging and shutdown sections existed: their defaults. */
    public GatewayConfig(HostPort listen, HostPort adminListen, String adminToken, String transport, int ioThreads,
                         Limits limits, Upstream upstream, Health health, Router router, List<String> apiKeys,
                         List<RuleConfig> rules, String apiKeysFile, String adminTokenFile, String controlSocket,
                         List<Integer> controlAllowedUids, AdminLimits adminLimits, Ingest ingest, Load load) {
        this(listen, adminListen, adminToken, transport, ioThreads, limits, upstream, health, router, apiKeys, rules,
            apiKeysFile, adminTokenFile, controlSocket, controlAllowedUids, adminLimits, ingest, load, TlsConfig.NONE,
            TracingConfig.OFF, LoggingConfig.DEFAULTS, ShutdownConfig.DEFAULTS);
    }

    /** The shape before the {@code load} section existed: engine-load scraping with its defaults. */
    public GatewayConfig(HostPort listen, HostPort adminListen, String adminToken, String transport, int ioThreads,
                         Limits limits, Upstream upstream, Health health, Router router, List<String> apiKeys,
                         List<RuleConfig> rules, String apiKeysFile, String adminTokenFile, String controlSocket,
                         List<Integer> controlAllowedUids, AdminLimits adminLimits, Ingest ingest) {
        this(listen, adminListen, adminToken, transport, ioThreads, limits, upstream, health, router, apiKeys, rules,
            apiKeysFile, adminTokenFile, controlSocket, controlAllowedUids, adminLimits, ingest, Load.DEFAULTS);
    }

    /** The shape before the {@code ingest} section existed: default ingest bounds. */
    public GatewayConfig(HostPort listen, HostPort adminListen, String adminToken, String transport, int ioThreads,
                         Limits limits, Upstream upstream, Health health, Router router, List<String> apiKeys,
                         List<RuleConfig> rules, String apiKeysFile, String adminTokenFile, String controlSocket,
                         List<Integer> controlAllowedUids, AdminLimits adminLimits) {
        this(listen, adminListen, adminToken, transport, ioThreads, limits, upstream, health, router, apiKeys, rules,
            apiKeysFile, adminTokenFile, controlSocket, controlAllowedUids, adminLimits, Ingest.DEFAULTS, Load.DEFAULTS);
    }

    /** The same configuration with {@code rules} in place of its rules (a resolved {@code hash_seed: auto}). */
    public GatewayConfig withRules(List<RuleConfig> rules) {
        return new GatewayConfig(listen, adminListen, adminToken, transport, ioThreads, limits, upstream, health, router,
            apiKeys, List.copyOf(rules), apiKeysFile, adminTokenFile, controlSocket, controlAllowedUids, adminLimits, ingest,
            load, tls, tracing, logging, shutdown, eppListen, tenancy);
    }

    public static final List<String> TRANSPORTS = List.of("epoll", "io_uring", "nio");

    /** What {@code GET /admin/v1/config} shows instead of a secret; a PUT that keeps it keeps the current secret. */
    public static final String REDACTED = "<redacted>";

    /**
     * Keys that only take effect at start-up: a reload that changes one is refused (409) naming it. Everything else
     * takes effect for the next request (connection-level limits: for the next connection). Derived from the keys'
     * declared scope ({@link Scope#RESTART}).
     */
    public static final List<String> RESTART_ONLY = ConfigSchema.restartOnly();

    /** The socket transport, typed. */
    public enum TransportKind { EPOLL, IO_URING, NIO }

    /** The routing thread's wait strategy, typed. */
    public enum WaitStrategy { BLOCKING, YIELDING, BUSY_SPIN }

    /**
     * Who runs the routing stage ({@code router.thread}): a thread of its own, or the gateway's one I/O event loop at
     * the end of each loop turn (Agrona's invoker mode). {@code AUTO} resolves per configuration:
     * {@link GatewayConfig#routerRunsOnIoThread}.
     */
    public enum RouterThread { AUTO, DEDICATED, IO }

    /** Limits of the admin HTTP listener (small, rare requests from operators). */
    public record AdminLimits(int maxConnections, long idleTimeoutMs, int maxBodyBytes) {
        public Duration idleTimeout() {
            return Duration.ofMillis(idleTimeoutMs);
        }
    }

    public TransportKind transportKind() {
        return TransportKind.valueOf(transport.toUpperCase(Locale.ROOT));
    }

    /** A listen address; loopback by default. */
    public record HostPort(String host, int port) {
        @Override
        public String toString() {
            return (host.contains(":") ? "[" + host + "]" : host) + ":" + port;
        }
    }

    /**
     * Client-side bounds: what one request may cost the gateway before it is refused. {@code maxConnectionsPerClient}
     * is {@code limits.max_connections_per_client} as configured ({@link #CONNECTIONS_PER_CLIENT_DEFAULT} when not
     * set: read the limit in effect with {@link #connectionsPerClient}); {@code maxBufferedResponseBytes} the unsent
     * response bytes above which a client connection is no longer read.
     */
    public record Limits(int maxBodyBytes, int maxHeaderBytes, int maxInitialLineBytes, long requestReadTimeoutMs,
                         long clientIdleTimeoutMs, int maxConnections, long clientStallTimeoutMs, int maxConnectionsPerClient,
                         int maxBufferedResponseBytes) {
        /** Netty's own write high-water mark: the smallest {@code max_buffered_response_bytes}, and its default. */
        public static final int DEFAULT_BUFFERED_RESPONSE_BYTES = 64 << 10;
        /**
         * {@code max_connections_per_client} not set: half of {@code max_connections}, whatever that becomes (kept
         * as this marker, not as a number, so a later change of max_connections moves it along).
         */
        public static final int CONNECTIONS_PER_CLIENT_DEFAULT = -1;

        /** The bounds before per-client fairness and the response-buffer bound were configurable (their defaults). */
        public Limits(int maxBodyBytes, int maxHeaderBytes, int maxInitialLineBytes, long requestReadTimeoutMs,
                      long clientIdleTimeoutMs, int maxConnections, long clientStallTimeoutMs) {
            this(maxBodyBytes, maxHeaderBytes, maxInitialLineBytes, requestReadTimeoutMs, clientIdleTimeoutMs, maxConnections,
                clientStallTimeoutMs, CONNECTIONS_PER_CLIENT_DEFAULT, DEFAULT_BUFFERED_RESPONSE_BYTES);
        }

        /**
         * The open connections one client address may hold, 0 for no limit. By default half of
         * {@code max_connections}: one address (a slowloris, a runaway client) can hold at most half the slots, so
         * the other clients always keep the other half, while a single reverse proxy in front (whose address every
         * client shares) still gets half of them.
         */
        public int connectionsPerClient() {
            return maxConnectionsPerClient == CONNECTIONS_PER_CLIENT_DEFAULT ? Math.max(1, maxConnections / 2)
                : maxConnectionsPerClient;
        }

        public Duration requestReadTimeout() {
            return Duration.ofMillis(requestReadTimeoutMs);
        }

        public Duration clientIdleTimeout() {
            return Duration.ofMillis(clientIdleTimeoutMs);
        }
    }

    /** Engine-side timeouts and retry bounds. */
    public record Upstream(long connectTimeoutMs, long firstByteTimeoutMs, long idleTimeoutMs, int maxConnectAttempts,
                           int maxIdlePerEndpoint, int maxErrorBodyBytes) {
        public Duration connectTimeout() {
            return Duration.ofMillis(connectTimeoutMs);
        }

        public Duration firstByteTimeout() {
            return Duration.ofMillis(firstByteTimeoutMs);
        }

        public Duration idleTimeout() {
            return Duration.ofMillis(idleTimeoutMs);
        }
    }

    /** Active probes and the per-endpoint circuit breaker. */
    public record Health(String path, long intervalMs, long timeoutMs, int healthyThreshold, int unhealthyThreshold,
                         int breakerFailureThreshold, long breakerOpenMs, long retryAfterSeconds) {
        public Duration interval() {
            return Duration.ofMillis(intervalMs);
        }

        public Duration breakerOpen() {
            return Duration.ofMillis(breakerOpenMs);
        }
    }

    /**
     * The routing stage: its ring, who runs it ({@code thread}: auto | dedicated | io) and, on a dedicated thread,
     * how that thread waits.
     */
    public record Router(int ringSize, String waitStrategy, String thread) {
        /** The shape before {@code router.thread} existed: {@code auto}. */
        public Router(int ringSize, String waitStrategy) {
            this(ringSize, waitStrategy, "auto");
        }

        public WaitStrategy waitStrategyKind() {
            return WaitStrategy.valueOf(waitStrategy.toUpperCase(Locale.ROOT));
        }

        public RouterThread threadKind() {
            return RouterThread.valueOf(thread.toUpperCase(Locale.ROOT));
        }
    }

    /**
     * Whether the routing stage runs on the I/O event loop: {@code router.thread: io}, or {@code auto} with exactly
     * one I/O thread ({@code io_threads: 1}) and the default {@code blocking} wait (a {@code yielding} or
     * {@code busy_spin} wait asks for a thread that spins, which only a dedicated thread can do). With one loop the
     * hand-off to a routing thread is a futex wake-up and two context switches on the same core for every batch; with
     * several loops a dedicated thread is what keeps one single writer of policy state for all of them.
     */
    public boolean routerRunsOnIoThread() {
        return switch (router.threadKind()) {
            case IO -> true;
            case DEDICATED -> false;
            case AUTO -> ioThreads == 1 && router.waitStrategyKind() == WaitStrategy.BLOCKING;
        };
    }

    /**
     * One endpoint (host:port) named by several rules is one engine with one KV-event publisher, subscribed once: two
     * rules that declare different {@code kv_events} for it (other URIs, or one connecting and one binding) would
     * leave the subscription to whichever rule came last, and a subscriber waiting at the wrong address stays
     * {@code connecting} for good. Refused, naming both rules, the endpoint and both values. A rule that declares no
     * {@code kv_events} for a shared endpoint does not conflict: it just does not ask for events.
     */
    static void checkKvEventsAgree(List<RuleConfig> rules, List<String> problems) {
        record Declared(String rule, String kvEvents, boolean bind) {
            String describe() {
                return "'" + kvEvents + "' (" + (bind ? "kv_events_bind: true, the gateway binds" : "the gateway connects") + ")";
            }
        }
        Map<String, Declared> first = new HashMap<>();
        for (int ri = 0; ri < rules.size(); ri++) {
            RuleConfig rule = rules.get(ri);
            for (int ei = 0; ei < rule.endpoints().size(); ei++) {
                EndpointConfig e = rule.endpoints().get(ei);
                if (e.kvEvents() == null || e.host() == null) {
                    continue;
                }
                Declared d = new Declared(rule.name(), e.kvEvents(), e.kvEventsBind());
                Declared prev = first.putIfAbsent(e.key(), d);
                if (prev != null && (!prev.kvEvents().equals(d.kvEvents()) || prev.bind() != d.bind())) {
                    problems.add("rules[" + ri + "] (name=" + rule.name() + ").endpoints[" + ei + "] (url=" + e.url()
                        + ").kv_events: value "
                        + d.describe() + " conflicts with rule '" + prev.rule() + "', which declares " + prev.describe()
                        + " for the same endpoint " + e.key() + ": an engine has one KV-event publisher; declare the same"
                        + " kv_events and kv_events_bind in every rule that names it");
                }
            }
        }
    }

    /**
     * KV-event ingest bounds (section {@code ingest}): what one engine, or any peer of a bound socket, may cost.
     *
     * @param maxFrameBytes      largest ZeroMQ frame accepted ({@code ZMQ_MAXMSGSIZE} on every SUB and DEALER): a
     *                           peer declaring a larger frame is disconnected before any buffer is reserved
     * @param receiveBufferBytes worst-case bytes one socket may queue; its receive high-water mark is
     *                           {@code receiveBufferBytes / maxFrameBytes} messages (ZeroMQ counts messages, not bytes)
     * @param socketReceiveBufferBytes {@code SO_RCVBUF} of every connecting event socket (0 = the kernel's default):
     *                           raw bytes the kernel holds while that queue is full, so one fast publisher does not
     *                           stall on every refill; JeroMQ also reserves it per connection as direct memory, so a
     *                           bound socket (any peer can connect) leaves it to the kernel
     * @param retryInitialMs     first delay before re-opening a subscription that failed (unresolvable host, bind in
     *                           use, ...); doubles per failure
     * @param retryMaxMs         cap of that delay
     * @param maxPeersPerBindSocket connections one bound ({@code kv_events_bind}) socket admits at once; the ZAP
     *                           handler refuses more
     */
    public record Ingest(int maxFrameBytes, long receiveBufferBytes, int socketReceiveBufferBytes, long retryInitialMs,
                         long retryMaxMs, int maxPeersPerBindSocket) {
        public static final Ingest DEFAULTS = new Ingest(16 << 20, 256L << 20, 256 << 10, 100, 30_000, 8);

        /** The section without {@code max_peers_per_bind_socket} (its default). */
        public Ingest(int maxFrameBytes, long receiveBufferBytes, int socketReceiveBufferBytes, long retryInitialMs,
                      long retryMaxMs) {
            this(maxFrameBytes, receiveBufferBytes, socketReceiveBufferBytes, retryInitialMs, retryMaxMs, 8);
        }
    }

    /**
     * Engine-reported load (section {@code load}): every endpoint's Prometheus page is scraped on a thread of its own
     * and the routing stage combines the engine's running + waiting requests with its own requests since that scrape.
     *
     * @param enabled          scrape at all (an endpoint whose page is missing or unreadable simply stays unknown)
     * @param scrapeIntervalMs time between two scrapes of one endpoint
     * @param staleMs          a reading older than this counts as unknown: the endpoint falls back to this gateway's
     *                         own in-flight count (flagged in explain output and {@code kvgate_engine_load_stale})
     * @param timeoutMs        bound of one scrape, connect included
     * @param maxBodyBytes     largest metrics page read; a larger one fails the scrape ({@code result="too_large"})
     * @param path             the metrics path on every endpoint, or null: each engine's own ({@code /metrics};
     *                           TensorRT-LLM's Prometheus page is {@code /prometheus/metrics}, its {@code /metrics}
     *                           being JSON)
     * @param peerDecay        {@code lifetime}: the other gateways' part of a reading (the engine's count less this
     *                         gateway's requests then) reverts to its recent mean as the reading ages, over this
     *                         gateway's measured request lifetime on the endpoint; {@code none}: it counts in full
     *                         until the reading is stale (before #14's replica fix)
     * @param ttftAware        the load-aware policies weigh an endpoint whose recent time to first token is more than
     *                         twice its rule's fleet value as that many times busier (docs/routing.md: TTFT-aware load)
     * @param ttftRecoverMs    how fast such an endpoint's excess over the fleet fades while no new first token is
     *                         measured there (exp(-age / this)), so it gets requests again and is re-measured
     */
    public record Load(boolean enabled, long scrapeIntervalMs, long staleMs, long timeoutMs, int maxBodyBytes, String path,
                       String peerDecay, boolean ttftAware, long ttftRecoverMs) {
        public static final String PEER_DECAY_LIFETIME = "lifetime";
        public static final String PEER_DECAY_NONE = "none";
        public static final java.util.List<String> PEER_DECAYS = java.util.List.of(PEER_DECAY_LIFETIME, PEER_DECAY_NONE);
        public static final long DEFAULT_TTFT_RECOVER_MS = 500;
        public static final Load DEFAULTS = new Load(true, 250, 2_000, 1_000, 4 << 20, null, PEER_DECAY_LIFETIME, false,
            DEFAULT_TTFT_RECOVER_MS);

        public Load(boolean enabled, long scrapeIntervalMs, long staleMs, long timeoutMs, int maxBodyBytes, String path) {
            this(enabled, scrapeIntervalMs, staleMs, timeoutMs, maxBodyBytes, path, PEER_DECAY_LIFETIME, false,
                DEFAULT_TTFT_RECOVER_MS);
        }

        /** The path to scrape on an endpoint whose engine serves its page at {@code enginePath}. */
        public String pathFor(String enginePath) {
            return path != null ? path : enginePath;
        }

        /** Whether the peers' part of a reading is predicted from its age ({@code peer_decay: lifetime}). */
        public boolean decaysPeers() {
            return PEER_DECAY_LIFETIME.equals(peerDecay);
        }
    }

    /**
     * {@code control_socket}: a path, or {@code off} for none. Written unquoted, as the README shows it, {@code off}
     * is YAML 1.1's boolean false (B-9: it became the path {@code "false"} and a socket of that name was bound), so
     * false means off too; true names no path and is refused.
     */
    private static String controlSocket(ConfigNode n) {
        String key = GatewayKeys.CONTROL_SOCKET.name();
        Object raw = n.raw(key);
        if (Boolean.FALSE.equals(raw)) {
            return "off";
        }
        if (Boolean.TRUE.equals(raw)) {
            n.problem(key, raw, "must be a socket path or off (an unquoted on/yes/true reads as true, "
                + "which names no path)");
            return null;
        }
        return n.string(key, null);
    }

    public static GatewayConfig load(Path file) throws ConfigException {
        String text;
        try {
            text = Files.readString(file, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new ConfigException("cannot read configuration file " + file + ": " + e.getMessage());
        }
        return parse(text, file.toAbsolutePath().getParent());
    }

    public static GatewayConfig parse(String yamlText) throws ConfigException {
        return parse(yamlText, null);
    }

    /** Parses and validates; relative {@code tokenizer} paths resolve against {@code baseDir} when given. */
    public static GatewayConfig parse(String yamlText, Path baseDir) throws ConfigException {
        return parse(yamlText, baseDir, System::getenv);
    }

    /**
     * Parses and validates. Relative paths ({@code tokenizer}, {@code api_keys_file}, {@code admin_token_file})
     * resolve against {@code baseDir} when given; {@code ${NAME}} in string values is looked up in {@code env}.
     */
    public static GatewayConfig parse(String yamlText, Path baseDir, Function<String, String> env) throws ConfigException {
        Object root;
        try {
            LoaderOptions options = new LoaderOptions();
            options.setAllowDuplicateKeys(false);
            options.setMaxAliasesForCollections(10);
            root = new Yaml(new SafeConstructor(options)).load(yamlText);
        } catch (Exception e) {
            throw new ConfigException("configuration is not valid YAML: " + e.getMessage().replace('\n', ' '));
        }
        if (!(root instanceof Map<?, ?> rootMap)) {
            throw new ConfigException("configuration must be a YAML mapping at the top level");
        }
        List<String> problems = new ArrayList<>();
        @SuppressWarnings("unchecked")
        ConfigNode n = new ConfigNode("", (Map<String, Object>) rootMap, problems, env);
        GatewayConfig cfg = read(n, baseDir);
        if (!problems.isEmpty()) {
            throw new ConfigException(problems);
        }
        return cfg;
    }

    public static GatewayConfig parse(Reader reader) throws ConfigException, IOException {
        StringBuilder sb = new StringBuilder();
        char[] buf = new char[8192];
        for (int r; (r = reader.read(buf)) > 0; ) {
            sb.append(buf, 0, r);
        }
        return parse(sb.toString());
    }

    static GatewayConfig read(ConfigNode n, Path baseDir) {
        HostPort listen = hostPort(n, GatewayKeys.LISTEN);
        HostPort admin = hostPort(n, GatewayKeys.ADMIN_LISTEN);
        // Off unless set: the endpoint picker is a second front door a Gateway API gateway (Envoy) talks to.
        HostPort eppListen = GatewayKeys.EPP_LISTEN.read(n) == null ? null : hostPort(n, GatewayKeys.EPP_LISTEN);
        if (eppListen != null && eppListen.port() != 0 && (eppListen.equals(listen) || eppListen.equals(admin))) {
            n.problem("epp_listen", eppListen.toString(), "must differ from " + (eppListen.equals(listen) ? "listen" : "admin_listen")
                + " (the picker speaks gRPC on a port of its own)");
        }
        String adminTokenFile = GatewayKeys.ADMIN_TOKEN_FILE.read(n);
        String adminToken = GatewayKeys.ADMIN_TOKEN.read(n);
        if (adminTokenFile != null) {
            if (adminToken != null) {
                n.problem("admin_token_file", adminTokenFile, "cannot be combined with admin_token (use one)");
            }
            adminToken = readSecretFile(n, "admin_token_file", adminTokenFile, baseDir).strip();
            if (adminToken.isEmpty()) {
                n.problem("admin_token_file", adminTokenFile, "is empty");
                adminToken = null;
            }
        }
        if (admin != null && !isLoopback(admin.host()) && (adminToken == null || adminToken.length() < 16)) {
            n.problem("admin_listen", admin.toString(), "is not a loopback address: set admin_token (at least 16 characters) to expose the admin API");
        }
        String transport = GatewayKeys.TRANSPORT.read(n);
        int ioThreads = GatewayKeys.IO_THREADS.read(n);

        ConfigNode l = n.child(LimitsKeys.SECTION.name());
        Limits limits = new Limits(LimitsKeys.MAX_BODY_BYTES.read(l), LimitsKeys.MAX_HEADER_BYTES.read(l),
            LimitsKeys.MAX_INITIAL_LINE_BYTES.read(l), LimitsKeys.REQUEST_READ_TIMEOUT_MS.read(l),
            LimitsKeys.CLIENT_IDLE_TIMEOUT_MS.read(l), LimitsKeys.MAX_CONNECTIONS.read(l),
            LimitsKeys.CLIENT_STALL_TIMEOUT_MS.read(l),
            // Not set: the marker, so the limit follows max_connections (also after a GET -> PUT).
            LimitsKeys.MAX_CONNECTIONS_PER_CLIENT.readIfSet(l, Limits.CONNECTIONS_PER_CLIENT_DEFAULT),
            LimitsKeys.MAX_BUFFERED_RESPONSE_BYTES.read(l));
        l.finish();

        ConfigNode u = n.child(UpstreamKeys.SECTION.name());
        Upstream upstream = new Upstream(UpstreamKeys.CONNECT_TIMEOUT_MS.read(u), UpstreamKeys.FIRST_BYTE_TIMEOUT_MS.read(u),
            UpstreamKeys.IDLE_TIMEOUT_MS.read(u), UpstreamKeys.MAX_CONNECT_ATTEMPTS.read(u),
            UpstreamKeys.MAX_IDLE_PER_ENDPOINT.read(u), UpstreamKeys.MAX_ERROR_BODY_BYTES.read(u));
        u.finish();

        ConfigNode h = n.child(HealthKeys.SECTION.name());
        Health health = new Health(HealthKeys.PATH.read(h), HealthKeys.INTERVAL_MS.read(h), HealthKeys.TIMEOUT_MS.read(h),
            HealthKeys.HEALTHY_THRESHOLD.read(h), HealthKeys.UNHEALTHY_THRESHOLD.read(h),
            HealthKeys.BREAKER_FAILURE_THRESHOLD.read(h), HealthKeys.BREAKER_OPEN_MS.read(h),
            HealthKeys.RETRY_AFTER_SECONDS.read(h));
        if (health.path() != null && !health.path().startsWith("/")) {
            h.problem("path", health.path(), "must start with '/'");
        }
        h.finish();

        ConfigNode r = n.child(RouterKeys.SECTION.name());
        int ring = RouterKeys.RING_SIZE.read(r);
        if (Integer.bitCount(ring) != 1) {
            r.problem("ring_size", ring, "must be a power of two");
            ring = RouterKeys.RING_SIZE.defaultValue();
        }
        String wait = RouterKeys.WAIT_STRATEGY.read(r);
        String routerThread = RouterKeys.THREAD.read(r);
        if (routerThread.equals("io") && ioThreads != 1) {
            r.problem("thread", routerThread, "requires io_threads: 1 (the routing stage runs on the one I/O event loop, its "
                + "single writer); io_threads is " + ioThreads + (ioThreads == 0 ? " (one per core)" : "")
                + ": use thread: dedicated or auto");
        }
        if (routerThread.equals("io") && !wait.equals("blocking")) {
            r.problem("wait_strategy", wait, "applies to a dedicated routing thread only: with router.thread: io "
                + "nothing waits (leave wait_strategy out, or use thread: dedicated)");
        }
        Router router = new Router(ring, wait, routerThread);
        r.finish();

        List<String> apiKeys = GatewayKeys.API_KEYS.read(n);
        String apiKeysFile = GatewayKeys.API_KEYS_FILE.read(n);
        if (apiKeysFile != null) {
            if (!apiKeys.isEmpty()) {
                n.problem("api_keys_file", apiKeysFile, "cannot be combined with api_keys (use one)");
            }
            List<String> fromFile = new ArrayList<>();
            for (String line : readSecretFile(n, "api_keys_file", apiKeysFile, baseDir).split("\n")) {
                String k = line.strip();
                if (!k.isEmpty() && !k.startsWith("#")) {
                    fromFile.add(k);
                }
            }
            if (fromFile.isEmpty()) {
                n.problem("api_keys_file", apiKeysFile, "holds no key (one per line): an empty list would turn authentication off;"
                    + " remove api_keys_file to run without keys");
            }
            apiKeys = fromFile;
        }
        for (String k : apiKeys) {
            if (k.equals(REDACTED)) {
                n.problem("api_keys", null, "contains '" + REDACTED + "': only a reload can keep a redacted secret (its current value)");
            }
        }
        if (REDACTED.equals(adminToken)) {
            n.problem("admin_token", null, "is '" + REDACTED + "': only a reload can keep a redacted secret (its current value)");
        }
        String controlSocket = controlSocket(n);
        List<Integer> allowedUids = GatewayKeys.CONTROL_ALLOWED_UIDS.read(n);
        ConfigNode al = n.child(AdminLimitsKeys.SECTION.name());
        AdminLimits adminLimits = new AdminLimits(AdminLimitsKeys.MAX_CONNECTIONS.read(al), AdminLimitsKeys.IDLE_TIMEOUT_MS.read(al),
            AdminLimitsKeys.MAX_BODY_BYTES.read(al));
        al.finish();

        ConfigNode in = n.child(IngestKeys.SECTION.name());
        Ingest ingest = new Ingest(IngestKeys.MAX_FRAME_BYTES.read(in), IngestKeys.RECEIVE_BUFFER_BYTES.read(in),
            IngestKeys.SOCKET_RECEIVE_BUFFER_BYTES.read(in), IngestKeys.RETRY_INITIAL_MS.read(in),
            IngestKeys.RETRY_MAX_MS.read(in), IngestKeys.MAX_PEERS_PER_BIND_SOCKET.read(in));
        if (ingest.receiveBufferBytes() < ingest.maxFrameBytes()) {
            in.problem("receive_buffer_bytes", ingest.receiveBufferBytes(), "must be >= ingest.max_frame_bytes ("
                + ingest.maxFrameBytes() + "): a socket must be able to hold one largest frame");
        }
        if (ingest.retryMaxMs() < ingest.retryInitialMs()) {
            in.problem("retry_max_ms", ingest.retryMaxMs(), "must be >= ingest.retry_initial_ms (" + ingest.retryInitialMs() + ")");
        }
        in.finish();

        ConfigNode ld = n.child(LoadKeys.SECTION.name());
        Load load = new Load(LoadKeys.ENABLED.read(ld), LoadKeys.SCRAPE_INTERVAL_MS.read(ld), LoadKeys.STALE_MS.read(ld),
            LoadKeys.TIMEOUT_MS.read(ld), LoadKeys.MAX_BODY_BYTES.read(ld), LoadKeys.PATH.read(ld), LoadKeys.PEER_DECAY.read(ld),
            LoadKeys.TTFT_AWARE.read(ld), LoadKeys.TTFT_RECOVER_MS.read(ld));
        if (load.path() != null && !load.path().startsWith("/")) {
            ld.problem("path", load.path(), "must start with '/'");
        }
        if (load.staleMs() < load.scrapeIntervalMs()) {
            ld.problem("stale_ms", load.staleMs(), "must be >= load.scrape_interval_ms (" + load.scrapeIntervalMs()
                + "): every reading would be stale before the next scrape replaces it");
        }
        ld.finish();

        List<RuleConfig> rules = new ArrayList<>();
        for (ConfigNode rn : n.children(RuleKeys.SECTION.name())) {
            rules.add(RuleConfig.read(rn));
        }
        if (rules.isEmpty()) {
            n.problems().add("rules: must list at least one rule");
        }
        Set<String> names = new HashSet<>();
        Map<String, String> modelOwner = new HashMap<>();
        List<RuleConfig> resolved = new ArrayList<>();
        for (RuleConfig rule : rules) {
            if (rule.name() != null && !names.add(rule.name())) {
                n.problems().add("rules (name=" + rule.name() + "): duplicate rule name");
            }
            List<String> clientNames = new ArrayList<>(rule.models());
            clientNames.addAll(rule.adapterNames());
            for (String model : clientNames) {
                String prev = modelOwner.putIfAbsent(model, rule.name());
                if (prev != null) {
                    n.problems().add("rules (name=" + rule.name() + ").models: model '" + model + "' is already served by rule '" + prev + "'");
                }
            }
            String tok = rule.tokenizer();
            if (tok != null && baseDir != null && !Path.of(tok).isAbsolute()) {
                tok = baseDir.resolve(tok).normalize().toString();
            }
            if (tok != null && !Files.isDirectory(Path.of(tok))) {
                n.problems().add("rules (name=" + rule.name() + ").tokenizer: value '" + rule.tokenizer()
                    + "' is not a directory (it must hold tokenizer.json[.gz] and tokenizer_config.json)");
            }
            ChatTemplateFile template = readChatTemplate(n, rule, baseDir);
            resolved.add((tok == null || tok.equals(rule.tokenizer())) && template == null ? rule : rule.withPaths(tok, template));
            if (rule.admission().enabled() && rule.admission().maxQueue() > router.ringSize()) {
                // A waiting request keeps its decision slot in its event loop's inbox (router.ring_size slots).
                n.problems().add("rules (name=" + rule.name() + ").admission.max_queue: value " + rule.admission().maxQueue()
                    + " must be <= router.ring_size (" + router.ringSize() + "): each waiting request holds a routing slot");
            }
        }
        checkKvEventsAgree(resolved, n.problems());
        TlsConfig tls = TlsConfig.read(n, baseDir);
        if (tls.picker() != null && eppListen == null) {
            n.problem("epp_tls", "(a mapping)", "applies only with epp_listen (TLS on the endpoint picker's port)");
        }
        TracingConfig tracing = TracingConfig.read(n);
        LoggingConfig logging = LoggingConfig.read(n, baseDir);
        ShutdownConfig shutdown = ShutdownConfig.read(n);
        TenancyConfig tenancy = TenancyConfig.read(n, baseDir, apiKeys);
        n.finish();
        return new GatewayConfig(listen, admin, adminToken, transport, ioThreads, limits, upstream, health, router,
            List.copyOf(apiKeys), List.copyOf(resolved), apiKeysFile, adminTokenFile, controlSocket, allowedUids, adminLimits,
            ingest, load, tls, tracing, logging, shutdown, eppListen, tenancy);
    }

    private static String readSecretFile(ConfigNode n, String key, String file, Path baseDir) {
        Path p = Path.of(file);
        if (!p.isAbsolute() && baseDir != null) {
            p = baseDir.resolve(p);
        }
        try {
            return Files.readString(p, StandardCharsets.UTF_8);
        } catch (IOException e) {
            n.problem(key, file, "cannot be read (" + e.getClass().getSimpleName() + ": " + e.getMessage() + ")");
            return "";
        }
    }

    /** Whether any endpoint publishes KV events (then the gateway keeps a block index). */
    public boolean needsKvIndex() {
        for (RuleConfig r : rules) {
            for (EndpointConfig e : r.endpoints()) {
                if (e.kvEvents() != null) {
                    return true;
                }
            }
        }
        return false;
    }

    /** The block index's capacity: the largest rule capacity (rules share one index keyed by block). */
    public long kvIndexCapacityBlocks() {
        long cap = 0;
        for (RuleConfig r : rules) {
            cap = Math.max(cap, r.kvCapacityBlocks());
        }
        return cap;
    }

    /**
     * The restart-only keys whose value differs in {@code next} (see {@link #RESTART_ONLY}); empty when {@code next}
     * can be applied live.
     */
    @SuppressWarnings({"unchecked", "rawtypes"})
    public List<String> restartOnlyChanges(GatewayConfig next) {
        List<String> changed = new ArrayList<>();
        for (ConfigSection<?> s : ConfigSchema.SECTIONS) {
            if (s != GatewayKeys.SECTION && s.parent() != GatewayKeys.SECTION || s.isList()) {
                continue; // rule keys: the index capacity, below (the index is shared by all rules)
            }
            Object mine = s == GatewayKeys.SECTION ? this : s.of(this);
            Object theirs = s == GatewayKeys.SECTION ? next : s.of(next);
            if (s.isRestartAsWhole()) {
                if (!Objects.equals(mine, theirs)) {
                    changed.add(s.path());
                }
                continue;
            }
            for (ConfigKey<?, ?> k : s.keys()) {
                Function get = k.readBackGetter();
                // An optional section (tls, upstream_tls) may be absent on either side: its keys then read as unset.
                if (k.scope() == Scope.RESTART
                    && !Objects.equals(mine == null ? null : get.apply(mine), theirs == null ? null : get.apply(theirs))) {
                    changed.add(k.path());
                }
            }
        }
        if (needsKvIndex() && next.needsKvIndex() && kvIndexCapacityBlocks() != next.kvIndexCapacityBlocks()) {
            changed.add("rules[*].kv_capacity_blocks (index capacity " + kvIndexCapacityBlocks() + " -> "
                + next.kvIndexCapacityBlocks() + ")");
        }
        return changed;
    }

    /**
     * A rule's {@code chat_template} file, resolved against {@code baseDir} and read now (a reload reads it again, so a
     * changed file changes the rule); null without one. A file that cannot be read is a problem naming the rule.
     */
    private static ChatTemplateFile readChatTemplate(ConfigNode n, RuleConfig rule, Path baseDir) {
        ChatTemplateFile t = rule.chatTemplate();
        if (t == null) {
            return null;
        }
        Path p = Path.of(t.path());
        if (!p.isAbsolute() && baseDir != null) {
            p = baseDir.resolve(p).normalize();
        }
        try {
            byte[] bytes = Files.readAllBytes(p);
            String source = StandardCharsets.UTF_8.newDecoder().decode(java.nio.ByteBuffer.wrap(bytes)).toString();
            return new ChatTemplateFile(p.toString(), source);
        } catch (java.nio.charset.CharacterCodingException e) {
            n.problems().add("rules (name=" + rule.name() + ").chat_template: value '" + t.path() + "' is not UTF-8 text");
        } catch (IOException e) {
            n.problems().add("rules (name=" + rule.name() + ").chat_template: value '" + t.path() + "' cannot be read ("
                + e.getClass().getSimpleName() + ": " + e.getMessage() + ")");
        }
        return new ChatTemplateFile(p.toString(), "");
    }

    /**
     * True only for an IP literal in 127.0.0.0/8 or ::1. A host name (even "localhost", even one starting "127.") is
     * not loopback: it resolves through DNS or /etc/hosts, which this check must not trust.
     */
    public static boolean isLoopback(String host) {
        if (host == null || host.isEmpty() || !(host.indexOf(':') >= 0 || host.chars().allMatch(c -> c == '.' || (c >= '0' && c <= '9')))) {
            return false;
        }
        try {
            return InetAddress.ofLiteral(host).isLoopbackAddress();
        } catch (IllegalArgumentException e) {
            return false;
        }
    }

    private static HostPort hostPort(ConfigNode n, ConfigKey<GatewayConfig, String> listenKey) {
        String key = listenKey.name();
        String s = listenKey.read(n);
        int colon = s.lastIndexOf(':');
        if (colon <= 0) {
            n.problem(key, s, "must be host:port");
            return null;
        }
        String host = s.substring(0, colon);
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        }
        try {
            int port = Integer.parseInt(s.substring(colon + 1));
            if (port < 0 || port > 65535) {
                throw new NumberFormatException();
            }
            return new HostPort(host, port);
        } catch (NumberFormatException e) {
            n.problem(key, s, "must be host:port with a port in [0, 65535]");
            return null;
        }
    }

    /** Finds the rule serving {@code model}, or null. */
    public RuleConfig ruleForModel(String model) {
        for (RuleConfig r : rules) {
            if (r.models().contains(model)) {
                return r;
            }
        }
        return null;
    }
}
