package io.kvgate.dataplane;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.ConfigException;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.admin.AdminApi;
import io.kvgate.dataplane.admin.AdminHandler;
import io.kvgate.dataplane.http.ClientChannelInitializer;
import io.kvgate.dataplane.http.LocalRoutes;
import io.kvgate.dataplane.metrics.GatewayMetrics;
import io.kvgate.dataplane.pd.PdHooks;
import io.kvgate.dataplane.pd.PdMetrics;
import io.kvgate.dataplane.proxy.GatewayContext;
import io.kvgate.dataplane.proxy.RequestHooks;
import io.kvgate.dataplane.route.EndpointRegistry;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.kv.KvRoutes;
import io.kvgate.dataplane.kv.KvState;
import io.kvgate.dataplane.route.RulePolicies;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.dataplane.route.RouteTable;
import io.kvgate.dataplane.route.RoutingStage;
import io.kvgate.dataplane.route.Rule;
import io.kvgate.dataplane.upstream.HealthChecker;
import io.kvgate.dataplane.upstream.UpstreamPool;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpServerCodec;
import java.net.InetSocketAddress;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The assembled gateway: transport, routing stage, upstream pool, health probes, the client listener and the
 * admin listener. {@link #start} returns once both listeners are bound; {@link #close} drains: it stops accepting,
 * reports draining on /health, lets requests in flight finish (bounded), then stops.
 */
public final class Gateway implements AutoCloseable {
    private final NanoClock clock;
    private final Transport transport;
    private final EventLoopGroup boss;
    private final EventLoopGroup workers;
    private final EventLoopGroup adminGroup;
    private final EndpointRegistry registry = new EndpointRegistry();
    private final GatewayMetrics metrics = new GatewayMetrics();
    private final PdMetrics pdMetrics = new PdMetrics();
    private final RoutingStage router;
    private final UpstreamPool pool;
    private final HealthChecker health;
    private final AdminApi admin;
    private final Channel listener;
    private final Channel adminListener;
    private volatile GatewayConfig config;
    private volatile KvState kv;
    private volatile boolean draining;

    private Gateway(GatewayConfig cfg, NanoClock clock, RequestHooksFactory hooksFactory) throws Exception {
        this.config = cfg;
        this.clock = clock;
        this.transport = Transport.select(cfg.transport());
        if (transport.fallbackReason() != null) {
            System.err.println("kvgate: transport " + cfg.transport() + " -> " + transport.name() + ": " + transport.fallbackReason());
        }
        int threads = cfg.ioThreads() > 0 ? cfg.ioThreads() : Math.max(1, Runtime.getRuntime().availableProcessors());
        this.boss = transport.newGroup(1, "kvgate-accept");
        this.workers = transport.newGroup(threads, "kvgate-io");
        this.adminGroup = transport.newGroup(1, "kvgate-admin");
        RouteTable table = buildTable(cfg);
        this.router = new RoutingStage(cfg.router(), table, clock, metrics.stages);
        this.pool = new UpstreamPool(transport.clientChannel(), cfg.upstream(), cfg.limits());
        this.admin = new AdminApi(this);
        KvRoutes kvRoutes = new KvRoutes(this);
        kvRoutes.registerAdmin(admin);
        metrics.addSource(kvRoutes.parityProbe()::writeMetrics);
        metrics.addSource(this::writeKvMetrics);
        RequestHooks extra = hooksFactory == null ? kvRoutes : hooksFactory.create(this);
        GatewayContext[] holder = new GatewayContext[1];
        PdHooks pd = new PdHooks(() -> holder[0], pdMetrics);
        RequestHooks hooks = new RequestHooks() {
            @Override
            public io.netty.handler.codec.http.FullHttpResponse handleLocal(io.netty.channel.ChannelHandlerContext ctx,
                    io.netty.handler.codec.http.HttpRequest head, io.netty.buffer.ByteBuf body,
                    io.kvgate.dataplane.http.RequestFields fields, Rule rule) {
                return extra.handleLocal(ctx, head, body, fields, rule);
            }

            @Override
            public io.kvgate.dataplane.proxy.ActiveExchange startCustomExchange(io.netty.channel.ChannelHandlerContext ctx,
                    io.netty.handler.codec.http.HttpRequest head, io.netty.buffer.ByteBuf body,
                    io.kvgate.dataplane.http.RequestFields fields, Rule rule, String requestId, boolean explain, long startNs,
                    io.kvgate.dataplane.proxy.ExchangeOwner owner) {
                io.kvgate.dataplane.proxy.ActiveExchange ex = pd.start(ctx, head, body, fields, rule, requestId, explain, startNs, owner);
                return ex != null ? ex : extra.startCustomExchange(ctx, head, body, fields, rule, requestId, explain, startNs, owner);
            }
        };
        GatewayContext gw = new GatewayContext(cfg, router, pool, metrics, clock, hooks);
        holder[0] = gw;
        metrics.addSource(pdMetrics::write);
        registerMetrics();
        this.health = new HealthChecker(workers.next(), transport.clientChannel(),
            () -> List.<Rule>copyOf(router.table().rules()), router, cfg.health());
        LocalRoutes local = new LocalRoutes(gw, () -> draining);
        ServerBootstrap sb = new ServerBootstrap()
            .group(boss, workers)
            .channel(transport.serverChannel())
            .option(ChannelOption.SO_BACKLOG, 4096)
            .option(ChannelOption.SO_REUSEADDR, true)
            .childOption(ChannelOption.TCP_NODELAY, true)
            .childHandler(new ClientChannelInitializer(gw, local));
        this.listener = sb.bind(cfg.listen().host(), cfg.listen().port()).sync().channel();
        AdminHandler adminHandler = new AdminHandler(admin, cfg.adminToken());
        // The admin API has its own thread: an explain waits on the routing stage, never on a client I/O thread.
        this.adminListener = new ServerBootstrap().group(boss, adminGroup).channel(transport.serverChannel())
            .childHandler(new ChannelInitializer<SocketChannel>() {
                @Override
                protected void initChannel(SocketChannel ch) {
                    ch.pipeline().addLast(new HttpServerCodec(), new HttpObjectAggregator(16 << 20), adminHandler);
                }
            })
            .bind(cfg.adminListen().host(), cfg.adminListen().port()).sync().channel();
        health.start();
        startupParityProbe(kvRoutes.parityProbe());
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
            {"kvgate_kv_last_seq", "gauge", "Last sequence number received."}};
        var status = k.status();
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
                    System.err.println("kvgate: parity probe rule=" + res.rule() + " endpoint=" + res.endpoint() + " check="
                        + res.check() + ": " + res.verdict() + " (" + res.detail() + ")");
                }
            }
        }, "kvgate-parity-probe");
        t.setDaemon(true);
        t.start();
    }

    /** Builds the extra request hooks (render routes, P/D) once the gateway's parts exist. */
    @FunctionalInterface
    public interface RequestHooksFactory {
        RequestHooks create(Gateway gateway);
    }

    public static Gateway start(GatewayConfig cfg) throws Exception {
        return start(cfg, NanoClock.SYSTEM, null);
    }

    public static Gateway start(GatewayConfig cfg, NanoClock clock, RequestHooksFactory hooks) throws Exception {
        return new Gateway(cfg, clock, hooks);
    }

    private RouteTable buildTable(GatewayConfig cfg) {
        if (kv == null && KvState.needed(cfg)) {
            kv = new KvState(KvState.capacityFor(cfg), clock);
        }
        if (kv != null) {
            kv.sync(cfg, registry);
        }
        for (RuleConfig r : cfg.rules()) {
            if (RulePolicies.needsPromptTokens(r) && r.tokenizer() == null) {
                System.err.println("kvgate: rule '" + r.name() + "' (" + r.policy() + ") has no tokenizer: token-id prompts are "
                    + "routed exactly, text and chat prompts take the fallback policy (" + r.fallback() + ")");
            }
        }
        BlockIndex index = kv == null ? null : kv.index();
        return RouteTable.build(cfg, registry, ctx -> RulePolicies.create(ctx.rule(), ctx.endpoints(), index, clock, metrics.stages));
    }

    /**
     * Swaps the rule set without dropping traffic: requests in flight finish where they are, new requests route by
     * the new rules. Listener, transport and limits are fixed for the process lifetime.
     */
    public synchronized void applyConfig(GatewayConfig next) throws ConfigException {
        GatewayConfig cur = config;
        if (!next.listen().equals(cur.listen()) || !next.adminListen().equals(cur.adminListen())
            || !next.transport().equals(cur.transport())) {
            throw new ConfigException("listen, admin_listen and transport cannot change at run time (restart the gateway)");
        }
        RouteTable table = buildTable(next);
        router.swap(table);
        config = next;
    }

    private void registerMetrics() {
        metrics.addSource(out -> {
            router.wake(); // apply quietly published completions before reading load
            io.kvgate.dataplane.route.RuleStats.writeAll(out);
            GatewayMetrics.counter(out, "kvgate_router_ring_full_total", "Requests shed because the routing ring was full.",
                router.ringFullRejects());
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

    public GatewayConfig config() {
        return config;
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

    public String transportName() {
        return transport.name();
    }

    public int port() {
        return ((InetSocketAddress) listener.localAddress()).getPort();
    }

    public int adminPort() {
        return ((InetSocketAddress) adminListener.localAddress()).getPort();
    }

    public void startDrain() {
        draining = true;
    }

    public boolean draining() {
        return draining;
    }

    /** Graceful stop: no new connections, in-flight requests get up to {@code drainMs} to finish. */
    public void close(long drainMs) {
        draining = true;
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
        health.close();
        adminListener.close().syncUninterruptibly();
        workers.shutdownGracefully(0, 2, TimeUnit.SECONDS).syncUninterruptibly();
        adminGroup.shutdownGracefully(0, 2, TimeUnit.SECONDS).syncUninterruptibly();
        boss.shutdownGracefully(0, 2, TimeUnit.SECONDS).syncUninterruptibly();
        router.close();
        if (kv != null) {
            kv.close();
        }
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
