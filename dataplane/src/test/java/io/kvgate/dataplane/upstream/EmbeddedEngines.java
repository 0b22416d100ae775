package io.kvgate.dataplane.upstream;

import io.kvgate.control.config.EndpointConfig;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.Outcome;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelOutboundHandlerAdapter;
import io.netty.channel.EventLoop;
import io.netty.channel.embedded.EmbeddedChannel;
import java.net.ConnectException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;

/**
 * Engine connections as {@link EmbeddedChannel}s (decoder + leg handler: the pool's pipeline), plus a
 * recorder of endpoint outcomes: legs and exchanges run on the test thread, bytes are written and read by hand.
 */
public final class EmbeddedEngines implements UpstreamConnector, EndpointOutcomes {
    /** Counts read requests on an engine channel (back-pressure assertions). */
    public static final class ReadCounter extends ChannelOutboundHandlerAdapter {
        public int reads;

        @Override
        public void read(ChannelHandlerContext ctx) {
            reads++;
            ctx.read();
        }
    }

    public record Completion(EndpointState endpoint, Outcome outcome) {}

    public final List<EmbeddedChannel> opened = new ArrayList<>();
    public final ArrayDeque<EmbeddedChannel> idle = new ArrayDeque<>();
    public final List<EmbeddedChannel> released = new ArrayList<>();
    public final List<Completion> outcomes = new ArrayList<>();
    /** TTFT reports in order: first tokens measured and, as lower bounds, legs cancelled before theirs. */
    public final List<Ttft> ttfts = new ArrayList<>();

    /** One TTFT report: {@code lowerBound} for a leg cancelled by a winning hedge before its first token. */
    public record Ttft(EndpointState endpoint, long ns, boolean lowerBound) {}
    /** Connect attempts that fail before a channel is handed out. */
    public int failConnects;
    /** Connecting throws (a bug inside the gateway, for watchdog tests). */
    public boolean throwOnConnect;

    public static EndpointState endpoint(String host, int port) {
        return new EndpointState(host + ":" + port, port, new EndpointConfig("http://" + host + ":" + port, host, port, 1, null,
            false, null, 1, null, null, 0));
    }

    public static EmbeddedChannel newEngineChannel() {
        EmbeddedChannel ch = new EmbeddedChannel(new ReadCounter());
        UpstreamPool.initEngineChannel(ch.pipeline(), 4096);
        ch.config().setAutoRead(false); // as the pool creates them (UpstreamConnector): auto-read off for life
        return ch;
    }

    /** Puts a fresh connection in the idle pool, as if a previous response had completed on it. */
    public EmbeddedChannel addIdle() {
        EmbeddedChannel ch = newEngineChannel();
        idle.add(ch);
        return ch;
    }

    @Override
    public Channel pollIdle(EndpointState ep) {
        return idle.poll();
    }

    @Override
    public ChannelFuture connect(EventLoop loop, EndpointState ep) {
        if (throwOnConnect) {
            throw new IllegalStateException("connector bug (test)");
        }
        EmbeddedChannel ch = newEngineChannel();
        if (failConnects > 0) {
            failConnects--;
            ch.close();
            return ch.newFailedFuture(new ConnectException("refused (test)"));
        }
        opened.add(ch);
        return ch.newSucceededFuture();
    }

    @Override
    public void release(EndpointState ep, Channel ch) {
        ch.read(); // as the pool does: an idle connection keeps a read pending
        released.add((EmbeddedChannel) ch);
    }

    @Override
    public void complete(EndpointState endpoint, Outcome outcome) {
        outcomes.add(new Completion(endpoint, outcome));
    }

    @Override
    public void firstToken(EndpointState endpoint, long ttftNs) {
        ttfts.add(new Ttft(endpoint, ttftNs, false));
    }

    @Override
    public void noFirstTokenAfter(EndpointState endpoint, long waitedNs) {
        ttfts.add(new Ttft(endpoint, waitedNs, true));
    }

    /** Everything the gateway wrote to {@code ch} so far, as text. */
    public static String written(EmbeddedChannel ch) {
        StringBuilder sb = new StringBuilder();
        Object o;
        while ((o = ch.readOutbound()) != null) {
            ByteBuf b = (ByteBuf) o;
            sb.append(b.toString(StandardCharsets.ISO_8859_1));
            b.release();
        }
        return sb.toString();
    }

    public static ByteBuf bytes(String s) {
        return Unpooled.copiedBuffer(s, StandardCharsets.ISO_8859_1);
    }

    public static int reads(EmbeddedChannel ch) {
        return ch.pipeline().get(ReadCounter.class).reads;
    }
}
