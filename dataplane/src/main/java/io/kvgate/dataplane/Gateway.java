package io.kvgate.dataplane;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.ConfigException;
import io.kvgate.control.config.ConfigTree;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.control.log.Log;
import io.kvgate.net.Transport;
import io.kvgate.dataplane.trace.Tracing;
import io.kvgate.dataplane.admin.AdminApi;
import io.kvgate.dataplane.admin.AdminChannelInitializer;
import io.kvgate.dataplane.admin.ControlSocket;
import io.kvgate.dataplane.config.AppliedConfig;
import io.kvgate.dataplane.config.ConfigCheck;
import io.kvgate.dataplane.config.ControlPlane;
import io.kvgate.dataplane.config.ReloadMetrics;
import io.kvgate.dataplane.config.ReloadOutcome;
import io.kvgate.dataplane.config.RestartRequiredException;
import io.kvgate.dataplane.http.ClientChannelInitializer;
import io.kvgate.dataplane.tls.ServerTls;
import io.kvgate.dataplane.tls.UpstreamTls;
import io.kvgate.dataplane.http.ConnectionLimit;
import io.kvgate.dataplane.http.DrainState;
import io.kvgate.dataplane.http.LocalRoutes;
import io.kvgate.dataplane.kv.KvRoutes;
import io.kvgate.dataplane.load.EngineLoadScraper;
import io.kvgate.dataplane.prompt.PromptPipeline;
import io.kvgate.dataplane.prompt.RenderRoutes;
import io.kvgate.dataplane.prompt.TokenizerCache;
import io.kvgate.dataplane.kv.KvState;
import io.kvgate.dataplane.metrics.FamilyRegistry;
import io.kvgate.dataplane.quality.PromptLedger;
import io.kvgate.dataplane.accesslog.AccessLog;
import io.kvgate.dataplane.metrics.GatewayMetrics;
import io.kvgate.dataplane.pd.PdHooks;
import io.kvgate.dataplane.pd.PdMetrics;
import io.kvgate.dataplane.ready.ModelProbe;
import io.kvgate.dataplane.ready.Readiness;
import io.kvgate.dataplane.exchange.GatewayContext;
import io.kvgate.dataplane.exchange.Exchanges;
import io.kvgate.dataplane.exchange.ExchangeStarter;
import io.kvgate.dataplane.proxy.RequestHooks;
import io.kvgate.dataplane.route.Breaker;
import io.kvgate.dataplane.route.EndpointRegistry;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.EngineFacts;
import io.kvgate.dataplane.route.LoadEstimate;
import io.kvgate.dataplane.route.RouteTable;
import io.kvgate.dataplane.route.RoutingStage;
import io.kvgate.dataplane.route.Rule;
import io.kvgate.dataplane.route.RulePolicies;
import io.kvgate.dataplane.upstream.HealthChecker;
import io.kvgate.dataplane.upstream.UpstreamPool;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.ingest.zmq.SubscriberStatus;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The composition root: builds every part once (transport, routing stage, upstream pool, health probes, KV
 * inventory, the client, admin and control listeners), owns the applied configuration and applies reloads.
 * {@link #start} returns once the listeners are bound; if any part fails to start, what was already opened is
 * closed before the failure propagates. {@link #close} drains: it stops accepting, reports draining on /health,
 * lets requests in flight finish (bounded), then stops.
 *
 * <p>Reload ({@link #reload}): every check, then everything the new configuration needs is built (tokenizers,
 * hashers, policies, route table) with nothing live touched; then one swap is applied by the routing stage between
 * two decisions, after which subscriptions, upstream and probe settings follow. A failure before the swap changes
 * nothing. Keys listed in {@link GatewayConfig#RESTART_ONLY} are refused (409) when they change.
 */
public final class Gateway implements AutoCloseable, ControlPlane {
    /**
     * How the gateway is started: its configuration and where it came from, and where discovery finds Kubernetes and
     * DNS (the in-cluster client and the host's name servers unless a test injects others).
     */
    public record Options(GatewayConfig config, NanoClock clock, Path configFile, Path controlSocket,
                          io.kvgate.discovery.Discovery.Clients discovery) {
        public Options(GatewayConfig config, NanoClock clock, Path configFile, Path controlSocket) {
            this(config, clock, configFile, controlSocket, io.kvgate.discovery.Discovery.Clients.defaults());
        }

        public static Options of(GatewayConfig config) {
            return new Options(config, NanoClock.SYSTEM, null, null);
        }

        /** The same options, discovery through {@code clients}. */
        public Options withDiscovery(io.kvgate.discovery.Discovery.Clients clients) {
            return new Options(config, clock, configFile, controlSocket, clients);
        }
    }

    private final NanoClock clock;
    private final Path configFile;
    private final Path baseDir;
    private final Transport transport;
    private final EndpointRegistry registry = new EndpointRegistry();
    /** The gateway's one metrics registry: every component registers the families of the state it owns here. */
    private final FamilyRegistry metricsRegistry = new FamilyRegistry();
    /** Tenants' usage against their limits (the data path's, through its context): what {@code ctl tenants} reads. */
    private io.kvgate.dataplane.tenant.Tenants tenants;
    private final GatewayMetrics metrics = new GatewayMetrics(metricsRegistry);
    /** Routing-quality accounting per rule: kvgate_prompt_tokens_total, kvgate_routing_loss_tokens_total, ctl quality. */
    private final PromptLedger quality = new PromptLedger();
    private final ReloadMetrics reloads = new ReloadMetrics();
    private final PdMetrics pdMetrics = new PdMetrics();
    /** Everything opened so far, closed in reverse order by {@link #close} or when start-up fails half-way. */
    private final Deque<AutoCloseable> opened = new ArrayDeque<>();
    private final AccessLog accessLog;
    private final EventLoopGroup boss;
    private final EventLoopGroup workers;
    private final EventLoopGroup adminGroup;
    private final RoutingStage router;
    private final UpstreamPool pool;
    private final HealthChecker health;
    private final EngineLoadScraper loadScraper;
    private final AdminApi admin;
    private final Channel listener;
    private final Channel adminListener;
    private final ControlSocket controlSocket;
    /** Front doors of other modules the configuration asks for (the endpoint picker), opened after the listeners. */
    private final List<FrontDoor.Open> extraDoors;
    private final Readiness readiness;
    private final ModelProbe modelProbe;
    private volatile AppliedConfig applied;
    private volatile KvState kv;
    /** The parity probe: it also resolves {@code hash_seed: auto} and remembers what it found. */
    private final io.kvgate.dataplane.kv.ParityProbe parity;
    private final io.kvgate.dataplane.kv.SeedResolver seedResolver;
    /** Pause between probe rounds while a {@code hash_seed: auto} rule is unresolved (an engine may still be loading). */
    static final long SEED_PROBE_RETRY_MS = 5_000;
    static final long SEED_PROBE_TIMEOUT_MS = 5_000;
    private final DrainState drain = new DrainState();
    /** The client listener's TLS context (hot-swapped by reloads and the certificate file watch). */
    private final ServerTls serverTls = new ServerTls(Log::info);
    /** TLS to https:// engines, shared by every part that connects to an engine. */
    private final UpstreamTls upstreamTls = new UpstreamTls();
    /** Configuration applied and every listener bound: the first condition of {@code GET /ready}. */
    private volatile boolean started;
    /** The shutdown under way, null before one starts. */
    private ShutdownSequence shutdown;
    /** The tokenizers the current configuration's rules use; a reload reuses those whose files did not change. */
    private final TokenizerCache tokenizers = new TokenizerCache();
    /** Exchanges in progress: at the drain deadline streams end with an error frame + [DONE], the rest with 503. */
    private io.kvgate.dataplane.exchange.LiveExchanges liveExchanges;
    /** Finds the endpoints of rules with {@code discovery} (DNS, Kubernetes); each set it reports is applied as a reload. */
    private io.kvgate.discovery.Discovery discovery;
    /** The last endpoint set discovery reported per rule: every reload puts it in place of the rule's (empty) endpoints. */
    private final java.util.Map<String, List<io.kvgate.discovery.DiscoveredEndpoint>> discovered = new java.util.concurrent.ConcurrentHashMap<>();
    /** Endpoints discovery drained because they were terminating (by key): undrained when they come back serving. */
    private final java.util.Set<String> drainedByDiscovery = java.util.concurrent.ConcurrentHashMap.newKeySet();
    /** Told after each discovered set is applied (tests await it instead of sleeping). */
    private volatile java.util.function.BiConsumer<String, List<io.kvgate.discovery.DiscoveredEndpoint>> discoveryListener = (r, e) -> {};

    private Gateway(Options o) throws Exception {
        GatewayConfig cfg = ConfigCheck.conclude(o.config(), tokenizers);
        this.applied = AppliedConfig.first(cfg);
        this.clock = o.clock();
        this.configFile = o.configFile() == null ? null : o.configFile().toAbsolutePath();
        this.baseDir = configFile == null ? null : configFile.getParent();
        this.transport = Transport.select(cfg.transport());
        if (transport.fallbackReason() != null) {
            Log.warn("transport " + cfg.transport() + " -> " + transport.name() + ": " + transport.fallbackReason());
        }
        // Bad certificate files stop the start here, naming the key and the file.
        serverTls.install(serverTls.prepare(cfg.tls().listener()));
        upstreamTls.install(upstreamTls.prepare(cfg.tls().upstream()));
        opened.push(this::closeCore); // popped last: after every listener and event loop is gone
        try {
            // Opened before the event loops, so closed after them: every request that ends while they stop is written.
            this.accessLog = openAccessLog(cfg);
            opened.push(accessLog);
            int threads = cfg.ioThreads() > 0 ? cfg.ioThreads() : Math.max(1, Runtime.getRuntime().availableProcessors());
            this.boss = opened(transport.newGroup(1, "kvgate-accept"));
            this.workers = opened(transport.newGroup(threads, "kvgate-io"));
            this.adminGroup = opened(transport.newGroup(1, "kvgate-admin"));
            if (cfg.needsKvIndex()) {
                kv = new KvState(cfg.kvIndexCapacityBlocks(), clock, cfg.ingest());
            }
            RouteTable table = buildTable(cfg, kv, null);
            if (kv != null) {
                kv.sync(cfg, registry);
            }
            // router.thread: with one I/O thread its loop runs the routing stage (no thread hand-off); else a thread of its own.
            boolean routerOnLoop = cfg.routerRunsOnIoThread();
            if (routerOnLoop && threads != 1) {
                throw new IllegalStateException("router.thread io with " + threads + " I/O threads"); // refused by the config check
            }
            this.router = new RoutingStage(cfg.router(), table, clock, metrics.stages, routerOnLoop ? workers.next() : null);
            Log.info("routing stage: " + (routerOnLoop ? "run by the I/O event loop" : "on its own thread (kvgate-router)")
                + " (router.thread: " + cfg.router().thread() + ", io_threads: " + cfg.ioThreads() + ")");
            this.pool = new UpstreamPool(transport.clientChannel(), cfg.upstream(), cfg.limits(), upstreamTls);
            KvRoutes kvRoutes = new KvRoutes(router, () -> kv);
            this.admin = new AdminApi(this, router, registry, () -> {
                KvState k = kv;
                return k == null ? List.of() : k.status();
            });
            kvRoutes.registerAdmin(admin);
            admin.metrics(metricsRegistry);
            kvRoutes.parityProbe().registerMetrics(metricsRegistry);
            this.parity = kvRoutes.parityProbe();
            parity.upstreamTls(upstreamTls);
            // A resolved hash_seed: auto reaches the rule's hashers the way every configuration change does: a reload.
            parity.onSeedResolved(rule -> applyResolvedSeeds());
            this.seedResolver = new io.kvgate.dataplane.kv.SeedResolver(parity, () -> List.<Rule>copyOf(router.table().rules()),
                () -> kv, SEED_PROBE_RETRY_MS, SEED_PROBE_TIMEOUT_MS);
            seedResolver.onAdopted(this::applyResolvedSeeds);
            opened.push(seedResolver);
            registerKvMetrics();
            registerConfigMetrics();
            reloads.register(metricsRegistry);
            RequestHooks hooks = new RenderRoutes();
            // The data path reads the applied configuration through this context: a reload reaches the next request.
            GatewayContext gw = new GatewayContext(this::config, router, pool, metrics, clock, hooks).accessLog(accessLog)
                .quality(quality);
            quality.register(metricsRegistry);
            admin.register("GET /control/v1/quality", r -> AdminApi.Reply.json(200, quality.report().toPrettyString()));
            accessLog.register(metricsRegistry);
            gw.tenants().register(metricsRegistry);
            this.tenants = gw.tenants();
            // rate_limit_store: connect before the first request needs it; closed with the rest (after the drain).
            tenants.open(cfg.tenancy());
            opened.push(tenants::close);
            // ctl tenants: each tenant's usage on this replica against its limits and its share of them.
            admin.register("GET /control/v1/tenants", req -> tenantsReply());
            admin.register("GET /admin/v1/tenants", req -> tenantsReply());
            // Restart-only (tracing in RESTART_ONLY): built once; closed near last, so spans ended in the drain are exported.
            Tracing tracing = Tracing.start(cfg.tracing());
            opened.push(tracing);
            gw.tracing(tracing);
            this.liveExchanges = gw.live();
            PdHooks pd = new PdHooks(() -> gw, pdMetrics, () -> kv == null ? null : kv.index());
            // The exchange layer behind the front door: P/D rules get a P/D exchange, every other rule the plain proxy.
            ExchangeStarter exchanges = new Exchanges(Exchanges.plain(gw), pd);
            metrics.modelLabels(modelNames(cfg));
            pdMetrics.register(metricsRegistry);
            registerMetrics();
            this.health = new HealthChecker(workers.next(), transport.clientChannel(),
                () -> List.<Rule>copyOf(router.table().rules()), router, cfg.health(), liveExchanges::endpointDown, upstreamTls);
            opened.push(health);
            // Engine-reported load: its own event loop, never an I/O thread or the routing thread.
            this.loadScraper = new EngineLoadScraper(transport.newGroup(1, "kvgate-load"), transport.clientChannel(),
                () -> List.<Rule>copyOf(router.table().rules()), () -> config().load(), clock, upstreamTls);
            opened.push(loadScraper);
            loadScraper.registerMetrics(metricsRegistry);
            this.readiness = new Readiness(router::table, () -> kv == null ? List.of() : kv.status(), drain::draining,
                drain::shuttingDown, () -> started, clock);
            this.modelProbe = new ModelProbe(readiness, router::table, () -> config().health(),
                new io.kvgate.dataplane.ready.ContextDiscovery(Log::warn, Log::info), router.adapters());
            modelProbe.upstreamTls(upstreamTls);
            opened.push(modelProbe);
            kvRoutes.serverInfo(modelProbe.serverInfo());
            CounterWithCallback.builder().name("kvgate_engine_server_info_mismatches_total").help("Disagreements between an"
                    + " SGLang endpoint's /server_info (KV-event port, topic, block size, DP size, EAGLE) and its rule's"
                    + " configuration, each distinct one counted once.")
                .callback(cb -> cb.call(modelProbe.serverInfo().mismatches())).register(metricsRegistry);
            io.kvgate.dataplane.doctor.DoctorRoutes.register(admin, new io.kvgate.dataplane.doctor.Doctor(
                () -> List.<Rule>copyOf(router.table().rules()), () -> kv, parity, modelProbe.serverInfo(), loadScraper));
            admin.readiness(this::readinessJson);
            LocalRoutes local = new LocalRoutes(gw, drain, readiness::evaluate, readiness::evaluateEngines);
            ServerBootstrap sb = new ServerBootstrap()
                .group(boss, workers)
                .channel(transport.serverChannel())
                .option(ChannelOption.SO_BACKLOG, 4096)
                .option(ChannelOption.SO_REUSEADDR, true)
                .childOption(ChannelOption.TCP_NODELAY, true)
                .childHandler(new ClientChannelInitializer(gw, local, exchanges, drain,
                    new ConnectionLimit(() -> config().limits().maxConnections()), serverTls));
            serverTls.register(metricsRegistry);
            this.listener = sb.bind(cfg.listen().host(), cfg.listen().port()).sync().channel();
            opened.push(() -> listener.close().syncUninterruptibly());
            // The admin API has its own thread: an explain waits on the routing stage, never on a client I/O thread.
            this.adminListener = new ServerBootstrap().group(boss, adminGroup).channel(transport.serverChannel())
                .childHandler(new AdminChannelInitializer(admin, () -> config().adminToken(), () -> config().adminLimits()))
                .bind(cfg.adminListen().host(), cfg.adminListen().port()).sync().channel();
            opened.push(() -> adminListener.close().syncUninterruptibly());
            // The certificate file watch runs on the admin loop: file reads never stall a client I/O thread.
            adminGroup.next().execute(this::watchCertificateFiles);
            Path socketPath = o.controlSocket() != null ? o.controlSocket() : configuredSocket(cfg);
            this.controlSocket = socketPath == null ? null
                : ControlSocket.bind(socketPath, admin, () -> config().controlAllowedUids(), () -> config().adminLimits());
            if (controlSocket != null) {
                opened.push(controlSocket);
            }
            this.extraDoors = openFrontDoors(cfg, gw);
            health.start();
            loadScraper.start();
            modelProbe.start();
            startupParityProbe(kvRoutes.parityProbe());
            seedResolver.start();
            // Last: what discovery finds is applied as a reload, which needs every part above.
            this.discovery = new io.kvgate.discovery.Discovery(this::applyDiscovered, o.discovery(),
                new io.kvgate.discovery.DiscoveryMetrics(metrics.registry()), clock);
            opened.push(discovery);
            discovery.sync(cfg);
            started = true;
        } catch (Exception | Error e) {
            closeOpened();
            throw e;
        }
    }

    /**
     * Opens every {@link FrontDoor} on the class path that {@code cfg} asks for, on this gateway's I/O threads; a key
     * asking for one this build lacks ({@code epp_listen} without the epp module) stops the start naming it.
     */
    private List<FrontDoor.Open> openFrontDoors(GatewayConfig cfg, GatewayContext gw) throws Exception {
        List<FrontDoor.Open> doors = new java.util.ArrayList<>();
        for (FrontDoor door : java.util.ServiceLoader.load(FrontDoor.class, Gateway.class.getClassLoader())) {
            if (door.configured(cfg)) {
                FrontDoor.Open open = door.open(new FrontDoor.Wiring(cfg, gw, drain, readiness::evaluate, boss, workers,
                    transport.serverChannel(), metricsRegistry));
                opened.push(open);
                doors.add(open);
            }
        }
        if (cfg.eppListen() != null && doors.isEmpty()) {
            throw new ConfigException(List.of("epp_listen: value " + cfg.eppListen() + " needs the endpoint picker (module"
                + " kvgate-epp), which is not on this gateway's class path"));
        }
        return List.copyOf(doors);
    }

    /** The endpoint picker's bound port ({@code epp_listen}), or -1 when none is open. */
    public int eppPort() {
        return extraDoors == null || extraDoors.isEmpty() ? -1 : extraDoors.getFirst().port();
    }

    /**
     * One round of the listener's certificate file watch ({@code tls.watch_interval_ms}), then the next; while TLS is
     * off or the watch is 0 it looks again after {@link #CERTIFICATE_WATCH_IDLE_MS} (a reload may turn it on).
     */
    private void watchCertificateFiles() {
        if (adminGroup.isShuttingDown()) {
            return;
        }
        ServerTls.Loaded l = serverTls.current();
        long interval = l == null || l.config().watchIntervalMs() == 0 ? CERTIFICATE_WATCH_IDLE_MS : l.config().watchIntervalMs();
        if (l != null && l.config().watchIntervalMs() > 0) {
            serverTls.checkFiles();
        }
        adminGroup.next().schedule(this::watchCertificateFiles, interval, TimeUnit.MILLISECONDS);
    }

    static final long CERTIFICATE_WATCH_IDLE_MS = 5_000;

    /** The client listener's TLS context owner (tests read the certificate in effect). */
    public ServerTls serverTls() {
        return serverTls;
    }

    /** {@code control_socket} when set to a path (relative to the config file); embedded gateways bind none otherwise. */
    private Path configuredSocket(GatewayConfig cfg) {
        String s = cfg.controlSocket();
        if (s == null || s.equals("off")) {
            return null;
        }
        Path p = Path.of(s);
        return p.isAbsolute() || baseDir == null ? p : baseDir.resolve(p);
    }

    private static AccessLog openAccessLog(GatewayConfig cfg) {
        try {
            return AccessLog.open(cfg.logging());
        } catch (java.io.IOException e) {
            throw new IllegalStateException("logging.access_log: cannot open '" + cfg.logging().accessLog() + "': " + e, e);
        }
    }

    private <T extends EventLoopGroup> T opened(T group) {
        opened.push(() -> group.shutdownGracefully(0, 2, TimeUnit.SECONDS).syncUninterruptibly());
        return group;
    }

    /** The routing stage, then the index it reads (the ingest thread writes it until closed). */
    private void closeCore() {
        if (router != null) {
            router.close();
        }
        KvState k = kv;
        if (k != null) {
            k.close();
        }
    }

    private void closeOpened() {
        while (!opened.isEmpty()) {
            try {
                opened.pop().close();
            } catch (Exception e) {
                Log.warn("close during shutdown: " + e);
            }
        }
    }

    /** Readiness as {@code ctl status} shows it: the gateway's own, then the fleet's under {@code engines}. */
    private com.fasterxml.jackson.databind.node.ObjectNode readinessJson() {
        Readiness.Report r = readiness.evaluate();
        var n = com.fasterxml.jackson.databind.node.JsonNodeFactory.instance.objectNode();
        n.put("ready", r.ready());
        var w = n.putArray("waiting_for");
        r.waitingFor().forEach(w::add);
        Readiness.Report e = readiness.evaluateEngines();
        var engines = n.putObject("engines");
        engines.put("ready", e.ready());
        var ew = engines.putArray("waiting_for");
        e.waitingFor().forEach(ew::add);
        // Not a reason to wait (the engines serve), but the KV scores of these endpoints are zero until fixed.
        var warnings = n.putArray("warnings");
        KvState k = kv;
        if (k != null) {
            for (Rule rule : router.table().rules()) {
                for (EndpointState ep : rule.endpoints()) {
                    if (ep.id() < KvState.MAX_ENDPOINTS && k.ingest().blockSizes().mismatched(ep.id())) {
                        warnings.add("rule " + rule.name() + " endpoint " + ep.key() + ": its KV events carry block_size "
                            + k.ingest().blockSizes().lastEventBlockSize(ep.id()) + ", the rule keys at "
                            + rule.config().blockSize() + " (no prefix can match)");
                    }
                }
            }
        }
        return n;
    }

    /** What {@code GET /ready} answers now: the gateway's own readiness. */
    public Readiness.Report readiness() {
        return readiness.evaluate();
    }

    /** What {@code GET /ready/engines} answers now: what the fleet lacks. */
    public Readiness.Report engineReadiness() {
        return readiness.evaluateEngines();
    }

    /** The configuration version and digest: which configuration a scrape was taken under. */
    private void registerConfigMetrics() {
        GaugeWithCallback.builder().name("kvgate_config_version")
            .help("Version of the applied configuration (1 at start-up, +1 per accepted change).")
            .callback(cb -> cb.call(applied.version())).register(metricsRegistry);
        GaugeWithCallback.builder().name("kvgate_config_info")
            .help("The applied configuration's digest (SHA-256 of its redacted effective form).").labelNames("version", "digest")
            .callback(cb -> {
                AppliedConfig a = applied;
                cb.call(1, Long.toString(a.version()), a.digest());
            }).register(metricsRegistry);
    }

    /** One per-(endpoint, rank) family of the KV subscribers' status. */
    private record KvStatusFamily(String name, boolean counter, String help, java.util.function.ToDoubleFunction<SubscriberStatus> value) {}

    /** KV ingest and index families, per endpoint and DP rank: read on scrape, no samples without KV routing. */
    private void registerKvMetrics() {
        GaugeWithCallback.builder().name("kvgate_kv_subscriber_up").help("1 when the (endpoint, rank) subscription is open"
                + " and connected; 0 while resolving, connecting or retrying.").labelNames("rule", "endpoint", "rank")
            .callback(cb -> eachKvStatus((st, endpoint) -> cb.call(st.up() ? 1 : 0, st.label(), endpoint, Integer.toString(st.rank()))))
            .register(metricsRegistry);
        CounterWithCallback.builder().name("kvgate_kv_subscriber_errors_total").help("Subscription failures by cause (resolve,"
                + " bind, connect, replay, denied, internal; HTTP drains also http, timeout, too_large).")
            .labelNames("rule", "endpoint", "rank", "cause")
            .callback(cb -> eachKvStatus((st, endpoint) -> st.errors().forEach((cause, n) ->
                cb.call(n.doubleValue(), st.label(), endpoint, Integer.toString(st.rank()), cause))))
            .register(metricsRegistry);
        CounterWithCallback.builder().name("kvgate_kv_dropped_events_total").help("KV events dropped whole by a per-event limit, by reason.")
            .labelNames("endpoint", "rank", "reason")
            .callback(cb -> eachKvStatus((st, endpoint) -> st.droppedEvents().forEach((reason, n) ->
                cb.call(n.doubleValue(), endpoint, Integer.toString(st.rank()), reason))))
            .register(metricsRegistry);
        List<KvStatusFamily> families = List.of(
            new KvStatusFamily("kvgate_kv_subscriber_connected", false, "1 when the SUB socket of (endpoint, rank) is connected.",
                st -> st.connected() ? 1 : 0),
            new KvStatusFamily("kvgate_kv_reconnects_total", true, "Reconnections of the event subscriber.", SubscriberStatus::reconnects),
            new KvStatusFamily("kvgate_kv_gaps_total", true, "Sequence gaps seen (dropped batches).", SubscriberStatus::gaps),
            new KvStatusFamily("kvgate_kv_replays_total", true, "Gaps filled from the engine's replay socket.", SubscriberStatus::replays),
            new KvStatusFamily("kvgate_kv_restarts_total", true, "Engine restarts detected (sequence went backwards).",
                SubscriberStatus::restarts),
            new KvStatusFamily("kvgate_kv_clears_total", true,
                "Times the rank's inventory was cleared (restart, unfillable gap, AllBlocksCleared).", SubscriberStatus::clears),
            new KvStatusFamily("kvgate_kv_decode_errors_total", true, "Malformed event frames counted and dropped.",
                SubscriberStatus::decodeErrors),
            new KvStatusFamily("kvgate_kv_events_total", true, "KV events decoded.", SubscriberStatus::events),
            new KvStatusFamily("kvgate_kv_block_ops_total", true, "Block store/remove operations applied to the index.",
                SubscriberStatus::blockOps),
            new KvStatusFamily("kvgate_kv_last_seq", false, "Last sequence number received.", SubscriberStatus::lastSeq),
            new KvStatusFamily("kvgate_kv_other_drainer", false, "1 while another consumer drains the TensorRT-LLM"
                + " /kv_cache_events endpoint (id jumps on most polls).", st -> st.otherDrainer() ? 1 : 0),
            new KvStatusFamily("kvgate_kv_other_drainer_episodes_total", true, "Times the pattern of another consumer draining"
                + " the endpoint's /kv_cache_events started.", SubscriberStatus::otherDrainerEpisodes));
        for (KvStatusFamily f : families) {
            if (f.counter()) {
                CounterWithCallback.builder().name(f.name()).help(f.help()).labelNames("endpoint", "rank")
                    .callback(cb -> eachKvStatus((st, endpoint) -> cb.call(f.value().applyAsDouble(st), endpoint, Integer.toString(st.rank()))))
                    .register(metricsRegistry);
            } else {
                GaugeWithCallback.builder().name(f.name()).help(f.help()).labelNames("endpoint", "rank")
                    .callback(cb -> eachKvStatus((st, endpoint) -> cb.call(f.value().applyAsDouble(st), endpoint, Integer.toString(st.rank()))))
                    .register(metricsRegistry);
            }
        }
        GaugeWithCallback.builder().name("kvgate_kv_endpoint_blocks")
            .help("Distinct blocks the index holds for an endpoint (union of its ranks).").labelNames("endpoint")
            .callback(cb -> eachKvEndpoint((k, ep) -> cb.call(k.index().blocks(ep.id()), ep.key()))).register(metricsRegistry);
        // The block size each engine keys at (from its stored events) against its rule's: a mismatch is zero hits.
        GaugeWithCallback.builder().name("kvgate_kv_event_block_size")
            .help("Block size of the endpoint's latest stored KV event (0 before any).").labelNames("endpoint")
            .callback(cb -> eachKvEndpoint((k, ep) -> cb.call(k.ingest().blockSizes().lastEventBlockSize(ep.id()), ep.key())))
            .register(metricsRegistry);
        CounterWithCallback.builder().name("kvgate_kv_block_size_mismatch_total").help("Stored KV events whose block size"
                + " differs from the rule's block_size (their prefixes can never match).").labelNames("endpoint")
            .callback(cb -> eachKvEndpoint((k, ep) -> cb.call(k.ingest().blockSizes().mismatches(ep.id()), ep.key())))
            .register(metricsRegistry);
        // Hybrid models: blocks of KV-cache groups that do not hold whole prefixes (sliding window, Mamba), not indexed.
        CounterWithCallback.builder().name("kvgate_kv_group_blocks_skipped_total").help("Blocks of an endpoint's"
                + " non-full-attention KV-cache groups (sliding window, Mamba), stored or removed, left out of the index.")
            .labelNames("endpoint")
            .callback(cb -> eachKvEndpoint((k, ep) -> cb.call(k.ingest().cacheGroups().skippedBlocks(ep.id()), ep.key())))
            .register(metricsRegistry);
        CounterWithCallback.builder().name("kvgate_kv_bigram_events_total").help("Stored KV events whose cells are token"
                + " pairs (SGLang EAGLE bigram keys), which the gateway's keys never match.").labelNames("endpoint")
            .callback(cb -> eachKvEndpoint((k, ep) -> cb.call(k.ingest().blockSizes().bigramEvents(ep.id()), ep.key())))
            .register(metricsRegistry);
        kvIndexGauge("kvgate_kv_index_blocks", "Distinct blocks in the index.", k -> k.index().size());
        kvIndexGauge("kvgate_kv_index_memberships", "(block, endpoint rank) memberships in the index.", k -> k.index().memberships());
        kvIndexGauge("kvgate_kv_index_capacity_blocks", "Index capacity in distinct blocks.", k -> k.index().config().capacityBlocks());
        kvIndexGauge("kvgate_kv_index_bytes", "Off-heap bytes of the index.", k -> k.index().sizeBytes());
        CounterWithCallback.builder().name("kvgate_kv_index_evictions_total").help("Blocks evicted because the index was full.")
            .callback(cb -> {
                KvState k = kv;
                if (k != null) {
                    cb.call(k.index().evictions());
                }
            }).register(metricsRegistry);
    }

    private void kvIndexGauge(String name, String help, java.util.function.ToDoubleFunction<KvState> value) {
        GaugeWithCallback.builder().name(name).help(help).callback(cb -> {
            KvState k = kv;
            if (k != null) {
                cb.call(value.applyAsDouble(k));
            }
        }).register(metricsRegistry);
    }

    /** Each KV subscriber's status now with its endpoint's key (nothing without KV routing). */
    private void eachKvStatus(java.util.function.BiConsumer<SubscriberStatus, String> f) {
        KvState k = kv;
        if (k == null) {
            return;
        }
        java.util.Map<Integer, String> names = new java.util.HashMap<>();
        for (EndpointState ep : registry.all()) {
            names.put(ep.id(), ep.key());
        }
        for (SubscriberStatus st : k.status()) {
            f.accept(st, names.getOrDefault(st.endpointId(), String.valueOf(st.endpointId())));
        }
    }

    /** Each endpoint with KV events that the index tracks (nothing without KV routing). */
    private void eachKvEndpoint(java.util.function.BiConsumer<KvState, EndpointState> f) {
        KvState k = kv;
        if (k == null) {
            return;
        }
        for (EndpointState ep : registry.all()) {
            if (ep.config().kvEvents() != null && ep.id() < KvState.MAX_ENDPOINTS) {
                f.accept(k, ep);
            }
        }
    }

    /** Rules with {@code kv.parity_probe_at_startup} are probed once in the background after start-up. */
    private void startupParityProbe(io.kvgate.dataplane.kv.ParityProbe probe) {
        List<Rule> wanted = router.table().rules().stream().filter(r -> r.config().kvExact().parityProbeAtStartup()).toList();
        if (wanted.isEmpty() || kv == null) {
            return;
        }
        Thread t = new Thread(() -> {
            for (Rule r : wanted) {
                for (var res : probe.probe(kv, r, 10_000)) {
                    Log.info("parity probe rule=" + res.rule() + " endpoint=" + res.endpoint() + " check="
                        + res.check() + ": " + res.verdict() + " (" + res.detail() + ")");
                }
            }
        }, "kvgate-parity-probe");
        t.setDaemon(true);
        t.start();
    }

    public static Gateway start(GatewayConfig cfg) throws Exception {
        return start(Options.of(cfg));
    }

    public static Gateway start(GatewayConfig cfg, NanoClock clock) throws Exception {
        return start(new Options(cfg, clock, null, null));
    }

    /** Starts a gateway; when any part fails to start, the parts already started are closed before this throws. */
    public static Gateway start(Options options) throws Exception {
        return new Gateway(options);
    }

    /**
     * The next route table, built without touching anything live: staged endpoints, new policies for changed
     * rules, unchanged rules carried over with their policy state.
     */
    private RouteTable buildTable(GatewayConfig cfg, KvState kvState, RouteTable previous) {
        for (RuleConfig r : cfg.rules()) {
            if (RulePolicies.needsPromptTokens(r) && r.tokenizer() == null && r.policyKind() != RuleConfig.Policy.CHWBL
                && (r.policyKind() != RuleConfig.Policy.PD || RulePolicies.prefillKvExact(r))) {
                // chwbl without a tokenizer keys text prompts on chwbl.prefix_chars characters, and conditional P/D
                // splits a prompt it cannot count: nothing to warn about
                Log.warn("rule '" + r.name() + "' (" + r.policy() + ") has no tokenizer: token-id prompts are "
                    + "routed exactly, text and chat prompts take the fallback policy (" + r.fallback() + ")");
            }
        }
        BlockIndex index = kvState == null ? null : kvState.index();
        return RouteTable.build(cfg, registry, ctx -> RulePolicies.create(ctx, index, clock, metrics.stages),
            rc -> PromptPipeline.forRule(rc, tokenizers), previous);
    }

    @Override
    public synchronized ReloadOutcome reload(GatewayConfig next) throws ConfigException, RestartRequiredException {
        try {
            ReloadOutcome outcome = applyChange(next);
            reloads.succeeded(outcome.applied());
            return outcome;
        } catch (ConfigException | RestartRequiredException | RuntimeException e) {
            reloads.failed();
            throw e;
        }
    }

    private ReloadOutcome applyChange(GatewayConfig next) throws ConfigException, RestartRequiredException {
        next = withDiscoveredEndpoints(withResolvedSeeds(next));
        ConfigCheck.conclude(next, tokenizers);
        AppliedConfig cur = applied;
        List<String> restartOnly = cur.config().restartOnlyChanges(next);
        if (!restartOnly.isEmpty()) {
            throw new RestartRequiredException(restartOnly);
        }
        List<String> pipelineChanges = pipelineChanges(next);
        // TLS contexts are built now (the files are read again: a reload picks up renewed certificates): a bad file
        // refuses the reload, naming it, before anything changed.
        ServerTls.Loaded listenerTls = serverTls.prepare(next.tls().listener());
        UpstreamTls.Prepared engineTls = upstreamTls.prepare(next.tls().upstream());
        boolean tlsChanged = listenerTls != serverTls.current() || !upstreamTls.inEffect(engineTls);
        if (ConfigTree.sameEffective(cur.config(), next) && pipelineChanges.isEmpty() && !tlsChanged) {
            syncDiscovery(next);
            return new ReloadOutcome(false, cur.version(), cur.digest(), List.of());
        }
        List<String> changes = new java.util.ArrayList<>(ConfigTree.diff(cur.config(), next));
        changes.addAll(discoveredChanges(cur.config(), next));
        changes.addAll(pipelineChanges);
        // Build phase: nothing live changes. A new index is opened only when the first KV endpoint appears.
        KvState newKv = kv == null && next.needsKvIndex() ? new KvState(next.kvIndexCapacityBlocks(), clock, next.ingest()) : null;
        RouteTable table;
        try {
            table = buildTable(next, newKv != null ? newKv : kv, router.table());
        } catch (RuntimeException e) {
            if (newKv != null) {
                newKv.close();
            }
            throw new ConfigException("configuration not applied (nothing changed): " + e.getMessage());
        }
        // Commit phase: one swap, applied by the routing stage between two decisions.
        if (newKv != null) {
            kv = newKv; // closed by closeCore, after the routing stage stopped reading it
        }
        router.swap(table);
        try {
            if (!table.awaitInstalled(10_000)) {
                Log.warn("reload: the routing stage has not applied the new rule set after 10 s; it will when it catches up");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        KvState k = kv;
        if (k != null) {
            k.sync(next, registry); // subscribe new endpoints, drop removed ones with their inventory
        }
        pool.reconfigure(next.upstream(), next.limits());
        health.reconfigure(next.health());
        changes.addAll(serverTls.install(listenerTls));
        changes.addAll(upstreamTls.install(engineTls));
        AppliedConfig now = cur.next(next);
        applied = now;
        if (tenants != null) {
            tenants.open(next.tenancy()); // a changed rate_limit_store connects now, not on a request
        }
        tokenizers.retainOnly(next.rules().stream().map(RuleConfig::tokenizer).toList());
        metrics.modelLabels(modelNames(next));
        Log.info("configuration version " + now.version() + " applied (" + changes.size() + " change(s)): "
            + String.join("; ", changes));
        seedResolver.poke();
        syncDiscovery(next);
        return new ReloadOutcome(true, now.version(), now.digest(), changes);
    }

    /** Discovery follows the applied configuration: new or changed discovered rules get a source, others lose theirs. */
    private void syncDiscovery(GatewayConfig next) {
        if (discovery != null) {
            discovery.sync(next);
            // A rule no longer discovered forgets its set: were it discovered again, its new source reports afresh.
            discovered.keySet().removeIf(rule -> !discovery.discovers(rule));
        }
    }

    /**
     * {@code next} with each discovered rule's endpoints set to what its discovery last reported (none before its
     * first report): the configuration never lists them, so a reload of the file, a patch or a resolved seed keeps
     * what was found.
     */
    private GatewayConfig withDiscoveredEndpoints(GatewayConfig next) {
        List<RuleConfig> rules = new java.util.ArrayList<>(next.rules());
        boolean changed = false;
        for (int i = 0; i < rules.size(); i++) {
            RuleConfig rc = rules.get(i);
            if (rc.discovery().isStatic()) {
                continue;
            }
            List<io.kvgate.discovery.DiscoveredEndpoint> found = discovered.getOrDefault(rc.name(), List.of());
            List<io.kvgate.control.config.EndpointConfig> eps = found.stream().map(io.kvgate.discovery.DiscoveredEndpoint::config).toList();
            if (!eps.equals(rc.endpoints())) {
                rules.set(i, rc.withDiscoveredEndpoints(eps));
                changed = true;
            }
        }
        return changed ? next.withRules(rules) : next;
    }

    /** What a reload changes in discovered rules' endpoints (the configuration diff does not show them: they are not written). */
    private static List<String> discoveredChanges(GatewayConfig cur, GatewayConfig next) {
        List<String> out = new java.util.ArrayList<>();
        for (RuleConfig rc : next.rules()) {
            if (rc.discovery().isStatic()) {
                continue;
            }
            java.util.Set<String> before = new java.util.TreeSet<>();
            cur.rules().stream().filter(r -> r.name().equals(rc.name())).findFirst()
                .ifPresent(r -> r.endpoints().forEach(e -> before.add(e.key())));
            java.util.Set<String> after = new java.util.TreeSet<>();
            rc.endpoints().forEach(e -> after.add(e.key()));
            if (!before.equals(after)) {
                java.util.Set<String> added = new java.util.TreeSet<>(after);
                added.removeAll(before);
                java.util.Set<String> removed = new java.util.TreeSet<>(before);
                removed.removeAll(after);
                out.add("rules[name=" + rc.name() + "].endpoints: discovered " + after.size() + (added.isEmpty() ? "" : ", +" + added)
                    + (removed.isEmpty() ? "" : ", -" + removed));
            }
        }
        return out;
    }

    /**
     * A rule's endpoint set as discovery found it (the discovery's report thread): applied as a reload of the
     * configuration in effect — subscribers opened and closed, endpoint state carried over, as for a file reload —
     * then every terminating endpoint is drained (no new request; those in flight finish) and every endpoint that
     * discovery had drained and that serves again is undrained.
     */
    private synchronized void applyDiscovered(String rule, List<io.kvgate.discovery.DiscoveredEndpoint> found) {
        if (applied.config().rules().stream().noneMatch(r -> r.name().equals(rule) && !r.discovery().isStatic())) {
            return; // the rule was removed or turned static meanwhile
        }
        List<io.kvgate.discovery.DiscoveredEndpoint> before = discovered.put(rule, found);
        try {
            reload(applied.config());
        } catch (ConfigException | RestartRequiredException | RuntimeException e) {
            // The set in effect stays, and so does what later reloads put in place: a set that cannot be applied must
            // not make every reload of the file fail after it.
            if (before == null) {
                discovered.remove(rule);
            } else {
                discovered.put(rule, before);
            }
            Log.warn("discovery: rule '" + rule + "': the endpoints found could not be applied: " + e.getMessage());
            return;
        }
        for (io.kvgate.discovery.DiscoveredEndpoint d : found) {
            String key = d.config().key();
            boolean was = drainedByDiscovery.contains(key);
            if (d.terminating() == was) {
                continue;
            }
            io.kvgate.dataplane.route.EndpointState ep = registry.get(key);
            if (ep == null) {
                continue;
            }
            if (router.drain(ep, d.terminating())) {
                if (d.terminating()) {
                    drainedByDiscovery.add(key);
                    Log.info("discovery: rule '" + rule + "': " + key + " is terminating: drained (no new requests; "
                        + ep.outstanding() + " in flight finish)");
                } else {
                    drainedByDiscovery.remove(key);
                    Log.info("discovery: rule '" + rule + "': " + key + " serves again: undrained");
                }
            } else {
                Log.warn("discovery: rule '" + rule + "': the routing stage did not apply the drain of " + key
                    + " within 5 s; it is retried with the next change");
            }
        }
        discoveryListener.accept(rule, found);
    }

    /** Called after each discovered endpoint set is applied (tests await the event instead of sleeping). */
    public void onDiscoveryApplied(java.util.function.BiConsumer<String, List<io.kvgate.discovery.DiscoveredEndpoint>> listener) {
        this.discoveryListener = listener == null ? (r, e) -> {} : listener;
    }

    /**
     * {@code next} with each {@code hash_seed: auto} the parity probe resolved (for the same rule name and hash
     * algorithm) replaced by its seed, and each learned-key rule's block size by the one its engines key at (when
     * it adopted one while configured as it is in {@code next}), so reloading an unchanged file keeps what was found.
     */
    private GatewayConfig withResolvedSeeds(GatewayConfig next) {
        List<RuleConfig> rules = new java.util.ArrayList<>(next.rules());
        boolean changed = false;
        for (int i = 0; i < rules.size(); i++) {
            RuleConfig rc = rules.get(i);
            String seed = rc.hashSeedAuto() ? parity.resolvedSeed(rc.name(), rc.hashAlgo()) : null;
            if (seed != null) {
                rc = rc.withHashSeed(seed);
                changed = true;
            }
            int adopted = "learned".equals(rc.kvKeyMode()) ? seedResolver.adoptedBlockSize(rc.name(), rc.blockSize()) : 0;
            if (adopted > 0) {
                rc = rc.withBlockSize(adopted);
                changed = true;
            }
            rules.set(i, rc);
        }
        return changed ? next.withRules(rules) : next;
    }

    /**
     * Applies the seeds {@code hash_seed: auto} resolved to, as a reload of the configuration in effect. Holds the
     * reload lock while it reads that configuration, so a reload applied meanwhile is never undone.
     */
    private synchronized void applyResolvedSeeds() {
        try {
            reload(applied.config());
        } catch (ConfigException | RestartRequiredException e) {
            Log.warn("hash_seed auto: the resolved seed could not be applied: " + e.getMessage());
        }
    }

    /**
     * Rules whose configuration is unchanged but whose prompt pipeline would render differently now: a file of the
     * tokenizer directory changed (tokenizer.json, tokenizer_config.json, the chat template files, a processor's
     * chat_template.json). The check above loaded such a directory afresh through the cache; the rule is rebuilt.
     */
    private List<String> pipelineChanges(GatewayConfig next) {
        List<String> out = new java.util.ArrayList<>();
        RouteTable live = router.table();
        for (RuleConfig rc : next.rules()) {
            Rule r = live.ruleByName(rc.name());
            if (r == null || !r.config().equals(rc) || rc.tokenizer() == null) {
                continue; // new or changed rules are rebuilt (and reported by the diff) anyway
            }
            PromptPipeline now = PromptPipeline.forRule(rc, tokenizers);
            if (!now.equals(r.requestStage())) {
                out.add("rules[name=" + rc.name() + "].tokenizer: files in " + rc.tokenizer() + " changed (prompt pipeline rebuilt)");
            }
        }
        return out;
    }

    /** Reads the {@code --config} file again (SIGHUP, {@code ctl reload}) and applies it. */
    public ReloadOutcome reloadConfigFile() throws ConfigException, RestartRequiredException {
        if (configFile == null) {
            throw new ConfigException("this gateway was not started with --config: there is no file to reload");
        }
        GatewayConfig next;
        try {
            next = GatewayConfig.load(configFile);
        } catch (ConfigException e) {
            reloads.failed(); // an unreadable or invalid file is a failed reload as much as a refused change
            throw e;
        }
        return reload(next);
    }

    /** {@link #reload} for callers that treat every refusal alike (a restart-only change is a ConfigException). */
    public void applyConfig(GatewayConfig next) throws ConfigException {
        try {
            reload(next);
        } catch (RestartRequiredException e) {
            throw new ConfigException(e.getMessage());
        }
    }

    /** The model names of a configuration: the only values the {@code model} metrics label may take. */
    private static java.util.Set<String> modelNames(GatewayConfig cfg) {
        java.util.Set<String> names = new java.util.HashSet<>();
        for (RuleConfig r : cfg.rules()) {
            names.addAll(r.models());
        }
        return names;
    }

    /**
     * The families of the routing stage, the upstream pool and the endpoints, read on scrape from the table current
     * then; and the JVM and process families of the Prometheus client's instrumentation.
     */
    private void registerMetrics() {
        router.registerMetrics(metricsRegistry);
        simpleCounter("kvgate_router_ring_full_total", "Requests shed because the routing ring was full.", router::ringFullRejects);
        simpleCounter("kvgate_router_inbox_full_total",
            "Requests shed because their event loop already waited for a ring's worth of routing decisions.", router::inboxFullRejects);
        GaugeWithCallback.builder().name("kvgate_router_ring_free").help("Free slots in the routing ring.")
            .callback(cb -> cb.call(router.ringRemaining())).register(metricsRegistry);
        simpleCounter("kvgate_router_errors_total", "Routing stage handler errors.", router::handlerErrors);
        GaugeWithCallback.builder().name("kvgate_upstream_open_connections").help("Open connections to engines.")
            .callback(cb -> cb.call(pool.openConnections())).register(metricsRegistry);
        simpleCounter("kvgate_upstream_connects_total", "New connections opened to engines.", pool::connectsOpened);
        simpleCounter("kvgate_upstream_reuses_total", "Requests sent on a pooled keep-alive connection.", pool::connectsReused);
        ruleEndpointGauge("kvgate_endpoint_outstanding", "Requests in flight per endpoint.", EndpointState::outstanding);
        ruleEndpointGauge("kvgate_endpoint_load", "The load estimate the policies compare: this gateway's requests in flight"
            + " plus the other gateways' part of the engine's running + waiting (aged toward its mean, load.peer_decay),"
            + " or this gateway's in-flight count when the engine reading is stale.", EndpointState::load);
        ruleEndpointGauge("kvgate_engine_load_stale", "1 when the endpoint's load estimate falls back to this gateway's"
            + " in-flight count (no engine reading, or older than load.stale_ms).",
            ep -> ep.loadEstimate().loadSource() == LoadEstimate.LoadSource.ENGINE ? 0 : 1);
        GaugeWithCallback.builder().name("kvgate_endpoint_lifetime_seconds").help("This gateway's requests' mean time in"
                + " flight on the endpoint (Little's law over 2 s, measured when a reading is taken up): how fast the other"
                + " gateways' part of a reading ages (load.peer_decay: lifetime); absent while unknown.").labelNames("endpoint")
            .callback(cb -> {
                for (EndpointState ep : registry.all()) {
                    double life = ep.loadEstimate().lifetimeSeconds();
                    if (life >= 0) {
                        cb.call(life, ep.key());
                    }
                }
            }).register(metricsRegistry);
        GaugeWithCallback.builder().name("kvgate_endpoint_ttft_seconds").help("The endpoint's recent time to first token as"
                + " the router estimates it (streamed requests' first event, averaged; an excess over its rule's fleet fading"
                + " while unmeasured): what load.ttft_aware weighs and hedge.ttft_factor multiplies; absent while unmeasured.")
            .labelNames("endpoint").callback(cb -> {
                for (EndpointState ep : registry.all()) {
                    long ns = ep.ttft().ownRecentNs();
                    if (ns >= 0) {
                        cb.call(ns / 1e9, ep.key());
                    }
                }
            }).register(metricsRegistry);
        endpointGauge("kvgate_endpoint_prefill_tokens", "Uncached prompt tokens of this gateway's requests still in"
            + " prefill on the endpoint (kv_exact rules; kv.prefill_token_weight).", ep -> ep.loadEstimate().prefillTokens());
        GaugeWithCallback.builder().name("kvgate_rule_context_length").help("The context length (tokens) a rule's requests"
                + " are checked against: max_model_len, else the smallest its endpoints state; absent while unknown.")
            .labelNames("rule").callback(cb -> {
                for (Rule r : router.table().rules()) {
                    int ctx = r.contextLength();
                    if (ctx > 0) {
                        cb.call(ctx, r.name());
                    }
                }
            }).register(metricsRegistry);
        GaugeWithCallback.builder().name("kvgate_endpoint_route_mounted").help("1 when the endpoint's engine mounts the"
                + " route, 0 when it says it does not (vLLM GET /openapi.json, SGLang is_embedding): the rule then sends that"
                + " route's requests to its other endpoints; absent while unknown.").labelNames("rule", "endpoint", "route")
            .callback(cb -> {
                for (Rule r : router.table().rules()) {
                    for (EndpointState ep : r.endpoints()) {
                        if (ep.facts().routesSource() == null) {
                            continue;
                        }
                        for (boolean chat : new boolean[] {true, false}) {
                            cb.call((ep.facts().unmountedRoutes() & EngineFacts.routeBit(chat)) == 0 ? 1 : 0, r.name(), ep.key(),
                                io.kvgate.dataplane.ready.EngineRoutes.route(chat));
                        }
                    }
                }
            }).register(metricsRegistry);
        GaugeWithCallback.builder().name("kvgate_endpoint_rank_outstanding").help("Requests this gateway pinned to a DP rank"
                + " of the endpoint (X-data-parallel-rank) and still in flight; endpoints with dp_ranks > 1.")
            .labelNames("endpoint", "rank").callback(cb -> {
                for (EndpointState ep : registry.all()) {
                    for (int rank = 0; ep.ranks() > 1 && rank < ep.ranks(); rank++) {
                        cb.call(ep.rankLoad().outstanding(rank), ep.key(), Integer.toString(rank));
                    }
                }
            }).register(metricsRegistry);
        endpointGauge("kvgate_endpoint_healthy", "1 when the endpoint passes its active probes.", ep -> ep.probeHealthy() ? 1 : 0);
        endpointGauge("kvgate_endpoint_breaker_open", "1 when the endpoint's circuit breaker is open or half-open.",
            ep -> ep.breaker().state() == Breaker.State.CLOSED ? 0 : 1);
        endpointCounter("kvgate_endpoint_breaker_opens_total", "Times the endpoint's circuit breaker opened.",
            ep -> ep.breaker().opens());
        endpointCounter("kvgate_endpoint_routed_total", "Requests routed to the endpoint.", ep -> ep.loadEstimate().routedTotal());
        endpointCounter("kvgate_endpoint_failures_total", "Failed requests to the endpoint (the breaker's input).",
            ep -> ep.breaker().failures());
        GatewayMetrics.registerJvm(metricsRegistry);
    }

    private void simpleCounter(String name, String help, java.util.function.LongSupplier value) {
        CounterWithCallback.builder().name(name).help(help).callback(cb -> cb.call(value.getAsLong())).register(metricsRegistry);
    }

    /** A gauge per (rule, endpoint) of the current table. */
    private void ruleEndpointGauge(String name, String help, java.util.function.ToDoubleFunction<EndpointState> value) {
        GaugeWithCallback.builder().name(name).help(help).labelNames("rule", "endpoint").callback(cb -> {
            for (Rule r : router.table().rules()) {
                for (EndpointState ep : r.endpoints()) {
                    cb.call(value.applyAsDouble(ep), r.name(), ep.key());
                }
            }
        }).register(metricsRegistry);
    }

    /** A gauge per endpoint of the registry. */
    private void endpointGauge(String name, String help, java.util.function.ToDoubleFunction<EndpointState> value) {
        GaugeWithCallback.builder().name(name).help(help).labelNames("endpoint").callback(cb -> {
            for (EndpointState ep : registry.all()) {
                cb.call(value.applyAsDouble(ep), ep.key());
            }
        }).register(metricsRegistry);
    }

    /** A counter per endpoint of the registry. */
    private void endpointCounter(String name, String help, java.util.function.ToDoubleFunction<EndpointState> value) {
        CounterWithCallback.builder().name(name).help(help).labelNames("endpoint").callback(cb -> {
            for (EndpointState ep : registry.all()) {
                cb.call(value.applyAsDouble(ep), ep.key());
            }
        }).register(metricsRegistry);
    }

    /** The configuration applied now (what the data path reads for the next request). */
    public GatewayConfig config() {
        return applied.config();
    }

    @Override
    public AppliedConfig applied() {
        return applied;
    }

    @Override
    public Path baseDir() {
        return baseDir;
    }

    @Override
    public Path configFile() {
        return configFile;
    }

    public PdMetrics pdMetrics() {
        return pdMetrics;
    }

    public RouteTable routeTable() {
        return router.table();
    }

    public RoutingStage router() {
        return router;
    }

    public GatewayMetrics metrics() {
        return metrics;
    }

    public AdminApi admin() {
        return admin;
    }

    private AdminApi.Reply tenantsReply() {
        try {
            var body = new com.fasterxml.jackson.databind.ObjectMapper().writerWithDefaultPrettyPrinter()
                .writeValueAsString(java.util.Map.of("tenants", tenants.usage(config())));
            return AdminApi.Reply.json(200, body);
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new IllegalStateException("tenant usage is maps of strings and numbers", e);
        }
    }

    /** Tenants' usage against their limits and the tenant counters. */
    public io.kvgate.dataplane.tenant.Tenants tenants() {
        return tenants;
    }

    public EndpointRegistry registry() {
        return registry;
    }

    public NanoClock clock() {
        return clock;
    }

    public UpstreamPool pool() {
        return pool;
    }

    public HealthChecker health() {
        return health;
    }

    public EngineLoadScraper loadScraper() {
        return loadScraper;
    }

    public String transportName() {
        return transport.name();
    }

    public int port() {
        return ((InetSocketAddress) listener.localAddress()).getPort();
    }

    public int adminPort() {
        return ((InetSocketAddress) adminListener.localAddress()).getPort();
    }

    /** The control socket's path, or null when none is bound. */
    public Path controlSocketPath() {
        return controlSocket == null ? null : controlSocket.path();
    }

    @Override
    public void migrateStreams(EndpointState ep, long withinMs) {
        if (liveExchanges != null) {
            liveExchanges.migrateOff(ep, withinMs);
        }
    }

    @Override
    public void drain(boolean on) {
        if (drain.draining() != on) {
            Log.info(on ? "draining: new requests are refused (503), requests in flight finish" : "drain undone: accepting requests");
        }
        if (on) {
            drain.start();
        } else {
            drain.undo();
        }
    }

    @Override
    public boolean draining() {
        return drain.draining();
    }

    /**
     * Starts the shutdown a signal asks for (see {@link ShutdownSequence}): not ready at once, serving for
     * {@code drainDelayMs}, then no new connections and up to {@code drainMs} for requests in flight, then closed, on
     * this gateway's clock. The caller drives it ({@link ShutdownSequence#run} or {@link ShutdownSequence#step}); a
     * second call returns the same sequence.
     */
    public synchronized ShutdownSequence shutdown(long drainDelayMs, long drainMs) {
        if (shutdown == null) {
            shutdown = new ShutdownSequence(clock, drainDelayMs, drainMs, new ShutdownSequence.Steps() {
                @Override
                public void announce() {
                    drain.announceShutdown();
                    Log.info("shutting down: /ready answers 503, requests are served for " + drainDelayMs
                        + " ms more (shutdown.drain_delay_ms) so balancers move away, then draining (up to " + drainMs + " ms)");
                }

                @Override
                public void stopAccepting() {
                    drain.start();
                    listener.close().syncUninterruptibly();
                    extraDoors.forEach(FrontDoor.Open::stopAccepting);
                    Log.info("stopped accepting; draining " + inFlight() + " request(s) in flight");
                }

                @Override
                public long inFlight() {
                    return Gateway.this.inFlight();
                }

                @Override
                public void endAndClose() {
                    if (liveExchanges != null) {
                        liveExchanges.endAll(1_000); // the deadline passed: no live stream is cut silently
                    }
                    closeOpened();
                }
            });
        }
        return shutdown;
    }

    /** Graceful stop: no new connections, in-flight requests get up to {@code drainMs} to finish. */
    public void close(long drainMs) {
        synchronized (this) {
            if (shutdown != null && shutdown.phase() == ShutdownSequence.Phase.STOPPED) {
                return; // a signal's shutdown already closed everything
            }
        }
        drain.start();
        listener.close().syncUninterruptibly();
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(drainMs);
        while (System.nanoTime() < deadline && inFlight() > 0) {
            try {
                Thread.sleep(20); // shutdown path only: poll the in-flight count
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        if (liveExchanges != null) {
            liveExchanges.endAll(1_000); // the deadline passed: no live stream is cut silently
        }
        closeOpened();
    }

    /** The KV inventory, or null when no endpoint publishes KV events. */
    public KvState kv() {
        return kv;
    }

    private long inFlight() {
        router.wake();
        long n = 0;
        for (EndpointState ep : registry.all()) {
            n += ep.outstanding();
        }
        return n;
    }

    @Override
    public void close() {
        close(5_000);
    }
}
