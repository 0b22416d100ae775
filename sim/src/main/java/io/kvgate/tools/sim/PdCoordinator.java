package io.kvgate.tools.sim;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import io.kvgate.tools.sim.SimulatorConfig.Role;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.handler.codec.LineBasedFrameDecoder;
import io.netty.handler.codec.string.StringDecoder;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * Prefill/decode behaviour of the simulated engine (engine-contracts §4), enforced the way the engines do.
 *
 * <p><b>vLLM (sequential, NIXL):</b> a request whose {@code kv_transfer_params.do_remote_decode} is true is a
 * prefill leg: the JSON answer carries a top-level {@code kv_transfer_params} naming the blocks the decode may
 * pull (none when the prompt is shorter than one block). A request whose params say {@code do_remote_prefill} is a
 * decode leg: the params must have been issued by a prefill this decode knows ({@link PdRegistry}), for the same
 * X-Request-Id, else 400; the pulled tokens skip prefill time. Without params the decode recomputes (counted).
 *
 * <p><b>SGLang (concurrent, bootstrap rendezvous):</b> with role prefill or decode every request must carry
 * {@code bootstrap_host/port/room}. A prefill listens on its bootstrap port; a decode connects there and joins
 * the room ({@code JOIN room}); the prefill only runs once the decode joined, and when its forward is done it
 * hands the KV over ({@code KV room tokens}); only then can the decode generate. Both sides wait at most
 * {@code bootstrap-timeout-ms}, then answer 500 — so a proxy that waits for the prefill before sending the
 * decode deadlocks exactly like against the real engine.
 *
 * <p>Engine-loop confined: the bootstrap listener and the decode's bootstrap connections run on the engine loop.
 */
final class PdCoordinator implements AutoCloseable {
    static final int MAX_ROOMS = 65_536;
    private static final JsonNodeFactory JSON = JsonNodeFactory.instance;

    private final EngineSimulator engine;
    private final SimulatorConfig config;
    private final PdRegistry registry;
    private final String engineId;
    private final EventLoopGroup group;
    private Channel bootstrapServer;
    private int bootstrapPort = -1;
    private long remoteRequestCounter;

    /** SGLang prefill: rooms by id. */
    private final Map<Long, Room> rooms = new HashMap<>();

    private static final class Room {
        final long id;
        Channel decode;
        Generation prefill;
        ScheduledFuture<?> expiry;

        Room(long id) {
            this.id = id;
        }
    }

    PdCoordinator(EngineSimulator engine, SimulatorConfig config, EventLoopGroup group, int httpPort) {
        this.engine = engine;
        this.config = config;
        this.group = group;
        this.registry = config.pdRegistry != null ? config.pdRegistry
            : config.pdSecret != null ? PdRegistry.secret(config.pdSecret) : PdRegistry.shared();
        this.engineId = config.engineId != null ? config.engineId
            : "sim-" + config.host + "-" + httpPort;
        if (config.dialect == Dialect.SGLANG && config.bootstrapPort >= 0) {
            startBootstrapServer();
        }
    }

    int bootstrapPort() {
        return bootstrapPort;
    }

    String engineId() {
        return engineId;
    }

    // ------------------------------------------------------------------------------------------- admission gate

    /**
     * Decides what happens to a parsed request before admission. Returns true to admit now; false when the P/D
     * protocol holds it (it is then admitted or failed later through the engine). Throws {@link SimError} to
     * refuse it.
     */
    boolean gate(Generation g) {
        return switch (config.dialect) {
            case VLLM -> gateVllm(g);
            case SGLANG -> gateSglang(g);
            case TRTLLM -> gateTrtllm(g);
            case LLAMACPP -> true; // no disaggregation (refused at configuration)
        };
    }

    /**
     * TensorRT-LLM (sequential, disaggregated_params): a {@code context_only} request runs the prefill and answers
     * one token with {@code choices[0].disaggregated_params} (request_type, first_gen_tokens, ctx_request_id,
     * encoded_opaque_state) and the top-level {@code prompt_token_ids}; a {@code generation_only} request must carry
     * params a known context server issued (else the KV transfer fails: 500) and skips the prefill.
     */
    private boolean gateTrtllm(Generation g) {
        JsonNode dp = g.req.body.get("disaggregated_params");
        if (dp == null || dp.isNull()) {
            if (config.role == Role.DECODE) {
                engine.stats.inc("pd_decode_without_params");
            }
            return true;
        }
        String type = dp.path("request_type").asText("");
        switch (type) {
            case "context_only" -> {
                if (config.role == Role.DECODE) {
                    throw SimError.badRequest("context_only request sent to a generation server");
                }
                engine.stats.inc("pd_prefill_requests");
                g.trtllmContext = true;
                g.contextOnly();
                return true;
            }
            case "generation_only" -> {
                if (config.role == Role.PREFILL) {
                    throw SimError.badRequest("generation_only request sent to a context server");
                }
                String state = dp.path("encoded_opaque_state").asText(null);
                String reason = dp.path("ctx_request_id").isIntegralNumber() && state != null
                    ? registry.consumeOpaque(state)
                    : "disaggregated_params needs ctx_request_id and encoded_opaque_state from the context server";
                if (reason == null) {
                    reason = trtllmHandoffMismatch(g, dp, state);
                }
                if (reason != null) {
                    engine.stats.inc("pd_decode_rejected");
                    throw new SimError(500, "InternalServerError", "KV cache transfer failed: " + reason, null);
                }
                engine.stats.inc("pd_decode_with_params");
                g.transferredTokens = Integer.MAX_VALUE; // the whole prompt arrives with the KV
                return true;
            }
            case "context_and_generation" -> {
                return true;
            }
            default -> throw SimError.badRequest("Unknown disaggregated request type: " + type);
        }
    }

    /**
     * TensorRT-LLM context server finished its forward: the params its answer carries. {@code handoff}: the first token
     * did not end the request with EOS or a stop string, so the KV hand-off is set up (context request id, opaque
     * state) under the request's {@code disagg_request_id}, echoed back; otherwise both ids stay null, as
     * TensorRT-LLM's own orchestrator expects ({@code _verify_ctx_response}: ids only while a hand-off is pending).
     */
    ObjectNode trtllmContextParams(Generation g, int firstToken, boolean handoff) {
        JsonNode requested = g.req.body.path("disaggregated_params").get("disagg_request_id");
        ObjectNode p = JSON.objectNode();
        p.put("request_type", "context_only");
        p.putArray("first_gen_tokens").add(firstToken);
        if (!handoff) {
            p.putNull("ctx_request_id");
            p.putNull("encoded_opaque_state");
            p.putNull("disagg_request_id");
            p.putNull("draft_tokens");
            return p;
        }
        // A global disagg_request_id becomes the context request's id; without one the server numbers it itself.
        long ctxId = requested != null && requested.isIntegralNumber() ? requested.asLong() : ++remoteRequestCounter;
        p.put("ctx_request_id", ctxId);
        p.put("encoded_opaque_state", registry.issueOpaque("sim-trtllm\u0000" + engineId + '\u0000' + ctxId + '\u0000'
            + g.promptTokens + '\u0000' + TextGenerator.hashTokens(g.req.prompts.get(0))));
        p.putNull("draft_tokens");
        if (requested != null && requested.isIntegralNumber()) {
            p.put("disagg_request_id", requested.asLong());
        } else {
            p.putNull("disagg_request_id");
        }
        engine.stats.inc("pd_prefill_params_issued");
        return p;
    }

    /**
     * A generation request whose KV the context's hand-off does not fit: another {@code disagg_request_id} than the
     * context's, or a prompt other than the tokens the context computed (the generation server runs
     * {@code prompt_token_ids} / a token-id {@code prompt} as given, and renders the messages again without them).
     * Null when it fits; counts the generation requests that carried the id and the context's tokens.
     */
    private String trtllmHandoffMismatch(Generation g, JsonNode dp, String state) {
        String[] material = new String(java.util.Base64.getDecoder().decode(state), java.nio.charset.StandardCharsets.UTF_8)
            .split("\u0000");
        if (material.length < 5) {
            return null; // another simulator's older state: nothing more to check
        }
        long ctxId = Long.parseLong(material[2]);
        JsonNode id = dp.get("disagg_request_id");
        if (id != null && id.isIntegralNumber()) {
            if (id.asLong() != ctxId) {
                return "disagg_request_id " + id.asLong() + " is not the context request's " + ctxId;
            }
            engine.stats.inc("pd_decode_disagg_request_id");
        }
        if (!material[4].equals(Long.toString(TextGenerator.hashTokens(g.req.prompts.get(0))))) {
            return "the generation request's prompt (" + g.req.prompts.get(0).length + " tokens) is not the one the"
                + " context server computed (" + material[3] + " tokens)";
        }
        if (g.req.body.has("prompt_token_ids") || (!g.req.chat && g.req.body.path("prompt").isArray())) {
            engine.stats.inc("pd_decode_context_tokens");
        }
        return null;
    }

    private boolean gateVllm(Generation g) {
        JsonNode params = g.req.kvTransferParams;
        if (params == null || !params.isObject()) {
            if (config.role == Role.DECODE) {
                engine.stats.inc("pd_decode_without_params");
            }
            return true;
        }
        if (params.path("do_remote_decode").asBoolean(false)) {
            engine.stats.inc("pd_prefill_requests");
            g.pdPrefill = true;
            return true;
        }
        if (params.path("do_remote_prefill").asBoolean(false)) {
            String reason = registry.verify(params, g.requestId);
            if (reason != null) {
                engine.stats.inc("pd_decode_rejected");
                throw SimError.badRequest(reason, "kv_transfer_params");
            }
            engine.stats.inc("pd_decode_with_params");
            g.transferredBlocks = params.path("remote_block_ids").size();
            return true;
        }
        if (config.role == Role.DECODE) {
            engine.stats.inc("pd_decode_without_params");
        }
        return true;
    }

    /** vLLM prefill leg finished its forward: build the top-level kv_transfer_params of its answer. */
    void onVllmPrefillAdmitted(Generation g, int fullBlocks, int[] blockIds) {
        if (fullBlocks == 0) {
            // Prompt shorter than a block: nothing to transfer, the decode recomputes.
            engine.stats.inc("pd_prefill_no_params");
            return;
        }
        ObjectNode p = JSON.objectNode();
        p.put("do_remote_prefill", true);
        p.put("do_remote_decode", false);
        var ids = p.putArray("remote_block_ids");
        for (int i = 0; i < fullBlocks; i++) {
            ids.add(blockIds[i]);
        }
        p.put("remote_engine_id", engineId);
        p.put("remote_request_id", "cmpl-" + g.requestId + "-" + (++remoteRequestCounter));
        p.put("remote_host", config.host);
        p.put("remote_port", 5600 + (engine.port() % 1000));
        p.put("tp_size", 1);
        registry.issue(p, g.requestId);
        engine.stats.inc("pd_prefill_params_issued");
        g.kvTransferParamsOut = p;
    }

    private boolean gateSglang(Generation g) {
        if (config.role == Role.BOTH) {
            return true;
        }
        CompletionRequest r = g.req;
        if (!r.hasBootstrap || r.bootstrapHost == null || r.bootstrapPort < 0 || r.bootstrapRoom < 0) {
            engine.stats.inc("pd_missing_bootstrap");
            throw SimError.badRequest("Disaggregated " + config.role.name().toLowerCase(java.util.Locale.ROOT)
                + " needs bootstrap_host, bootstrap_port and bootstrap_room in the request (got bootstrap_host="
                + r.bootstrapHost + ", bootstrap_port=" + (r.bootstrapPort < 0 ? "null" : r.bootstrapPort)
                + ", bootstrap_room=" + (r.bootstrapRoom < 0 ? "null" : r.bootstrapRoom) + ")", "bootstrap_room");
        }
        if (config.role == Role.PREFILL) {
            return prefillArrives(g);
        }
        decodeJoins(g);
        return false;
    }

    // --------------------------------------------------------------------------------------- SGLang prefill side

    private boolean prefillArrives(Generation g) {
        long roomId = g.req.bootstrapRoom;
        Room room = rooms.get(roomId);
        engine.stats.inc("pd_prefill_requests");
        if (room != null && room.prefill != null) {
            throw SimError.badRequest("bootstrap_room " + roomId + " already has a prefill request", "bootstrap_room");
        }
        if (room == null) {
            if (rooms.size() >= MAX_ROOMS) {
                throw new SimError(503, "ServiceUnavailableError", "too many open bootstrap rooms", null);
            }
            room = new Room(roomId);
            rooms.put(roomId, room);
        }
        g.pdRoom = roomId;
        // Prefill always produces just the first token: decoding is the decode server's job.
        g.limitToFirstToken();
        Room fr = room;
        g.onEnd = () -> prefillEnded(g, fr);
        if (room.decode != null) {
            cancelExpiry(room);
            engine.stats.inc("pd_rendezvous");
            return true;
        }
        room.prefill = g;
        engine.stats.inc("pd_prefill_waiting_for_decode");
        armExpiry(room);
        return false;
    }

    private void prefillEnded(Generation g, Room room) {
        if (room.prefill == g) {
            room.prefill = null;
        }
        if (g.completedNormally() && room.decode != null && room.decode.isActive()) {
            room.decode.writeAndFlush(Unpooled.copiedBuffer("KV " + room.id + " " + g.promptTokens + "\n",
                StandardCharsets.US_ASCII));
            engine.stats.inc("pd_kv_transferred");
        }
        if (rooms.get(room.id) == room) {
            rooms.remove(room.id);
            cancelExpiry(room);
        }
    }

    private void onJoin(Channel decode, long roomId) {
        Room room = rooms.get(roomId);
        if (room == null) {
            if (rooms.size() >= MAX_ROOMS) {
                decode.writeAndFlush(Unpooled.copiedBuffer("ERR rooms full\n", StandardCharsets.US_ASCII));
                decode.close();
                return;
            }
            room = new Room(roomId);
            rooms.put(roomId, room);
        }
        if (room.decode != null) {
            decode.writeAndFlush(Unpooled.copiedBuffer("ERR room taken\n", StandardCharsets.US_ASCII));
            decode.close();
            return;
        }
        room.decode = decode;
        engine.stats.inc("pd_decode_joined");
        decode.writeAndFlush(Unpooled.copiedBuffer("OK " + roomId + "\n", StandardCharsets.US_ASCII));
        Room fr = room;
        decode.closeFuture().addListener(f -> {
            if (fr.decode == decode) {
                fr.decode = null;
                if (fr.prefill == null && rooms.get(fr.id) == fr) {
                    rooms.remove(fr.id);
                    cancelExpiry(fr);
                }
            }
        });
        Generation waiting = room.prefill;
        if (waiting != null) {
            room.prefill = null;
            cancelExpiry(room);
            engine.stats.inc("pd_rendezvous");
            engine.admitDeferred(waiting);
        } else {
            armExpiry(room);
        }
    }

    private void armExpiry(Room room) {
        cancelExpiry(room);
        room.expiry = engine.loop().schedule(() -> expire(room), config.bootstrapTimeoutMs, TimeUnit.MILLISECONDS);
    }

    private void cancelExpiry(Room room) {
        if (room.expiry != null) {
            room.expiry.cancel(false);
            room.expiry = null;
        }
    }

    private void expire(Room room) {
        room.expiry = null;
        if (rooms.get(room.id) != room) {
            return;
        }
        rooms.remove(room.id);
        Generation p = room.prefill;
        if (p != null) {
            room.prefill = null;
            engine.stats.inc("pd_bootstrap_timeouts");
            engine.failDeferred(p, new SimError(500, "InternalServerError", "KV transfer failed: the decode never "
                + "joined bootstrap_room " + room.id + " within " + config.bootstrapTimeoutMs + " ms", null));
        }
        if (room.decode != null) {
            room.decode.close();
        }
    }

    private void startBootstrapServer() {
        ServerBootstrap b = new ServerBootstrap()
            .group(group)
            .channel(engine.serverChannelClass())
            .option(ChannelOption.SO_REUSEADDR, true)
            .childHandler(new ChannelInitializer<SocketChannel>() {
                @Override
                protected void initChannel(SocketChannel ch) {
                    ch.pipeline().addLast(new LineBasedFrameDecoder(128));
                    ch.pipeline().addLast(new StringDecoder(StandardCharsets.US_ASCII));
                    ch.pipeline().addLast(new SimpleChannelInboundHandler<String>() {
                        @Override
                        protected void channelRead0(ChannelHandlerContext ctx, String line) {
                            String[] parts = line.trim().split(" ");
                            if (parts.length == 2 && parts[0].equals("JOIN")) {
                                try {
                                    onJoin(ctx.channel(), Long.parseLong(parts[1]));
                                    return;
                                } catch (NumberFormatException ignored) {
                                    // malformed: answered below
                                }
                            }
                            engine.stats.inc("pd_bootstrap_malformed");
                            ctx.writeAndFlush(Unpooled.copiedBuffer("ERR malformed\n", StandardCharsets.US_ASCII));
                            ctx.close();
                        }

                        @Override
                        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                            engine.stats.inc("pd_bootstrap_malformed");
                            ctx.close();
                        }
                    });
                }
            });
        try {
            bootstrapServer = b.bind(config.host, config.bootstrapPort).sync().channel();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted binding the bootstrap port", e);
        } catch (RuntimeException e) {
            throw new IllegalStateException("cannot bind bootstrap port " + config.host + ":" + config.bootstrapPort
                + ": " + e, e);
        }
        bootstrapPort = ((java.net.InetSocketAddress) bootstrapServer.localAddress()).getPort();
    }

    // ---------------------------------------------------------------------------------------- SGLang decode side

    private void decodeJoins(Generation g) {
        engine.stats.inc("pd_decode_requests");
        long roomId = g.req.bootstrapRoom;
        boolean[] settled = new boolean[1];
        ScheduledFuture<?> timeout = engine.loop().schedule(() -> {
            if (!settled[0]) {
                settled[0] = true;
                engine.stats.inc("pd_bootstrap_timeouts");
                engine.failDeferred(g, new SimError(500, "InternalServerError", "KV transfer failed: no KV from the "
                    + "prefill for bootstrap_room " + roomId + " within " + config.bootstrapTimeoutMs + " ms", null));
            }
        }, config.bootstrapTimeoutMs, TimeUnit.MILLISECONDS);
        Bootstrap b = new Bootstrap()
            .group(engine.loop())
            .channel(engine.clientChannelClass())
            .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, (int) Math.min(config.bootstrapTimeoutMs, 10_000))
            .handler(new ChannelInitializer<SocketChannel>() {
                @Override
                protected void initChannel(SocketChannel ch) {
                    ch.pipeline().addLast(new LineBasedFrameDecoder(128));
                    ch.pipeline().addLast(new StringDecoder(StandardCharsets.US_ASCII));
                    ch.pipeline().addLast(new SimpleChannelInboundHandler<String>() {
                        @Override
                        protected void channelRead0(ChannelHandlerContext ctx, String line) {
                            String[] parts = line.trim().split(" ");
                            if (parts[0].equals("OK")) {
                                return;
                            }
                            if (parts.length == 3 && parts[0].equals("KV") && !settled[0]) {
                                settled[0] = true;
                                timeout.cancel(false);
                                ctx.close();
                                try {
                                    g.transferredTokens = Integer.parseInt(parts[2]);
                                } catch (NumberFormatException e) {
                                    g.transferredTokens = 0;
                                }
                                engine.stats.inc("pd_kv_received");
                                engine.admitDeferred(g);
                                return;
                            }
                            if (!settled[0]) {
                                settled[0] = true;
                                timeout.cancel(false);
                                ctx.close();
                                engine.failDeferred(g, new SimError(500, "InternalServerError",
                                    "KV transfer failed: bootstrap server said '" + line.trim() + "'", null));
                            }
                        }

                        @Override
                        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                            ctx.close();
                        }
                    });
                }
            });
        ChannelFuture f = b.connect(g.req.bootstrapHost, g.req.bootstrapPort);
        g.onEnd = () -> {
            settled[0] = true;
            timeout.cancel(false);
            f.channel().close();
        };
        f.addListener(done -> {
            if (!done.isSuccess()) {
                if (!settled[0]) {
                    settled[0] = true;
                    timeout.cancel(false);
                    engine.stats.inc("pd_bootstrap_unreachable");
                    engine.failDeferred(g, new SimError(500, "InternalServerError", "KV transfer failed: cannot reach "
                        + "the bootstrap server " + g.req.bootstrapHost + ":" + g.req.bootstrapPort + " ("
                        + done.cause() + ")", null));
                }
                return;
            }
            f.channel().writeAndFlush(Unpooled.copiedBuffer("JOIN " + roomId + "\n", StandardCharsets.US_ASCII));
        });
    }

    @Override
    public void close() {
        if (bootstrapServer != null) {
            bootstrapServer.close();
        }
    }
}
