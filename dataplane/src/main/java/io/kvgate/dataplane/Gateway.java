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
import io.kvgate.dataplane.config.DiscoveredEndpoints;
import io.kvgate.dataplane.config.ReloadMetrics;
import io.kvgate.dataplane.config.ReloadOutcome;
import io.kvgate.dataplane.config.RestartRequiredException;
import io.kvgate.dataplane.http.ClientChannelInitializer;
import io.kvgate.dataplane.tls.ServerTls;
import io.kvgate.dataplane.tls.UpstreamTls;
import io.kvgate.dataplane.http.ConnectionLimit;
import io.kvgate.dataplane.http.DrainState;
import io.kvgate.dataplane.http.LocalRoutes;
import io.kvgate.dataplane.kv.KvMetrics;
import io.kvgate.dataplane.kv.KvRoutes;
import io.kvgate.dataplane.load.EngineLoadScraper;
import io.kvgate.dataplane.prompt.PromptPipeline;
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
import io.kvgate.dataplane.route.EndpointMetrics;
import io.kvgate.dataplane.route.EndpointRegistry;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.RouteTable;
import io.kvgate.dataplane.route.RoutingStage;
import io.kvgate.dataplane.route.Rule;
import io.kvgate.dataplane.route.RulePolicies;
import io.kvgate.dataplane.upstream.HealthChecker;
import io.kvgate.dataplane.upstream.UpstreamPool;
import io.kvgate.index.block.BlockIndex;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.prometheus.metrics.core.metrics.CounterWithCallback;
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
    /** The endpoint sets discovery reported, put in place of discovered rules' endpoints by every reload. */
    private final DiscoveredEndpoints discovered = new DiscoveredEndpoints();

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
            KvMetrics.register(metricsRegistry, () -> kv, registry);
            ReloadMetrics.registerApplied(metricsRegistry, () -> applied);
            reloads.register(metricsRegistry);
            // The data path reads the applied configuration through this context: a reload reaches the next request.
            GatewayContext gw = new GatewayContext(this::config, router, pool, metrics, clock).accessLog(accessLog)
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
            router.registerMetrics(metricsRegistry);
            pool.registerMetrics(metricsRegistry);
            EndpointMetrics.register(metricsRegistry, router::table, registry);
            GatewayMetrics.registerJvm(metricsRegistry);
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
            serverTls.register(metricsRegistry);
            this.listener = openClientListener(cfg, gw, exchanges);
            this.adminListener = openAdminListener(cfg);
            // The certificate file watch runs on the admin loop: file reads never stall a client I/O thread.
            adminGroup.next().execute(this::watchCertificateFiles);
            this.controlSocket = openControlSocket(o, cfg);
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
     * The client listener: the front door ({@link ClientChannelInitializer}) on the I/O threads, handing each routable
     * request to {@code exchanges}, answering local routes itself.
     */
    private Channel openClientListener(GatewayConfig cfg, GatewayContext gw, ExchangeStarter exchanges) throws InterruptedException {
        LocalRoutes local = new LocalRoutes(gw, drain, readiness::evaluate, readiness::evaluateEngines);
        ServerBootstrap sb = new ServerBootstrap()
            .group(boss, workers)
            .channel(transport.serverChannel())
            .option(ChannelOption.SO_BACKLOG, 4096)
            .option(ChannelOption.SO_REUSEADDR, true)
            .childOption(ChannelOption.TCP_NODELAY, true)
            .childHandler(new ClientChannelInitializer(gw, local, exchanges, drain,
                new ConnectionLimit(() -> config().limits().maxConnections()), serverTls));
        Channel ch = sb.bind(cfg.listen().host(), cfg.listen().port()).sync().channel();
        opened.push(() -> ch.close().syncUninterruptibly());
        return ch;
    }

    /** The admin listener, on its own thread: an explain waits on the routing stage, never on a client I/O thread. */
    private Channel openAdminListener(GatewayConfig cfg) throws InterruptedException {
        Channel ch = new ServerBootstrap().group(boss, adminGroup).channel(transport.serverChannel())
            .childHandler(new AdminChannelInitializer(admin, () -> config().adminToken(), () -> config().adminLimits()))
            .bind(cfg.adminListen().host(), cfg.adminListen().port()).sync().channel();
        opened.push(() -> ch.close().syncUninterruptibly());
        return ch;
    }

    /** The control socket the options or {@code control_socket} name, bound; null when none is. */
    private ControlSocket openControlSocket(Options o, GatewayConfig cfg) throws java.io.IOException, InterruptedException {
        Path socketPath = o.controlSocket() != null ? o.controlSocket() : configuredSocket(cfg);
        if (socketPath == null) {
            return null;
        }
        ControlSocket socket = ControlSocket.bind(socketPath, admin, () -> config().controlAllowedUids(), () -> config().adminLimits());
        opened.push(socket);
        return socket;
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

    /** Readiness as {@code ctl status} shows it, with the KV block-size mismatches as warnings. */
    private com.fasterxml.jackson.databind.node.ObjectNode readinessJson() {
        KvState k = kv;
        return readiness.statusJson(k == null ? List.of() : k.blockSizeWarnings(router.table().rules()));
    }

    /** What {@code GET /ready} answers now: the gateway's own readiness. */
    public Readiness.Report readiness() {
        return readiness.evaluate();
    }

    /** What {@code GET /ready/engines} answers now: what the fleet lacks. */
    public Readiness.Report engineReadiness() {
        return readiness.evaluateEngines();
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
        next = discovered.into(seedResolver.withResolvedSeeds(next));
        ConfigCheck.conclude(next, tokenizers);
        AppliedConfig cur = applied;
        List<String> restartOnly = cur.config().restartOnlyChanges(next);
        if (!restartOnly.isEmpty()) {
            throw new RestartRequiredException(restartOnly);
        }
        List<String> pipelineChanges = PromptPipeline.changedOnDisk(router.table(), next, tokenizers);
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
        changes.addAll(DiscoveredEndpoints.changes(cur.config(), next));
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
            discovered.forgetUndiscovered(discovery::discovers);
        }
    }

    /**
     * A rule's endpoint set as discovery found it (the discovery's report thread): applied as a reload of the
     * configuration in effect — subscribers opened and closed, endpoint state carried over, as for a file reload —
     * then terminating endpoints are drained and those serving again undrained ({@link DiscoveredEndpoints}).
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
            discovered.restore(rule, before);
            Log.warn("discovery: rule '" + rule + "': the endpoints found could not be applied: " + e.getMessage());
            return;
        }
        discovered.followTerminating(rule, found, registry, router);
    }

    /** Called after each discovered endpoint set is applied (tests await the event instead of sleeping). */
    public void onDiscoveryApplied(java.util.function.BiConsumer<String, List<io.kvgate.discovery.DiscoveredEndpoint>> listener) {
        discovered.onApplied(listener);
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
