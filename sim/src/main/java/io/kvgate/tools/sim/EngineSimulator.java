package io.kvgate.tools.sim;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.net.Transport;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoop;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.group.ChannelGroup;
import io.netty.channel.group.DefaultChannelGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpServerCodec;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

/**
 * A simulated vLLM or SGLang engine: an HTTP/1.1 keep-alive server that behaves like the engine on the wire
 * (engine-contracts §1). This class owns the process lifecycle (bind, restart, close) and the life of a generation
 * request (validate → pick a DP rank → P/D gate → admission → cache lookup → tokens → end); the pieces live in
 * their own classes: {@link SimRoutes} (which paths the dialect mounts), {@link CompletionRequest} (the dialect's
 * validation), {@link Admission} (running/waiting per rank), {@link RankCaches} (prefix caches and KV events),
 * {@link EngineMetrics} ({@code /metrics}), {@link SimReplies} (answer shapes), {@link FaultPlan} (faults).
 *
 * <p>Threading: one Netty event loop (the "engine loop") runs the listening socket, every connection and every
 * timer, so all engine state has a single writer without locks. Public methods may be called from any thread;
 * those that touch engine state hop onto the loop and wait.
 */
public final class EngineSimulator implements AutoCloseable {
    static final ObjectMapper MAPPER = SimReplies.MAPPER;
    static final byte[] DATA_PREFIX = "data: ".getBytes(StandardCharsets.US_ASCII);
    private static final JsonNodeFactory JSON = JsonNodeFactory.instance;

    final SimulatorConfig config;
    final LatencyModel latency;
    final SimStats stats = new SimStats();
    final FaultPlan faults = new FaultPlan();
    final PromptTokenizer tokenizer;
    final LoraAdapters loras;
    final SimReplies replies;
    final RankCaches caches;
    final Admission admission;
    /** llama.cpp's slot prompt cache (null for the other dialects, which cache blocks in {@link #caches}). */
    final LlamaSlots slots;
    /**
     * llama.cpp: System.nanoTime() when the model has "loaded" (/health and requests answer 503 before); moved to now
     * by {@code POST /sim/loaded}.
     */
    private volatile long loadedAtNanos;
    final EngineMetrics metrics;
    private final Transport transport;
    private final EventLoopGroup group;
    private final EventLoop loop;
    private final ServerBootstrap bootstrap;
    private final ChannelGroup channels;
    private final SimRoutes routes;
    private final int port;
    private final PdCoordinator pd;
    /** {@code --kv-flood}: replayed KV events at a fixed block-op rate, or null. */
    private volatile KvFlood flood;
    private volatile Channel serverChannel;
    private volatile boolean closed;

    // engine-loop state
    private int nextRank;
    private long requestCounter;

    private EngineSimulator(SimulatorConfig config) {
        this.config = config;
        this.latency = new LatencyModel(config.ttftMs, config.itlMs, config.prefillUsPerToken);
        this.tokenizer = config.modelDir != null ? new ModelDirTokenizer(config.modelDir, config.dialect, config.chatTemplate)
            : new WordTokenizer();
        this.loras = new LoraAdapters(config.loraAdapters);
        this.replies = new SimReplies(config);
        this.caches = new RankCaches(config, stats);
        this.slots = config.dialect == Dialect.LLAMACPP ? new LlamaSlots(config.maxConcurrency, config.contextLen) : null;
        this.admission = slots == null
            ? new Admission(config.dpRanks, config.maxConcurrency, config.queueDepth, this::startGeneration)
            : new Admission(1, config.maxConcurrency, config.queueDepth, this::startGeneration, slots::ready);
        this.loadedAtNanos = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(config.loadMs);
        this.metrics = new EngineMetrics(config, admission, caches, stats, slots == null ? null : slots::usage);
        this.transport = Transport.select("epoll");
        this.group = transport.newGroup(1, "sim-" + config.dialect.name().toLowerCase(Locale.ROOT));
        this.loop = group.next();
        this.channels = new DefaultChannelGroup(loop);
        this.bootstrap = new ServerBootstrap()
            .group(group)
            .channel(transport.serverChannel())
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
            shutdownEarly();
            throw new IllegalStateException("interrupted while binding " + config.host + ":" + config.port, e);
        } catch (RuntimeException e) {
            shutdownEarly();
            throw new IllegalStateException("cannot bind " + config.host + ":" + config.port + ": " + e, e);
        }
        this.port = ((java.net.InetSocketAddress) serverChannel.localAddress()).getPort();
        try {
            this.pd = new PdCoordinator(this, config, group, port);
        } catch (RuntimeException e) {
            close();
            throw e;
        }
        this.routes = new SimRoutes(this);
        for (String f : config.startFaults) {
            try {
                injectFaults(f); // --fault: armed before the first request is read
            } catch (RuntimeException e) {
                close();
                throw new IllegalArgumentException("--fault " + f + ": " + e.getMessage(), e);
            }
        }
        if (config.dialect == Dialect.SGLANG) {
            // SGLang announces an empty cache when it starts.
            onLoop(() -> {
                caches.announceCleared();
                return null;
            });
        }
        if (config.kvFloodRate > 0) {
            this.flood = new KvFlood(config, this);
        }
    }

    private void shutdownEarly() {
        group.shutdownGracefully(0, 0, TimeUnit.MILLISECONDS);
        caches.close();
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
        StringBuilder sb = new StringBuilder(caches.describe());
        if (pd.bootstrapPort() >= 0) {
            sb.append(", bootstrap port ").append(pd.bootstrapPort());
        }
        sb.append(", block size ").append(caches.blockSize()).append(", hash ").append(config.effectiveHashAlgo());
        if (transport.fallbackReason() != null) {
            sb.append(", transport ").append(transport.name()).append(" (").append(transport.fallbackReason())
                .append(')');
        }
        return sb.toString();
    }

    /** Number of blocks cached on a rank (tests). */
    public int cachedBlocks(int rank) {
        return onLoop(() -> caches.cachedBlocks(rank));
    }

    /** The {@code /metrics} page as the engine would serve it now (tests; thread-safe). */
    public String metricsText() {
        return onLoop(metrics::render);
    }

    /**
     * Seq of the last KV event batch a rank has published, -1 before its first (tests: a subscriber has caught up
     * when it has received this seq; requests publish their batch before they are answered).
     */
    public long lastEventSeq(int rank) {
        return onLoop(() -> caches.lastEventSeq(rank));
    }

    /** Test instrumentation: every KV event batch payload the engine publishes, as (rank, msgpack payload). */
    void tapKvBatches(java.util.function.BiConsumer<Integer, byte[]> tap) {
        onLoop(() -> {
            caches.tapBatches(tap);
            return null;
        });
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

    /** Runs {@code task} on the engine loop without waiting (the KV flood's batches); false once it is shut down. */
    boolean onLoopAsync(Runnable task) {
        try {
            loop.execute(task);
            return true;
        } catch (java.util.concurrent.RejectedExecutionException e) {
            return false;
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

    /**
     * Handles one request on the engine loop. Returns the generation when the answer is still in progress
     * (running or queued), null when answered already (or hung or deferred on purpose).
     */
    Generation handle(ChannelHandlerContext ctx, FullHttpRequest req, SimHttpHandler handler) {
        stats.inc("http_requests");
        String requestId = req.headers().get("x-request-id");
        if (requestId == null || requestId.isEmpty()) {
            requestId = String.format(Locale.ROOT, "%016x%016x", config.seed, ++requestCounter);
        }
        return routes.dispatch(ctx, req, handler, requestId);
    }

    // ------------------------------------------------------------------------------------------ generations

    /** llama.cpp: the model finishes loading now ({@code POST /sim/loaded}: tests end a loading window when they choose). */
    void finishLoading() {
        loadedAtNanos = System.nanoTime();
    }

    /** llama.cpp: still loading the model (503 "Loading model" on /health and every request). */
    boolean loading() {
        return slots != null && System.nanoTime() < loadedAtNanos;
    }

    /** POST /v1/chat/completions and /v1/completions: validate, pick a rank, apply faults, gate, admit. */
    Generation generate(SimRoutes.Call call, boolean chat) {
        ChannelHandlerContext ctx = call.ctx();
        String requestId = call.requestId();
        boolean keepAlive = call.keepAlive();
        stats.inc(chat ? "chat_requests" : "completion_requests");
        if (loading()) {
            stats.inc("errors_503");
            replies.json(ctx, io.netty.handler.codec.http.HttpResponseStatus.SERVICE_UNAVAILABLE,
                SimReplies.llamaError(503, "Loading model"), requestId, keepAlive);
            return null;
        }
        // Faults apply to generation requests in arrival order.
        if (faults.hangNext > 0) {
            faults.hangNext--;
            stats.inc("faults_hung");
            call.handler().hang();
            return null;
        }
        if (faults.failNext > 0) {
            faults.failNext--;
            stats.inc("faults_failed");
            stats.inc("errors_" + faults.failStatus);
            replies.error(ctx, new SimError(faults.failStatus, faults.failStatus >= 500 ? "InternalServerError"
                : "BadRequestError", faults.failMessage, null), requestId, keepAlive);
            return null;
        }
        CompletionRequest cr;
        int rank;
        try {
            cr = CompletionRequest.parse(chat, SimRoutes.parseJson(call.req(), stats, config), config, loras);
            cr.applyContext(tokenizer, config);
            rank = chooseRank(call.req(), cr);
        } catch (SimError e) {
            stats.inc("errors_" + e.status);
            recordRecent(requestId, chat, e.status, null);
            replies.error(ctx, e, requestId, keepAlive);
            return null;
        }
        if (cr.stream) {
            stats.inc("streaming_requests");
        }
        Generation g = new Generation(this, ctx, cr, requestId, keepAlive, rank);
        if (faults.dieCount > 0) {
            faults.dieCount--;
            g.dieAfterChunks = faults.dieAfterChunks;
        } else if (faults.errorCount > 0) {
            faults.errorCount--;
            g.errorAfterChunks = faults.errorAfterChunks;
        } else if (faults.noDoneCount > 0 && cr.stream) {
            faults.noDoneCount--;
            g.endWithoutDone = true;
        }
        // Token faults (issue #41): count -1 arms every request until cleared.
        if (faults.dieTokensCount != 0) {
            faults.dieTokensCount -= faults.dieTokensCount > 0 ? 1 : 0;
            g.dieAfterTokens = faults.dieAfterTokens;
        } else if (faults.stallTokensCount != 0) {
            faults.stallTokensCount -= faults.stallTokensCount > 0 ? 1 : 0;
            g.stallAfterTokens = faults.stallAfterTokens;
        } else if (faults.errorTokensCount != 0) {
            faults.errorTokensCount -= faults.errorTokensCount > 0 ? 1 : 0;
            g.errorAfterTokens = faults.errorAfterTokens;
        }
        if (faults.slowFirstCount != 0) {
            faults.slowFirstCount -= faults.slowFirstCount > 0 ? 1 : 0;
            g.slowFirstTokenNs = TimeUnit.MILLISECONDS.toNanos(faults.slowFirstTokenMs);
        }
        boolean now;
        try {
            now = pd.gate(g);
        } catch (SimError e) {
            stats.inc("errors_" + e.status);
            recordRecent(requestId, chat, e.status, null);
            replies.error(ctx, e, requestId, keepAlive);
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
            replies.error(g.ctx, e, g.requestId, g.keepAlive);
        }
        g.end();
    }

    /** Starts the generation, queues it (FIFO per rank, bounded) or rejects it with 503. False when rejected. */
    private boolean admit(Generation g) {
        if (admission.offer(g)) {
            if (!g.started) {
                stats.inc("queued");
            }
            return true;
        }
        stats.inc("rejected_queue_full");
        stats.inc("errors_503");
        recordRecent(g.requestId, g.req.chat, 503, g);
        replies.error(g.ctx, new SimError(503, "ServiceUnavailableError",
            "The server is overloaded: " + admission.running(g.rank) + " running, " + admission.waiting(g.rank)
                + " waiting on rank " + g.rank + " (queue=" + config.queueDepth + ").", null), g.requestId, g.keepAlive);
        g.end();
        return false;
    }

    /** Admission gave the generation a running slot: look up the cache, plan the first token, start. */
    private void startGeneration(Generation g) {
        stats.add("prompt_tokens", g.promptTokens);
        if (slots != null) {
            slots.acquire(g);
            stats.inc("cache_queries");
            if (g.cachedTokens > 0) {
                stats.inc("cache_hit_requests");
                stats.add("cached_tokens", g.cachedTokens);
            }
        } else {
            caches.acquire(g);
        }
        if (g.pdPrefill) {
            PrefixCache.Lease first = g.leases.get(0);
            int full = g.req.prompts.get(0).length / caches.blockSize();
            int n = Math.min(full, first.blocks.size());
            int[] ids = new int[n];
            for (int i = 0; i < n; i++) {
                ids[i] = first.blocks.get(i).id;
            }
            pd.onVllmPrefillAdmitted(g, n, ids);
        }
        if (g.transferredBlocks > 0) {
            g.transferredTokens = Math.min(g.transferredBlocks * caches.blockSize(), g.promptTokens);
        }
        // KV pulled from a P/D prefill costs no prefill time here and is reported as cached.
        g.cachedTokens = Math.max(g.cachedTokens, Math.min(g.transferredTokens, g.promptTokens));
        long delayNs = latency.firstTokenDelayNs(g.promptTokens - g.cachedTokens);
        stats.inc("generations_started");
        g.start(delayNs);
        recordRecent(g.requestId, g.req.chat, 200, g);
    }

    /** Called exactly once per generation (normal end, client abort, fault, rejection). */
    void onGenerationEnd(Generation g) {
        if (slots != null) {
            slots.release(g);
        } else {
            caches.release(g);
        }
        if (g.started) {
            stats.add("completion_tokens", g.completionTokens());
            stats.inc("generations_finished");
            // vLLM's vllm:request_success_total{finished_reason}: the request's reason (its first choice's), abort
            // when it ended unfinished (client gone, fault).
            Generation.Seq first = g.seqs.length == 0 ? null : g.seqs[0];
            stats.inc(first != null && first.finished && first.finishReason != null ? "finished_" + first.finishReason : "finished_abort");
        }
        admission.onEnd(g, stats);
        if (g.ctx.handler() instanceof SimHttpHandler h) {
            h.generationEnded(g);
        }
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

    /** Top-level members recorded as received (small values only; prompts and messages are not copied). */
    private static final String[] PASS_THROUGH_RECORDED = {"temperature", "max_tokens", "max_completion_tokens", "user",
        "seed", "top_k", "min_p", "repetition_penalty", "ignore_eos", "include_stop_str_in_output", "no_stop_trim",
        "min_new_tokens", "regex", "stop_regex", "parallel_tool_calls", "tool_choice", "stream_options", "custom_params"};

    void recordRecent(String requestId, boolean chat, int status, Generation g) {
        ObjectNode e = JSON.objectNode();
        e.put("request_id", requestId);
        e.put("path", chat ? "/v1/chat/completions" : "/v1/completions");
        e.put("status", status);
        if (g != null) {
            // what the request asked for, as the engine read it (tests check what a gateway sent)
            e.put("model", g.req.requestedModel);
            e.put("n", g.req.n);
            e.put("include_usage", g.req.includeUsage);
            // the temperature as sent (before the engine's own floor), the stop switch as the dialect read it, and
            // the logit_bias the request carried: what a gateway's dialect edits must be seen to change
            com.fasterxml.jackson.databind.JsonNode t = g.req.body.get("temperature");
            if (t == null) {
                e.putNull("temperature");
            } else {
                e.set("temperature", t.deepCopy());
            }
            e.put("effective_temperature", g.req.temperature);
            e.put("keep_stop", g.req.keepStop);
            com.fasterxml.jackson.databind.JsonNode lb = g.req.body.get("logit_bias");
            if (lb == null) {
                e.putNull("logit_bias");
            } else {
                e.set("logit_bias", lb.deepCopy());
            }
            e.put("stream", g.req.stream);
            e.put("prompt_tokens", g.promptTokens);
            e.put("cached_tokens", g.cachedTokens);
            e.put("rank", g.rank);
            e.put("planned_ttft_us", g.plannedTtftNs / 1_000);
            if (g.req.lora != null) {
                e.put("lora", g.req.lora.name());
            }
            // the pass-through fields as the engine read them (the gateway must neither drop nor change them)
            e.put("greedy", g.req.greedy);
            e.put("max_tokens_field", g.req.maxTokensField);
            if (g.req.requestedMaxTokens != CompletionRequest.NO_LIMIT) {
                e.put("max_tokens", g.req.requestedMaxTokens);
            }
            e.put("seed", g.req.requestSeed);
            e.put("tool_choice", g.req.chat ? g.req.toolChoice() : null);
            ObjectNode received = e.putObject("received");
            for (String f : PASS_THROUGH_RECORDED) {
                JsonNode v = g.req.body.get(f);
                if (v != null) {
                    received.set(f, v.deepCopy());
                }
            }
            com.fasterxml.jackson.databind.node.ArrayNode names = e.putArray("fields");
            g.req.body.fieldNames().forEachRemaining(names::add);
        }
        stats.recordRequest(e);
    }

    // ------------------------------------------------------------------------------------------ admin

    ObjectNode statsJson() {
        ObjectNode s = stats.toJson();
        s.put("dialect", config.dialect.name().toLowerCase(Locale.ROOT));
        s.put("model", config.model);
        s.put("port", port);
        s.put("running", admission.totalRunning());
        s.put("waiting", admission.totalWaiting());
        return s;
    }

    ObjectNode faultsJson() {
        return faults.toJson();
    }

    /** Applies a fault command on the loop; returns the listening-socket change in progress, or null. */
    ChannelFuture applyFaults(JsonNode cmd) {
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

    void restartOnLoop() {
        stats.inc("restarts");
        caches.restart();
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

    void resetPrefixCacheOnLoop() {
        stats.inc("prefix_cache_resets");
        caches.resetPrefixCache();
    }

    EventLoop loop() {
        return loop;
    }

    PdCoordinator pd() {
        return pd;
    }

    Class<? extends ServerChannel> serverChannelClass() {
        return transport.serverChannel();
    }

    Class<? extends Channel> clientChannelClass() {
        return transport.clientChannel();
    }

    /** SGLang prefill: the bound bootstrap port (-1 when none). */
    public int bootstrapPort() {
        return pd.bootstrapPort();
    }

    /** vLLM P/D: this engine's remote_engine_id. */
    public String engineId() {
        return pd.engineId();
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        KvFlood f = flood;
        if (f != null) {
            f.close();
        }
        try {
            onLoop(() -> {
                Channel sc = serverChannel;
                if (sc != null) {
                    sc.close();
                }
                if (pd != null) {
                    pd.close();
                }
                channels.close();
                return null;
            });
        } catch (RuntimeException ignored) {
            // closing anyway
        }
        group.shutdownGracefully(0, 2, TimeUnit.SECONDS).syncUninterruptibly();
        caches.close();
    }
}
