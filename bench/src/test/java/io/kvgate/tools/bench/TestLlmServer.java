package io.kvgate.tools.bench;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.DefaultHttpContent;
import io.netty.handler.codec.http.DefaultHttpResponse;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;

/**
 * A scriptable OpenAI-ish server on 127.0.0.1 for the load generator's tests: every request gets a {@link Plan}
 * (status, JSON body or SSE frames, delays, truncation, silence) from a function of the request number and body.
 */
final class TestLlmServer implements AutoCloseable {
    /** What to answer to one request. */
    record Plan(int status, String contentType, String body, List<String> sseChunks, long delayMs, long chunkGapMs,
                boolean closeAfterChunks, boolean mute) {
        static Plan json(int status, String body) {
            return new Plan(status, "application/json", body, null, 0, 0, false, false);
        }

        static Plan sse(List<String> rawChunks) {
            return new Plan(200, "text/event-stream", null, rawChunks, 0, 0, false, false);
        }

        static Plan noAnswer() {
            return new Plan(200, null, null, null, 0, 0, false, true);
        }

        Plan delayed(long ms) {
            return new Plan(status, contentType, body, sseChunks, ms, chunkGapMs, closeAfterChunks, mute);
        }

        Plan gaps(long ms) {
            return new Plan(status, contentType, body, sseChunks, delayMs, ms, closeAfterChunks, mute);
        }

        Plan truncated() {
            return new Plan(status, contentType, body, sseChunks, delayMs, chunkGapMs, true, mute);
        }
    }

    static String chatChunk(String content) {
        return "{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\""
            + content + "\"},\"finish_reason\":null}]}";
    }

    static String usageChunk(long prompt, long completion, long cached) {
        return "{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":" + prompt
            + ",\"completion_tokens\":" + completion + ",\"total_tokens\":" + (prompt + completion)
            + ",\"prompt_tokens_details\":{\"cached_tokens\":" + cached + "}}}";
    }

    static String chatBody(String content, long prompt, long completion, long cached) {
        return "{\"id\":\"c\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
            + "\"content\":\"" + content + "\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":" + prompt
            + ",\"completion_tokens\":" + completion + ",\"total_tokens\":" + (prompt + completion)
            + ",\"prompt_tokens_details\":{\"cached_tokens\":" + cached + "}}}";
    }

    /** A well-formed stream: one frame per token, a usage frame, [DONE]; each event its own chunk. */
    static List<String> stream(String[] tokens, long prompt, long cached) {
        List<String> chunks = new ArrayList<>();
        chunks.add("data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n");
        for (String t : tokens) {
            chunks.add("data: " + chatChunk(t) + "\n\n");
        }
        chunks.add("data: " + usageChunk(prompt, tokens.length, cached) + "\n\n");
        chunks.add("data: [DONE]\n\n");
        return chunks;
    }

    private final EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory());
    private final Channel server;
    final AtomicInteger requests = new AtomicInteger();
    final AtomicInteger connections = new AtomicInteger();
    /** Requests received and not yet answered, and the most there ever were at once. */
    final AtomicInteger inFlight = new AtomicInteger();
    final AtomicInteger maxInFlight = new AtomicInteger();
    final ConcurrentLinkedQueue<String> bodies = new ConcurrentLinkedQueue<>();
    final ConcurrentLinkedQueue<String> paths = new ConcurrentLinkedQueue<>();
    final ConcurrentLinkedQueue<String> headers = new ConcurrentLinkedQueue<>();

    TestLlmServer(Function<String, Plan> planForBody) throws InterruptedException {
        server = new ServerBootstrap()
            .group(group)
            .channel(NioServerSocketChannel.class)
            .childHandler(new ChannelInitializer<SocketChannel>() {
                @Override
                protected void initChannel(SocketChannel ch) {
                    connections.incrementAndGet();
                    ch.pipeline().addLast(new HttpServerCodec(), new HttpObjectAggregator(16 << 20),
                        new SimpleChannelInboundHandler<FullHttpRequest>() {
                            @Override
                            protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest req) {
                                requests.incrementAndGet();
                                String body = req.content().toString(StandardCharsets.UTF_8);
                                if (bodies.size() < 10_000) {
                                    bodies.add(body);
                                    paths.add(req.uri());
                                    headers.add(req.headers().toString());
                                }
                                maxInFlight.accumulateAndGet(inFlight.incrementAndGet(), Math::max);
                                respond(ctx, planForBody.apply(body), inFlight);
                            }
                        });
                }
            })
            .bind(new InetSocketAddress("127.0.0.1", 0)).sync().channel();
    }

    int port() {
        return ((InetSocketAddress) server.localAddress()).getPort();
    }

    String url() {
        return "http://127.0.0.1:" + port();
    }

    private static void respond(ChannelHandlerContext ctx, Plan plan, AtomicInteger inFlight) {
        if (plan.mute()) {
            return;
        }
        Runnable write = () -> {
            inFlight.decrementAndGet(); // answered (the head goes out now)
            if (plan.sseChunks() == null) {
                DefaultFullHttpResponse resp = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1,
                    HttpResponseStatus.valueOf(plan.status()), Unpooled.copiedBuffer(plan.body(), StandardCharsets.UTF_8));
                resp.headers().set(HttpHeaderNames.CONTENT_TYPE, plan.contentType());
                resp.headers().setInt(HttpHeaderNames.CONTENT_LENGTH, resp.content().readableBytes());
                ctx.writeAndFlush(resp);
                return;
            }
            DefaultHttpResponse head = new DefaultHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.valueOf(plan.status()));
            head.headers().set(HttpHeaderNames.CONTENT_TYPE, plan.contentType());
            head.headers().set(HttpHeaderNames.TRANSFER_ENCODING, HttpHeaderValues.CHUNKED);
            ctx.writeAndFlush(head);
            writeChunks(ctx, plan, 0);
        };
        if (plan.delayMs() > 0) {
            ctx.executor().schedule(write, plan.delayMs(), TimeUnit.MILLISECONDS);
        } else {
            write.run();
        }
    }

    private static void writeChunks(ChannelHandlerContext ctx, Plan plan, int from) {
        List<String> chunks = plan.sseChunks();
        for (int i = from; i < chunks.size(); i++) {
            if (i > from && plan.chunkGapMs() > 0) {
                int next = i;
                ctx.executor().schedule(() -> writeChunks(ctx, plan, next), plan.chunkGapMs(), TimeUnit.MILLISECONDS);
                return;
            }
            ctx.writeAndFlush(new DefaultHttpContent(Unpooled.copiedBuffer(chunks.get(i), StandardCharsets.UTF_8)));
        }
        if (plan.closeAfterChunks()) {
            ctx.close();
        } else {
            ctx.writeAndFlush(LastHttpContent.EMPTY_LAST_CONTENT);
        }
    }

    @Override
    public void close() {
        server.close().awaitUninterruptibly(5, TimeUnit.SECONDS);
        group.shutdownGracefully(0, 1, TimeUnit.SECONDS).awaitUninterruptibly(10, TimeUnit.SECONDS);
    }
}
