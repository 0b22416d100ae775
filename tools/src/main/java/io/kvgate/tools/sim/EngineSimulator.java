package io.kvgate.tools.sim;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import io.kvgate.tools.sim.SimulatorConfig.ErrorShape;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoop;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.group.ChannelGroup;
import io.netty.channel.group.DefaultChannelGroup;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

/**
 * A simulated vLLM or SGLang engine: an HTTP/1.1 keep-alive server that behaves like the engine on the wire
 * (engine-contracts §1): routes, validation and error shapes per dialect, SSE framing, usage, stop strings, n, a
 * latency model driven by event-loop timers, a bounded admission queue, fault injection and counters.
 *
 * <p>Threading: one Netty event loop (the "engine loop") runs the listening socket, every connection and every
 * timer, so all engine state (admission, faults, cache) has a single writer without locks. Public methods may be
 * called from any thread; those that touch engine state hop onto the loop and wait.
 */
public final class EngineSimulator implements AutoCloseable {
    static final ObjectMapper MAPPER = new ObjectMapper();
    static final byte[] DATA_PREFIX = "data: ".getBytes(StandardCharsets.US_ASCII);
    private static final JsonNodeFactory JSON = JsonNodeFactory.instance;

    final SimulatorConfig config;
    final LatencyModel latency;
    final SimStats stats = new SimStats();
    final FaultPlan faults = new FaultPlan();
    final PromptTokenizer tokenizer;
    private final EventLoopGroup group;
    private final EventLoop loop;
    private final ServerBootstrap bootstrap;
    private final ChannelGroup channels;
    private final int port;
    private volatile Channel serverChannel;
    private volatile boolean closed;

    // prefix cache + KV events (engine-loop state)
    private final BlockKeyer keyer;
    private final int blockSize;
    private final PrefixCache[] caches;
    private final KvEventEncoder[] encoders;
    private final long[] eventSeq;
    private final KvEventPublisher publisher;
    private final PdCoordinator pd;
    private final boolean epoll;
    private String storingSalt;
    private int nextRank;

    // engine-loop state
    private int running;
    private final ArrayDeque<Generation> waiting = new ArrayDeque<>();
    private long requestCounter;

    private EngineSimulator(SimulatorConfig config) {
        this.config = config;
        this.latency = new LatencyModel(config.ttftMs, config.itlMs, config.prefillUsPerToken);
        this.tokenizer = config.modelDir != null ? new ModelDirTokenizer(config.modelDir) : new WordTokenizer();
        this.keyer = BlockKeyer.forAlgo(config.effectiveHashAlgo(), config.hashSeed);
        this.blockSize = config.effectiveBlockSize();
        int ranks = config.dpRanks;
        this.caches = new PrefixCache[ranks];
        this.encoders = new KvEventEncoder[ranks];
        this.eventSeq = new long[ranks];
        boolean sglang = config.dialect == Dialect.SGLANG;
        for (int r = 0; r < ranks; r++) {
            KvEventEncoder enc = new KvEventEncoder(config.eventForm, keyer.unsignedKeys(), sglang);
            encoders[r] = enc;
            caches[r] = new PrefixCache(config.cacheBlocks, new PrefixCache.Listener() {
                @Override
                public void onStored(long[] keys, int from, int to, boolean hasParent, long parent, int[] tokens,
                                     int bs) {
                    stats.add("blocks_stored", to - from);
                    enc.blockStored(keys, from, to, hasParent, parent, tokens, bs, storingSalt);
                }

                @Override
                public void onRemoved(long[] keys, int count) {
                    stats.add("blocks_evicted", count);
                    enc.blockRemoved(keys, count);
                }
            });
        }
        this.publisher = config.kvEventsEndpoint == null ? null
            : new KvEventPublisher(config, stats, config.kvEventsBind());
        this.epoll = Epoll.isAvailable();
        this.group = new MultiThreadIoEventLoopGroup(1, epoll ? EpollIoHandler.newFactory() : NioIoHandler.newFactory());
        this.loop = group.next();
        this.channels = new DefaultChannelGroup(loop);
        Class<? extends ServerChannel> serverClass = epoll ? EpollServerSocketChannel.class : NioServerSocketChannel.class;
        this.bootstrap = new ServerBootstrap()
            .group(group)
            .channel(serverClass)
            .option(ChannelOption.SO_REUSEADDR, true)
            .childOption(ChannelOption.TCP_NODELAY, true)
            .childHandler(new ChannelInitializer<SocketChannel>() {
                @Override
                protected void initChannel(SocketChannel ch) {
                    channels.add(ch);
                    stats.inc("connections_accepted");
                    ch.pipeline().addLast(new HttpServerCodec(8192, 65536, 65536));
                    ch.pipeline().addLast(new HttpObjectAggregator(config.maxBodyBytes));
                    ch.pipeline().addLast(new SimHttpHandler(EngineSimulator.this));
                }
            });
        try {
            this.serverChannel = bootstrap.bind(config.host, config.port).sync().channel();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            group.shutdownGracefully(0, 0, TimeUnit.MILLISECONDS);
            throw new IllegalStateException("interrupted while binding " + config.host + ":" + config.port, e);
        } catch (RuntimeException e) {
            group.shutdownGracefully(0, 0, TimeUnit.MILLISECONDS);
            throw new IllegalStateException("cannot bind " + config.host + ":" + config.port + ": " + e, e);
        }
        this.port = ((java.net.InetSocketAddress) serverChannel.localAddress()).getPort();
        try {
            this.pd = new PdCoordinator(this, config, group, port);
        } catch (RuntimeException e) {
            close();
            throw e;
        }
        if (sglang) {
            // SGLang announces an empty cache when it starts.
            onLoop(() -> {
                announceCleared();
                return null;
            });
        }
    }

    private void announceCleared() {
        for (int r = 0; r < encoders.length; r++) {
            encoders[r].allBlocksCleared();
            flushEvents(r);
        }
    }

    /** Publishes the rank's pending events as one batch (one engine step), with the next seq. */
    private void flushEvents(int rank) {
        KvEventEncoder enc = encoders[rank];
        if (enc.isEmpty()) {
            return;
        }
        byte[] payload = enc.finishBatch(System.currentTimeMillis() / 1000.0, rank);
        long seq = eventSeq[rank]++;
        if (publisher != null) {
            publisher.offer(rank, seq, payload);
        }
    }

    /** Validates the config, binds the port (0 = ephemeral, see {@link #port()}) and starts serving. */
    public static EngineSimulator start(SimulatorConfig config) {
        config.validate();
        return new EngineSimulator(config);
    }

    public int port() {
        return port;
    }

    public String baseUrl() {
        return "http://" + config.host + ":" + port;
    }

    public SimulatorConfig config() {
        return config;
    }

    /** Extra endpoints for the startup line (KV events, bootstrap). */
    String describeExtras() {
        StringBuilder sb = new StringBuilder();
        if (config.kvEventsEndpoint != null) {
            sb.append(", kv events ").append(config.kvEventsBind() ? "bound at " : "connecting to ")
                .append(config.kvEventsEndpoint).append(config.dpRanks > 1 ? " (+rank)" : "");
        }
        if (config.kvReplayEndpoint != null) {
            sb.append(", replay ").append(config.kvReplayEndpoint);
        }
        if (pd.bootstrapPort() >= 0) {
            sb.append(", bootstrap port ").append(pd.bootstrapPort());
        }
        sb.append(", block size ").append(blockSize).append(", hash ").append(config.effectiveHashAlgo());
        return sb.toString();
    }

    /** Number of blocks cached on a rank (tests). */
    public int cachedBlocks(int rank) {
        return onLoop(() -> caches[rank].size());
    }

    /** Live counters (thread-safe). */
    public SimStats stats() {
        return stats;
    }

    /** Applies a fault command (same JSON as {@code POST /sim/faults}). */
    public void injectFaults(String json) {
        JsonNode node;
        try {
            node = MAPPER.readTree(json);
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException("faults: malformed JSON: " + e.getOriginalMessage(), e);
        }
        ChannelFuture change = onLoop(() -> applyFaults(node));
        if (change != null) {
            change.syncUninterruptibly();
        }
    }

    <T> T onLoop(Callable<T> task) {
        if (loop.inEventLoop()) {
            try {
                return task.call();
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }
        try {
            return loop.submit(task).get(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof RuntimeException re) {
                throw re;
            }
            throw new IllegalStateException(e.getCause());
        } catch (java.util.concurrent.TimeoutException e) {
            throw new IllegalStateException("engine loop did not answer in 30 s", e);
        }
    }

    // ------------------------------------------------------------------------------------------------ routing

    /**
     * Handles one request on the engine loop. Returns the generation when the answer is still in progress
     * (running or queued), null when answered already (or hung on purpose).
     */
    Generation handle(ChannelHandlerContext ctx, FullHttpRequest req, SimHttpHandler handler) {
        stats.inc("http_requests");
        boolean keepAlive = HttpUtil.isKeepAlive(req);
        String requestId = req.headers().get("x-request-id");
        if (requestId == null || requestId.isEmpty()) {
            requestId = String.format(Locale.ROOT, "%016x%016x", config.seed, ++requestCounter);
        }
        String uri = req.uri();
        int q = uri.indexOf('?');
        String path = q >= 0 ? uri.substring(0, q) : uri;
        HttpMethod method = req.method();
        try {
            switch (path) {
                case "/v1/chat/completions", "/v1/completions" -> {
                    if (method != HttpMethod.POST) {
                        return detail(ctx, HttpResponseStatus.METHOD_NOT_ALLOWED, "Method Not Allowed", requestId, keepAlive);
                    }
                    return generate(ctx, req, handler, path.equals("/v1/chat/completions"), requestId, keepAlive);
                }
                case "/v1/models" -> {
                    stats.inc("models_requests");
                    respondJson(ctx, HttpResponseStatus.OK, models(), requestId, keepAlive);
                    return null;
                }
                case "/health" -> {
                    stats.inc("health_requests");
                    respondBytes(ctx, faults.unhealthy ? HttpResponseStatus.SERVICE_UNAVAILABLE : HttpResponseStatus.OK,
                        new byte[0], "application/json", requestId, keepAlive);
                    return null;
                }
                case "/metrics" -> {
                    if (!config.metricsMounted()) {
                        return detail(ctx, HttpResponseStatus.NOT_FOUND, "Not Found", requestId, keepAlive);
                    }
                    respondBytes(ctx, HttpResponseStatus.OK, metrics().getBytes(StandardCharsets.UTF_8),
                        "text/plain; version=0.0.4; charset=utf-8", requestId, keepAlive);
                    return null;
                }
                case "/get_server_info", "/server_info" -> {
                    if (config.dialect != Dialect.SGLANG) {
                        return detail(ctx, HttpResponseStatus.NOT_FOUND, "Not Found", requestId, keepAlive);
                    }
                    stats.inc("server_info_requests");
                    respondJson(ctx, HttpResponseStatus.OK, serverInfo(), requestId, keepAlive);
                    return null;
                }
                case "/health_generate" -> {
                    if (config.dialect != Dialect.SGLANG) {
                        return detail(ctx, HttpResponseStatus.NOT_FOUND, "Not Found", requestId, keepAlive);
                    }
                    stats.inc("health_requests");
                    respondBytes(ctx, faults.unhealthy ? HttpResponseStatus.SERVICE_UNAVAILABLE : HttpResponseStatus.OK,
                        new byte[0], "application/json", requestId, keepAlive);
                    return null;
                }
                case "/v1/embeddings" -> {
                    stats.inc("embeddings_requests");
                    if (config.dialect == Dialect.VLLM) {
                        // Not mounted on a generation server: FastAPI's default 404.
                        return detail(ctx, HttpResponseStatus.NOT_FOUND, "Not Found", requestId, keepAlive);
                    }
                    throw SimError.badRequest("This model does not appear to be an embedding model by default. "
                        + "Please add `--is-embedding` when launching the server or try another model.");
                }
                case "/sim/stats" -> {
                    respondJson(ctx, HttpResponseStatus.OK, statsJson(), requestId, keepAlive);
                    return null;
                }
                case "/sim/faults" -> {
                    if (method != HttpMethod.POST) {
                        return detail(ctx, HttpResponseStatus.METHOD_NOT_ALLOWED, "Method Not Allowed", requestId, keepAlive);
                    }
                    ChannelFuture change = applyFaults(parseJson(req));
                    String rid = requestId;
                    if (change == null) {
                        respondJson(ctx, HttpResponseStatus.OK, faultsJson(), rid, keepAlive);
                    } else {
                        change.addListener(f -> respondJson(ctx, HttpResponseStatus.OK, faultsJson(), rid, keepAlive));
                    }
                    return null;
                }
                case "/reset_prefix_cache", "/flush_cache" -> {
                    // vLLM /reset_prefix_cache, SGLang /flush_cache: same process, cache emptied, AllBlocksCleared
                    boolean ours = path.equals("/reset_prefix_cache") == (config.dialect == Dialect.VLLM);
                    if (!ours) {
                        return detail(ctx, HttpResponseStatus.NOT_FOUND, "Not Found", requestId, keepAlive);
                    }
                    if (method != HttpMethod.POST) {
                        return detail(ctx, HttpResponseStatus.METHOD_NOT_ALLOWED, "Method Not Allowed", requestId, keepAlive);
                    }
                    resetPrefixCacheOnLoop();
                    respondBytes(ctx, HttpResponseStatus.OK, new byte[0], "application/json", requestId, keepAlive);
                    return null;
                }
                case "/sim/restart" -> {
                    if (method != HttpMethod.POST) {
                        return detail(ctx, HttpResponseStatus.METHOD_NOT_ALLOWED, "Method Not Allowed", requestId, keepAlive);
                    }
                    restartOnLoop();
                    respondJson(ctx, HttpResponseStatus.OK, JSON.objectNode().put("restarted", true), requestId, keepAlive);
                    return null;
                }
                default -> {
                    stats.inc("not_found");
                    return detail(ctx, HttpResponseStatus.NOT_FOUND, "Not Found", requestId, keepAlive);
                }
            }
        } catch (SimError e) {
            stats.inc("errors_" + e.status);
            respondError(ctx, e, requestId, keepAlive);
            return null;
        }
    }

    private Generation generate(ChannelHandlerContext ctx, FullHttpRequest req, SimHttpHandler handler, boolean chat,
                                String requestId, boolean keepAlive) {
        stats.inc(chat ? "chat_requests" : "completion_requests");
        // Faults apply to generation requests in arrival order.
        if (faults.hangNext > 0) {
            faults.hangNext--;
            stats.inc("faults_hung");
            handler.hang();
            return null;
        }
        if (faults.failNext > 0) {
            faults.failNext--;
            stats.inc("faults_failed");
            stats.inc("errors_" + faults.failStatus);
            respondError(ctx, new SimError(faults.failStatus, faults.failStatus >= 500 ? "InternalServerError"
                : "BadRequestError", faults.failMessage, null), requestId, keepAlive);
            return null;
        }
        CompletionRequest cr;
        try {
            cr = CompletionRequest.parse(chat, parseJson(req), config);
            cr.applyContext(tokenizer, config);
        } catch (SimError e) {
            stats.inc("errors_" + e.status);
            recordRecent(requestId, chat, e.status, null);
            respondError(ctx, e, requestId, keepAlive);
            return null;
        }
        if (cr.stream) {
            stats.inc("streaming_requests");
        }
        int rank;
        try {
            rank = chooseRank(req, cr);
        } catch (SimError e) {
            stats.inc("errors_" + e.status);
            respondError(ctx, e, requestId, keepAlive);
            return null;
        }
        Generation g = new Generation(this, ctx, cr, requestId, keepAlive, rank);
        if (faults.dieCount > 0) {
            faults.dieCount--;
            g.dieAfterChunks = faults.dieAfterChunks;
        } else if (faults.errorCount > 0) {
            faults.errorCount--;
            g.errorAfterChunks = faults.errorAfterChunks;
        }
        boolean now;
        try {
            now = pd.gate(g);
        } catch (SimError e) {
            stats.inc("errors_" + e.status);
            recordRecent(requestId, chat, e.status, null);
            respondError(ctx, e, requestId, keepAlive);
            return null;
        }
        if (!now) {
            return g; // held by the P/D protocol: admitDeferred or failDeferred follows
        }
        return admit(g) ? g : null;
    }

    /** A request held by the P/D protocol may now run. Engine loop. */
    void admitDeferred(Generation g) {
        if (g.ended()) {
            return;
        }
        if (!g.ctx.channel().isActive()) {
            stats.inc("aborted_by_client");
            g.end();
            return;
        }
        admit(g);
    }

    /** A request held by the P/D protocol failed: answer the error (status not yet sent). Engine loop. */
    void failDeferred(Generation g, SimError e) {
        if (g.ended()) {
            return;
        }
        stats.inc("errors_" + e.status);
        recordRecent(g.requestId, g.req.chat, e.status, null);
        if (g.ctx.channel().isActive()) {
            respondError(g.ctx, e, g.requestId, g.keepAlive);
        }
        g.end();
    }

    EventLoop loop() {
        return loop;
    }

    Class<? extends ServerChannel> serverChannelClass() {
        return epoll ? EpollServerSocketChannel.class : NioServerSocketChannel.class;
    }

    Class<? extends Channel> clientChannelClass() {
        return epoll ? io.netty.channel.epoll.EpollSocketChannel.class : io.netty.channel.socket.nio.NioSocketChannel.class;
    }

    /** SGLang prefill: the bound bootstrap port (-1 when none). */
    public int bootstrapPort() {
        return pd.bootstrapPort();
    }

    /** vLLM P/D: this engine's remote_engine_id. */
    public String engineId() {
        return pd.engineId();
    }

    /** vLLM and newer SGLang pin with X-data-parallel-rank; SGLang P/D uses bootstrap_room % dp; else round robin. */
    private int chooseRank(FullHttpRequest req, CompletionRequest cr) {
        int ranks = config.dpRanks;
        String pinned = req.headers().get("x-data-parallel-rank");
        if (pinned != null) {
            try {
                int r = Integer.parseInt(pinned.trim());
                if (r >= 0 && r < ranks) {
                    return r;
                }
            } catch (NumberFormatException ignored) {
                // fall through to the error
            }
            throw SimError.badRequest("X-data-parallel-rank=" + pinned + ": must be in 0.." + (ranks - 1));
        }
        if (config.dialect == Dialect.SGLANG && cr.hasBootstrap && cr.bootstrapRoom >= 0) {
            return (int) (cr.bootstrapRoom % ranks);
        }
        int r = nextRank;
        nextRank = (nextRank + 1) % ranks;
        return r;
    }

    /** Starts the generation, queues it (FIFO, bounded) or rejects it with 503. Returns false when rejected. */
    private boolean admit(Generation g) {
        if (running < config.maxConcurrency) {
            startGeneration(g);
            return true;
        }
        if (waiting.size() < config.queueDepth) {
            stats.inc("queued");
            waiting.addLast(g);
            return true;
        }
        stats.inc("rejected_queue_full");
        stats.inc("errors_503");
        recordRecent(g.requestId, g.req.chat, 503, g);
        respondError(g.ctx, new SimError(503, "ServiceUnavailableError",
            "The server is overloaded: " + running + " running, " + waiting.size() + " waiting (queue="
                + config.queueDepth + ").", null), g.requestId, g.keepAlive);
        g.end();
        return false;
    }

    private void startGeneration(Generation g) {
        running++;
        g.started = true;
        stats.add("prompt_tokens", g.promptTokens);
        acquireCache(g);
        if (g.transferredBlocks > 0) {
            g.transferredTokens = Math.min(g.transferredBlocks * blockSize, g.promptTokens);
        }
        // KV pulled from a P/D prefill costs no prefill time here and is reported as cached.
        g.cachedTokens = Math.max(g.cachedTokens, Math.min(g.transferredTokens, g.promptTokens));
        long delayNs = latency.firstTokenDelayNs(g.promptTokens - g.cachedTokens);
        stats.inc("generations_started");
        g.start(delayNs);
        recordRecent(g.requestId, g.req.chat, 200, g);
    }

    private void acquireCache(Generation g) {
        PrefixCache cache = caches[g.rank];
        JsonNode salt = g.req.body.get("cache_salt");
        storingSalt = salt != null && salt.isTextual() ? salt.asText() : null;
        int cached = 0;
        for (int[] prompt : g.req.prompts) {
            long[] keys = keyer.blockKeys(prompt, blockSize, storingSalt);
            PrefixCache.Lease lease = cache.acquire(keys, prompt, blockSize);
            g.leases.add(lease);
            cached += lease.cachedTokens;
        }
        storingSalt = null;
        g.cachedTokens = cached;
        if (g.pdPrefill) {
            PrefixCache.Lease first = g.leases.get(0);
            int full = g.req.prompts.get(0).length / blockSize;
            int n = Math.min(full, first.blocks.size());
            int[] ids = new int[n];
            for (int i = 0; i < n; i++) {
                ids[i] = first.blocks.get(i).id;
            }
            pd.onVllmPrefillAdmitted(g, n, ids);
        }
        stats.inc("cache_queries");
        if (cached > 0) {
            stats.inc("cache_hit_requests");
            stats.add("cached_tokens", cached);
        }
        flushEvents(g.rank);
    }

    /** Called exactly once per generation (normal end, client abort, fault, rejection). */
    void onGenerationEnd(Generation g) {
        for (PrefixCache.Lease lease : g.leases) {
            caches[g.rank].release(lease);
        }
        g.leases.clear();
        if (waiting.remove(g)) {
            // Never ran: nothing to release.
        } else if (g.started) {
            running = Math.max(0, running - 1);
            stats.add("completion_tokens", g.completionTokens());
            stats.inc("generations_finished");
        }
        while (running < config.maxConcurrency && !waiting.isEmpty()) {
            Generation next = waiting.pollFirst();
            if (next.ctx.channel().isActive()) {
                startGeneration(next);
            } else {
                stats.inc("aborted_while_queued");
                next.end();
            }
        }
        if (g.ctx.handler() instanceof SimHttpHandler h) {
            h.generationEnded(g);
        }
    }

    // ------------------------------------------------------------------------------------------------ answers

    private JsonNode parseJson(FullHttpRequest req) {
        ByteBuf content = req.content();
        if (content.readableBytes() == 0) {
            throw SimError.badRequest("request body is empty: expected a JSON object");
        }
        try (InputStream in = new io.netty.buffer.ByteBufInputStream(content.duplicate())) {
            JsonNode node = MAPPER.readTree(in);
            if (node == null || !node.isObject()) {
                throw SimError.badRequest("request body must be a JSON object");
            }
            return node;
        } catch (JsonProcessingException e) {
            stats.inc("malformed_json");
            throw SimError.badRequest("malformed JSON body: " + e.getOriginalMessage());
        } catch (IOException e) {
            throw SimError.badRequest("unreadable body: " + e.getMessage());
        }
    }

    void respondError(ChannelHandlerContext ctx, SimError e, String requestId, boolean keepAlive) {
        ObjectNode inner = JSON.objectNode();
        ObjectNode body;
        if (config.effectiveErrorShape() == ErrorShape.FLAT) {
            body = inner;
            inner.put("object", "error");
        } else {
            body = JSON.objectNode();
            body.set("error", inner);
        }
        inner.put("message", e.getMessage());
        inner.put("type", e.type);
        if (e.param != null) {
            inner.put("param", e.param);
        } else {
            inner.putNull("param");
        }
        inner.put("code", e.status);
        respondJson(ctx, HttpResponseStatus.valueOf(e.status), body, requestId, keepAlive);
    }

    private Generation detail(ChannelHandlerContext ctx, HttpResponseStatus status, String detail, String requestId,
                              boolean keepAlive) {
        respondJson(ctx, status, JSON.objectNode().put("detail", detail), requestId, keepAlive);
        return null;
    }

    void respondJson(ChannelHandlerContext ctx, HttpResponseStatus status, JsonNode body, String requestId,
                     boolean keepAlive) {
        respondBytes(ctx, status, bytes(body), "application/json", requestId, keepAlive);
    }

    void respondBytes(ChannelHandlerContext ctx, HttpResponseStatus status, byte[] body, String contentType,
                      String requestId, boolean keepAlive) {
        FullHttpResponse resp = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, status, Unpooled.wrappedBuffer(body));
        resp.headers().set(HttpHeaderNames.CONTENT_TYPE, contentType);
        resp.headers().setInt(HttpHeaderNames.CONTENT_LENGTH, body.length);
        resp.headers().set("x-request-id", requestId);
        HttpUtil.setKeepAlive(resp, keepAlive);
        var f = ctx.writeAndFlush(resp);
        if (!keepAlive) {
            f.addListener(ChannelFutureListener.CLOSE);
        }
    }

    static byte[] bytes(JsonNode node) {
        try {
            return MAPPER.writeValueAsBytes(node);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }

    private ObjectNode models() {
        ObjectNode root = JSON.objectNode();
        root.put("object", "list");
        ArrayNode data = root.putArray("data");
        ObjectNode m = data.addObject();
        m.put("id", config.model);
        m.put("object", "model");
        m.put("created", config.epochSeconds.getAsLong());
        m.put("owned_by", config.dialect == Dialect.VLLM ? "vllm" : "sglang");
        m.put("root", config.model);
        m.putNull("parent");
        m.put("max_model_len", config.contextLen);
        return root;
    }

    /** SGLang's server info: what a gateway reads to learn the page size, DP size and P/D mode. */
    private ObjectNode serverInfo() {
        ObjectNode o = JSON.objectNode();
        o.put("model_path", config.model);
        o.put("served_model_name", config.model);
        o.put("page_size", blockSize);
        o.put("dp_size", config.dpRanks);
        o.put("context_length", config.contextLen);
        o.put("disaggregation_mode", config.role == SimulatorConfig.Role.BOTH ? "null"
            : config.role.name().toLowerCase(Locale.ROOT));
        if (pd.bootstrapPort() >= 0) {
            o.put("disaggregation_bootstrap_port", pd.bootstrapPort());
        }
        o.put("enable_metrics", config.enableMetrics);
        o.put("version", "sim");
        return o;
    }

    private String metrics() {
        String label = "{model_name=\"" + config.model.replace("\"", "") + "\"}";
        StringBuilder sb = new StringBuilder();
        if (config.dialect == Dialect.VLLM) {
            metric(sb, "vllm:num_requests_running", "gauge", label, running);
            metric(sb, "vllm:num_requests_waiting", "gauge", label, waiting.size());
            metric(sb, "vllm:prompt_tokens_total", "counter", label, stats.get("prompt_tokens"));
            metric(sb, "vllm:generation_tokens_total", "counter", label, stats.get("completion_tokens"));
            metric(sb, "vllm:prefix_cache_queries_total", "counter", label, stats.get("prompt_tokens"));
            metric(sb, "vllm:prefix_cache_hits_total", "counter", label, stats.get("cached_tokens"));
        } else {
            metric(sb, "sglang:num_running_reqs", "gauge", label, running);
            metric(sb, "sglang:num_queue_reqs", "gauge", label, waiting.size());
            metric(sb, "sglang:prompt_tokens_total", "counter", label, stats.get("prompt_tokens"));
            metric(sb, "sglang:generation_tokens_total", "counter", label, stats.get("completion_tokens"));
            metric(sb, "sglang:cached_tokens_total", "counter", label, stats.get("cached_tokens"));
        }
        return sb.toString();
    }

    private static void metric(StringBuilder sb, String name, String type, String label, long value) {
        sb.append("# TYPE ").append(name).append(' ').append(type).append('\n');
        sb.append(name).append(label).append(' ').append(value).append('\n');
    }

    private ObjectNode statsJson() {
        ObjectNode s = stats.toJson();
        s.put("dialect", config.dialect.name().toLowerCase(Locale.ROOT));
        s.put("model", config.model);
        s.put("port", port);
        s.put("running", running);
        s.put("waiting", waiting.size());
        return s;
    }

    private ObjectNode faultsJson() {
        ObjectNode f = JSON.objectNode();
        f.put("fail_next", faults.failNext);
        f.put("die_count", faults.dieCount);
        f.put("error_count", faults.errorCount);
        f.put("hang_next", faults.hangNext);
        f.put("refuse_connections", faults.refuseConnections);
        f.put("unhealthy", faults.unhealthy);
        return f;
    }

    private void recordRecent(String requestId, boolean chat, int status, Generation g) {
        ObjectNode e = JSON.objectNode();
        e.put("request_id", requestId);
        e.put("path", chat ? "/v1/chat/completions" : "/v1/completions");
        e.put("status", status);
        if (g != null) {
            e.put("stream", g.req.stream);
            e.put("prompt_tokens", g.promptTokens);
            e.put("cached_tokens", g.cachedTokens);
            e.put("rank", g.rank);
            e.put("planned_ttft_us", g.plannedTtftNs / 1_000);
        }
        stats.recordRequest(e);
    }

    /** Applies a fault command on the loop; returns the listening-socket change in progress, or null. */
    private ChannelFuture applyFaults(JsonNode cmd) {
        boolean wasRefusing = faults.refuseConnections;
        faults.apply(cmd);
        stats.inc("fault_commands");
        if (faults.refuseConnections && !wasRefusing) {
            // Close the listening socket: new connections are refused by the kernel (RST), like a dead engine.
            Channel sc = serverChannel;
            serverChannel = null;
            return sc == null ? null : sc.close();
        } else if (!faults.refuseConnections && wasRefusing && !closed) {
            ChannelFuture f = bootstrap.bind(config.host, port);
            serverChannel = f.channel();
            return f;
        }
        return null;
    }

    /** {@code POST /sim/restart}: the engine process "restarted" (cache cleared, event seq reset). */
    public void restart() {
        onLoop(() -> {
            restartOnLoop();
            return null;
        });
    }

    /**
     * Empties every rank's cache in the running process and publishes {@code AllBlocksCleared} (seq continues),
     * like vLLM's {@code POST /reset_prefix_cache} and SGLang's {@code /flush_cache}.
     */
    public void resetPrefixCache() {
        onLoop(() -> {
            resetPrefixCacheOnLoop();
            return null;
        });
    }

    private void resetPrefixCacheOnLoop() {
        stats.inc("prefix_cache_resets");
        for (PrefixCache c : caches) {
            c.clear();
        }
        announceCleared();
    }

    private void restartOnLoop() {
        stats.inc("restarts");
        for (int r = 0; r < caches.length; r++) {
            caches[r].clear();
            eventSeq[r] = 0;
            if (publisher != null) {
                publisher.reset(r);
            }
        }
        if (config.dialect == Dialect.SGLANG) {
            announceCleared();
        }
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            onLoop(() -> {
                Channel sc = serverChannel;
                if (sc != null) {
                    sc.close();
                }
                closePd();
                channels.close();
                return null;
            });
        } catch (RuntimeException ignored) {
            // closing anyway
        }
        group.shutdownGracefully(0, 2, TimeUnit.SECONDS).syncUninterruptibly();
        if (publisher != null) {
            publisher.close();
        }
    }

    private void closePd() {
        if (pd != null) {
            pd.close();
        }
    }
}
