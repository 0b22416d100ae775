package io.kvgate.dataplane;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.ConfigException;
import io.kvgate.control.config.ConfigTree;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.control.log.Log;
import io.kvgate.dataplane.admin.AdminApi;
import io.kvgate.dataplane.admin.AdminChannelInitializer;
import io.kvgate.dataplane.admin.ControlSocket;
import io.kvgate.dataplane.config.AppliedConfig;
import io.kvgate.dataplane.config.ConfigCheck;
import io.kvgate.dataplane.config.ControlPlane;
import io.kvgate.dataplane.config.ReloadOutcome;
import io.kvgate.dataplane.config.RestartRequiredException;
import io.kvgate.dataplane.http.ClientChannelInitializer;
import io.kvgate.dataplane.http.ConnectionLimit;
import io.kvgate.dataplane.http.DrainState;
import io.kvgate.dataplane.http.LocalRoutes;
import io.kvgate.dataplane.kv.KvRoutes;
import io.kvgate.dataplane.load.EngineLoadScraper;
import io.kvgate.dataplane.prompt.PromptPipeline;
import io.kvgate.dataplane.prompt.RenderRoutes;
import io.kvgate.dataplane.prompt.TokenizerCache;
import io.kvgate.dataplane.kv.KvState;
import io.kvgate.dataplane.metrics.GatewayMetrics;
import io.kvgate.dataplane.pd.PdHooks;
import io.kvgate.dataplane.pd.PdMetrics;
import io.kvgate.dataplane.ready.ModelProbe;
import io.kvgate.dataplane.ready.Readiness;
import io.kvgate.dataplane.proxy.GatewayContext;
import io.kvgate.dataplane.proxy.PlainExchange;
import io.kvgate.dataplane.request.ActiveExchange;
import io.kvgate.dataplane.request.ExchangeStarter;
import io.kvgate.dataplane.proxy.RequestHooks;
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
    /** How the gateway is started: its configuration and where it came from. */
    public record Options(GatewayConfig config, NanoClock clock, Path configFile, Path controlSocket) {
        public static Options of(GatewayConfig config) {
            return new Options(config, NanoClock.SYSTEM, null, null);
        }
    }

    private final NanoClock clock;
    private final Path configFile;
    private final Path baseDir;
    private final Transport transport;
    private final EndpointRegistry registry = new EndpointRegistry();
    private final GatewayMetrics metrics = new GatewayMetrics();
    private final PdMetrics pdMetrics = new PdMetrics();
    /** Everything opened so far, closed in reverse order by {@link #close} or when start-up fails half-way. */
    private final Deque<AutoCloseable> opened = new ArrayDeque<>();
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
    /** Configuration applied and every listener bound: the first condition of {@code GET /ready}. */
    private volatile boolean started;
    /** The shutdown under way, null before one starts. */
    private ShutdownSequence shutdown;
    /** The tokenizers the current configuration's rules use; a reload reuses those whose files did not change. */
    private final TokenizerCache tokenizers = new TokenizerCache();
    /** Exchanges in progress: at the drain deadline streams end with an error frame + [DONE], the rest with 503. */
    private io.kvgate.dataplane.proxy.LiveExchanges liveExchanges;

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
        opened.push(this::closeCore); // popped last: after every listener and event loop is gone
        try {
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
            this.pool = new UpstreamPool(transport.clientChannel(), cfg.upstream(), cfg.limits());
            KvRoutes kvRoutes = new KvRoutes(router, () -> kv);
            this.admin = new AdminApi(this, router, registry, () -> {
                KvState k = kv;
                return k == null ? List.of() : k.status();
            });
            kvRoutes.registerAdmin(admin);
            metrics.addSource(kvRoutes.parityProbe()::writeMetrics);
            this.parity = kvRoutes.parityProbe();
            // A resolved hash_seed: auto reaches the rule's hashers the way every configuration change does: a reload.
            parity.onSeedResolved(rule -> applyResolvedSeeds());
            this.seedResolver = new io.kvgate.dataplane.kv.SeedResolver(parity, () -> List.<Rule>copyOf(router.table().rules()),
                () -> kv, SEED_PROBE_RETRY_MS, SEED_PROBE_TIMEOUT_MS);
            seedResolver.onAdopted(this::applyResolvedSeeds);
            opened.push(seedResolver);
            metrics.addSource(this::writeKvMetrics);
            metrics.addSource(this::writeConfigMetrics);
            RequestHooks hooks = new RenderRoutes();
            // The data path reads the applied configuration through this context: a reload reaches the next request.
            GatewayContext gw = new GatewayContext(this::config, router, pool, metrics, clock, hooks);
            this.liveExchanges = gw.live();
            PdHooks pd = new PdHooks(() -> gw, pdMetrics, () -> kv == null ? null : kv.index());
            // The exchange layer behind the front door: P/D rules get a P/D exchange, every other rule the plain proxy.
            ExchangeStarter exchanges = (ctx, request, owner) -> {
                ActiveExchange ex = pd.start(ctx, request, owner);
                if (ex != null) {
                    return ex;
                }
                PlainExchange px = new PlainExchange(gw, ctx, owner, request.head(), request.body(), request.fields(),
                    request.rule(), request.requestId(), request.explain(), request.startNs()).withInputs(request.inputs())
                    .withRequestExtras(request.servingEndpoints(), request.warning());
                px.start();
                return px;
            };
            metrics.modelLabels(modelNames(cfg));
            metrics.addSource(pdMetrics::write);
            registerMetrics();
            this.health = new HealthChecker(workers.next(), transport.clientChannel(),
                () -> List.<Rule>copyOf(router.table().rules()), router, cfg.health(), liveExchanges::endpointDown);
            opened.push(health);
            // Engine-reported load: its own event loop, never an I/O thread or the routing thread.
            this.loadScraper = new EngineLoadScraper(transport.newGroup(1, "kvgate-load"), transport.clientChannel(),
                () -> List.<Rule>copyOf(router.table().rules()), () -> config().load(), clock);
            opened.push(loadScraper);
            metrics.addSource(loadScraper::writeMetrics);
            this.readiness = new Readiness(router::table, () -> kv == null ? List.of() : kv.status(), drain::draining,
                drain::shuttingDown, () -> started, clock);
            this.modelProbe = new ModelProbe(readiness, router::table, () -> config().health(),
                new io.kvgate.dataplane.ready.ContextDiscovery(Log::warn, Log::info), router.adapters());
            opened.push(modelProbe);
            admin.readiness(this::readinessJson);
            LocalRoutes local = new LocalRoutes(gw, drain, readiness::evaluate, readiness::evaluateEngines);
            ServerBootstrap sb = new ServerBootstrap()
                .group(boss, workers)
                .channel(transport.serverChannel())
                .option(ChannelOption.SO_BACKLOG, 4096)
                .option(ChannelOption.SO_REUSEADDR, true)
                .childOption(ChannelOption.TCP_NODELAY, true)
                .childHandler(new ClientChannelInitializer(gw, local, exchanges, drain, new ConnectionLimit(() -> config().limits().maxConnections())));
            this.listener = sb.bind(cfg.listen().host(), cfg.listen().port()).sync().channel();
            opened.push(() -> listener.close().syncUninterruptibly());
            // The admin API has its own thread: an explain waits on the routing stage, never on a client I/O thread.
            this.adminListener = new ServerBootstrap().group(boss, adminGroup).channel(transport.serverChannel())
                .childHandler(new AdminChannelInitializer(admin, () -> config().adminToken(), () -> config().adminLimits()))
                .bind(cfg.adminListen().host(), cfg.adminListen().port()).sync().channel();
            opened.push(() -> adminListener.close().syncUninterruptibly());
            Path socketPath = o.controlSocket() != null ? o.controlSocket() : configuredSocket(cfg);
            this.controlSocket = socketPath == null ? null
                : ControlSocket.bind(socketPath, admin, () -> config().controlAllowedUids(), () -> config().adminLimits());
            if (controlSocket != null) {
                opened.push(controlSocket);
            }
            health.start();
            loadScraper.start();
            modelProbe.start();
            startupParityProbe(kvRoutes.parityProbe());
            seedResolver.start();
            started = true;
        } catch (Exception | Error e) {
            closeOpened();
            throw e;
        }
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
    private void writeConfigMetrics(StringBuilder out) {
        AppliedConfig a = applied;
        out.append("# HELP kvgate_config_version Version of the applied configuration (1 at start-up, +1 per accepted change).\n")
            .append("# TYPE kvgate_config_version gauge\nkvgate_config_version ").append(a.version()).append('\n');
        out.append("# HELP kvgate_config_info The applied configuration's digest (SHA-256 of its redacted effective form).\n")
            .append("# TYPE kvgate_config_info gauge\n")
            .append("kvgate_config_info{version=\"").append(a.version()).append("\",digest=\"").append(a.digest()).append("\"} 1\n");
    }

    /** KV ingest and index families, per endpoint and DP rank. */
    private void writeKvMetrics(StringBuilder out) {
        KvState k = kv;
        if (k == null) {
            return;
        }
        java.util.Map<Integer, String> names = new java.util.HashMap<>();
        for (EndpointState ep : registry.all()) {
            names.put(ep.id(), ep.key());
        }
        String[][] families = {
            {"kvgate_kv_subscriber_connected", "gauge", "1 when the SUB socket of (endpoint, rank) is connected."},
            {"kvgate_kv_reconnects_total", "counter", "Reconnections of the event subscriber."},
            {"kvgate_kv_gaps_total", "counter", "Sequence gaps seen (dropped batches)."},
            {"kvgate_kv_replays_total", "counter", "Gaps filled from the engine's replay socket."},
            {"kvgate_kv_restarts_total", "counter", "Engine restarts detected (sequence went backwards)."},
            {"kvgate_kv_clears_total", "counter", "Times the rank's inventory was cleared (restart, unfillable gap, AllBlocksCleared)."},
            {"kvgate_kv_decode_errors_total", "counter", "Malformed event frames counted and dropped."},
            {"kvgate_kv_events_total", "counter", "KV events decoded."},
            {"kvgate_kv_block_ops_total", "counter", "Block store/remove operations applied to the index."},
            {"kvgate_kv_last_seq", "gauge", "Last sequence number received."},
            {"kvgate_kv_other_drainer", "gauge", "1 while another consumer drains the TensorRT-LLM /kv_cache_events endpoint (id jumps on most polls)."},
            {"kvgate_kv_other_drainer_episodes_total", "counter", "Times the pattern of another consumer draining the endpoint's /kv_cache_events started."}};
        var status = k.status();
        out.append("# HELP kvgate_kv_subscriber_up 1 when the (endpoint, rank) subscription is open and connected; 0 while resolving, connecting or retrying.\n");
        out.append("# TYPE kvgate_kv_subscriber_up gauge\n");
        for (var st : status) {
            out.append("kvgate_kv_subscriber_up{rule=\"").append(st.label()).append("\",endpoint=\"")
                .append(names.getOrDefault(st.endpointId(), String.valueOf(st.endpointId()))).append("\",rank=\"")
                .append(st.rank()).append("\"} ").append(st.up() ? 1 : 0).append('\n');
        }
        out.append("# HELP kvgate_kv_subscriber_errors_total Subscription failures by cause (resolve, bind, connect, replay, denied, internal; HTTP drains also http, timeout, too_large).\n");
        out.append("# TYPE kvgate_kv_subscriber_errors_total counter\n");
        for (var st : status) {
            for (var en : st.errors().entrySet()) {
                out.append("kvgate_kv_subscriber_errors_total{rule=\"").append(st.label()).append("\",endpoint=\"")
                    .append(names.getOrDefault(st.endpointId(), String.valueOf(st.endpointId()))).append("\",rank=\"")
                    .append(st.rank()).append("\",cause=\"").append(en.getKey()).append("\"} ").append(en.getValue()).append('\n');
            }
        }
        out.append("# HELP kvgate_kv_dropped_events_total KV events dropped whole by a per-event limit, by reason.\n");
        out.append("# TYPE kvgate_kv_dropped_events_total counter\n");
        for (var st : status) {
            for (var en : st.droppedEvents().entrySet()) {
                out.append("kvgate_kv_dropped_events_total{endpoint=\"")
                    .append(names.getOrDefault(st.endpointId(), String.valueOf(st.endpointId()))).append("\",rank=\"")
                    .append(st.rank()).append("\",reason=\"").append(en.getKey()).append("\"} ").append(en.getValue()).append('\n');
            }
        }
        for (String[] f : families) {
            out.append("# HELP ").append(f[0]).append(' ').append(f[2]).append("\n# TYPE ").append(f[0]).append(' ').append(f[1]).append('\n');
            for (var st : status) {
                long v = switch (f[0]) {
                    case "kvgate_kv_subscriber_connected" -> st.connected() ? 1 : 0;
                    case "kvgate_kv_reconnects_total" -> st.reconnects();
                    case "kvgate_kv_gaps_total" -> st.gaps();
                    case "kvgate_kv_replays_total" -> st.replays();
                    case "kvgate_kv_restarts_total" -> st.restarts();
                    case "kvgate_kv_clears_total" -> st.clears();
                    case "kvgate_kv_decode_errors_total" -> st.decodeErrors();
                    case "kvgate_kv_events_total" -> st.events();
                    case "kvgate_kv_block_ops_total" -> st.blockOps();
                    case "kvgate_kv_other_drainer" -> st.otherDrainer() ? 1 : 0;
                    case "kvgate_kv_other_drainer_episodes_total" -> st.otherDrainerEpisodes();
                    default -> st.lastSeq();
                };
                out.append(f[0]).append("{endpoint=\"").append(names.getOrDefault(st.endpointId(), String.valueOf(st.endpointId())))
                    .append("\",rank=\"").append(st.rank()).append("\"} ").append(v).append('\n');
            }
        }
        out.append("# HELP kvgate_kv_endpoint_blocks Distinct blocks the index holds for an endpoint (union of its ranks).\n");
        out.append("# TYPE kvgate_kv_endpoint_blocks gauge\n");
        for (EndpointState ep : registry.all()) {
            if (ep.config().kvEvents() != null && ep.id() < KvState.MAX_ENDPOINTS) {
                out.append("kvgate_kv_endpoint_blocks{endpoint=\"").append(ep.key()).append("\"} ").append(k.index().blocks(ep.id())).append('\n');
            }
        }
        // The block size each engine keys at (from its stored events) against its rule's: a mismatch is zero hits.
        var sizes = k.ingest().blockSizes();
        out.append("# HELP kvgate_kv_event_block_size Block size of the endpoint's latest stored KV event (0 before any).\n");
        out.append("# TYPE kvgate_kv_event_block_size gauge\n");
        for (EndpointState ep : registry.all()) {
            if (ep.config().kvEvents() != null && ep.id() < KvState.MAX_ENDPOINTS) {
                out.append("kvgate_kv_event_block_size{endpoint=\"").append(ep.key()).append("\"} ")
                    .append(sizes.lastEventBlockSize(ep.id())).append('\n');
            }
        }
        out.append("# HELP kvgate_kv_block_size_mismatch_total Stored KV events whose block size differs from the rule's"
            + " block_size (their prefixes can never match).\n");
        out.append("# TYPE kvgate_kv_block_size_mismatch_total counter\n");
        for (EndpointState ep : registry.all()) {
            if (ep.config().kvEvents() != null && ep.id() < KvState.MAX_ENDPOINTS) {
                out.append("kvgate_kv_block_size_mismatch_total{endpoint=\"").append(ep.key()).append("\"} ")
                    .append(sizes.mismatches(ep.id())).append('\n');
            }
        }
        GatewayMetrics.gauge(out, "kvgate_kv_index_blocks", "Distinct blocks in the index.", k.index().size());
        GatewayMetrics.gauge(out, "kvgate_kv_index_memberships", "(block, endpoint rank) memberships in the index.", k.index().memberships());
        GatewayMetrics.gauge(out, "kvgate_kv_index_capacity_blocks", "Index capacity in distinct blocks.", k.index().config().capacityBlocks());
        GatewayMetrics.gauge(out, "kvgate_kv_index_bytes", "Off-heap bytes of the index.", k.index().sizeBytes());
        GatewayMetrics.counter(out, "kvgate_kv_index_evictions_total", "Blocks evicted because the index was full.", k.index().evictions());
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
        next = withResolvedSeeds(next);
        ConfigCheck.conclude(next, tokenizers);
        AppliedConfig cur = applied;
        List<String> restartOnly = cur.config().restartOnlyChanges(next);
        if (!restartOnly.isEmpty()) {
            throw new RestartRequiredException(restartOnly);
        }
        List<String> pipelineChanges = pipelineChanges(next);
        if (ConfigTree.sameEffective(cur.config(), next) && pipelineChanges.isEmpty()) {
            return new ReloadOutcome(false, cur.version(), cur.digest(), List.of());
        }
        List<String> changes = new java.util.ArrayList<>(ConfigTree.diff(cur.config(), next));
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
        AppliedConfig now = cur.next(next);
        applied = now;
        tokenizers.retainOnly(next.rules().stream().map(RuleConfig::tokenizer).toList());
        metrics.modelLabels(modelNames(next));
        Log.info("configuration version " + now.version() + " applied (" + changes.size() + " change(s)): "
            + String.join("; ", changes));
        seedResolver.poke();
        return new ReloadOutcome(true, now.version(), now.digest(), changes);
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
        return reload(GatewayConfig.load(configFile));
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

    private void registerMetrics() {
        metrics.addSource(out -> {
            router.writeMetrics(out);
            GatewayMetrics.counter(out, "kvgate_router_ring_full_total", "Requests shed because the routing ring was full.",
                router.ringFullRejects());
            GatewayMetrics.counter(out, "kvgate_router_inbox_full_total",
                "Requests shed because their event loop already waited for a ring's worth of routing decisions.", router.inboxFullRejects());
            GatewayMetrics.gauge(out, "kvgate_router_ring_free", "Free slots in the routing ring.", router.ringRemaining());
            GatewayMetrics.counter(out, "kvgate_router_errors_total", "Routing stage handler errors.", router.handlerErrors());
            GatewayMetrics.gauge(out, "kvgate_upstream_open_connections", "Open connections to engines.", pool.openConnections());
            GatewayMetrics.counter(out, "kvgate_upstream_connects_total", "New connections opened to engines.", pool.connectsOpened());
            GatewayMetrics.counter(out, "kvgate_upstream_reuses_total", "Requests sent on a pooled keep-alive connection.", pool.connectsReused());
            out.append("# HELP kvgate_endpoint_outstanding Requests in flight per endpoint.\n# TYPE kvgate_endpoint_outstanding gauge\n");
            for (Rule r : router.table().rules()) {
                for (EndpointState ep : r.endpoints()) {
                    out.append("kvgate_endpoint_outstanding{rule=\"").append(GatewayMetrics.esc(r.name())).append("\",endpoint=\"")
                        .append(ep.key()).append("\"} ").append(ep.outstanding()).append('\n');
                }
            }
            out.append("# HELP kvgate_endpoint_load The load estimate the policies compare: this gateway's requests in flight"
                + " plus the other gateways' part of the engine's running + waiting (aged toward its mean, load.peer_decay),"
                + " or this gateway's in-flight count when the engine reading is stale.\n");
            out.append("# TYPE kvgate_endpoint_load gauge\n");
            for (Rule r : router.table().rules()) {
                for (EndpointState ep : r.endpoints()) {
                    out.append("kvgate_endpoint_load{rule=\"").append(GatewayMetrics.esc(r.name())).append("\",endpoint=\"")
                        .append(ep.key()).append("\"} ").append(ep.load()).append('\n');
                }
            }
            out.append("# HELP kvgate_engine_load_stale 1 when the endpoint's load estimate falls back to this gateway's"
                + " in-flight count (no engine reading, or older than load.stale_ms).\n");
            out.append("# TYPE kvgate_engine_load_stale gauge\n");
            for (Rule r : router.table().rules()) {
                for (EndpointState ep : r.endpoints()) {
                    out.append("kvgate_engine_load_stale{rule=\"").append(GatewayMetrics.esc(r.name())).append("\",endpoint=\"")
                        .append(ep.key()).append("\"} ").append(ep.loadSource() == EndpointState.LoadSource.ENGINE ? 0 : 1).append('\n');
                }
            }
            out.append("# HELP kvgate_endpoint_lifetime_seconds This gateway's requests' mean time in flight on the endpoint"
                + " (Little's law over 2 s, measured when a reading is taken up): how fast the other gateways' part of a"
                + " reading ages (load.peer_decay: lifetime); absent while unknown.\n");
            out.append("# TYPE kvgate_endpoint_lifetime_seconds gauge\n");
            for (EndpointState ep : registry.all()) {
                double life = ep.lifetimeSeconds();
                if (life >= 0) {
                    out.append("kvgate_endpoint_lifetime_seconds{endpoint=\"").append(ep.key()).append("\"} ").append(life).append('\n');
                }
            }
            out.append("# HELP kvgate_endpoint_prefill_tokens Uncached prompt tokens of this gateway's requests still in"
                + " prefill on the endpoint (kv_exact rules; kv.prefill_token_weight).\n");
            out.append("# TYPE kvgate_endpoint_prefill_tokens gauge\n");
            for (EndpointState ep : registry.all()) {
                out.append("kvgate_endpoint_prefill_tokens{endpoint=\"").append(ep.key()).append("\"} ").append(ep.prefillTokens()).append('\n');
            }
            out.append("# HELP kvgate_rule_context_length The context length (tokens) a rule's requests are checked against:"
                + " max_model_len, else the smallest its endpoints state; absent while unknown.\n"
                + "# TYPE kvgate_rule_context_length gauge\n");
            for (Rule r : router.table().rules()) {
                int ctx = r.contextLength();
                if (ctx > 0) {
                    out.append("kvgate_rule_context_length{rule=\"").append(GatewayMetrics.esc(r.name())).append("\"} ")
                        .append(ctx).append('\n');
                }
            }
            out.append("# HELP kvgate_endpoint_route_mounted 1 when the endpoint's engine mounts the route, 0 when it says"
                + " it does not (vLLM GET /openapi.json, SGLang is_embedding): the rule then sends that route's requests to"
                + " its other endpoints; absent while unknown.\n# TYPE kvgate_endpoint_route_mounted gauge\n");
            for (Rule r : router.table().rules()) {
                for (EndpointState ep : r.endpoints()) {
                    if (ep.routesSource() == null) {
                        continue;
                    }
                    for (boolean chat : new boolean[] {true, false}) {
                        out.append("kvgate_endpoint_route_mounted{rule=\"").append(GatewayMetrics.esc(r.name()))
                            .append("\",endpoint=\"").append(ep.key()).append("\",route=\"")
                            .append(io.kvgate.dataplane.ready.EngineRoutes.route(chat)).append("\"} ")
                            .append((ep.unmountedRoutes() & EndpointState.routeBit(chat)) == 0 ? 1 : 0).append('\n');
                    }
                }
            }
            out.append("# HELP kvgate_endpoint_rank_outstanding Requests this gateway pinned to a DP rank of the endpoint"
                + " (X-data-parallel-rank) and still in flight; endpoints with dp_ranks > 1.\n");
            out.append("# TYPE kvgate_endpoint_rank_outstanding gauge\n");
            for (EndpointState ep : registry.all()) {
                for (int rank = 0; ep.ranks() > 1 && rank < ep.ranks(); rank++) {
                    out.append("kvgate_endpoint_rank_outstanding{endpoint=\"").append(ep.key()).append("\",rank=\"").append(rank)
                        .append("\"} ").append(ep.rankOutstanding(rank)).append('\n');
                }
            }
            out.append("# HELP kvgate_endpoint_healthy 1 when the endpoint passes its active probes.\n# TYPE kvgate_endpoint_healthy gauge\n");
            out.append("# HELP kvgate_endpoint_breaker_open 1 when the endpoint's circuit breaker is open or half-open.\n");
            out.append("# TYPE kvgate_endpoint_breaker_open gauge\n");
            for (EndpointState ep : registry.all()) {
                out.append("kvgate_endpoint_healthy{endpoint=\"").append(ep.key()).append("\"} ").append(ep.probeHealthy() ? 1 : 0).append('\n');
                out.append("kvgate_endpoint_breaker_open{endpoint=\"").append(ep.key()).append("\"} ")
                    .append(ep.breaker() == EndpointState.Breaker.CLOSED ? 0 : 1).append('\n');
                out.append("kvgate_endpoint_breaker_opens_total{endpoint=\"").append(ep.key()).append("\"} ").append(ep.breakerOpens.get()).append('\n');
                out.append("kvgate_endpoint_routed_total{endpoint=\"").append(ep.key()).append("\"} ").append(ep.routed.get()).append('\n');
                out.append("kvgate_endpoint_failures_total{endpoint=\"").append(ep.key()).append("\"} ").append(ep.failures.get()).append('\n');
            }
        });
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

    public void startDrain() {
        drain(true);
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
