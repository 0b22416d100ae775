package io.kvgate.dataplane.admin;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.config.AppliedConfig;
import io.kvgate.dataplane.config.ControlPlane;
import io.kvgate.dataplane.config.ReloadOutcome;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.embedded.EmbeddedChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The admin listener's bounds on EmbeddedChannel time: connection limit, idle timeout, body limit, token. */
class AdminChannelInitializerTest {
    private static final GatewayConfig CFG;

    static {
        try {
            CFG = GatewayConfig.parse("""
                admin_limits:
                  max_connections: 2
                  idle_timeout_ms: 1000
                  max_body_bytes: 1024
                rules:
                  - name: chat
                    models: [m]
                    endpoints:
                      - url: http://127.0.0.1:9
                """);
        } catch (Exception e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private static final ControlPlane CONTROL = new ControlPlane() {
        private boolean draining;

        @Override
        public AppliedConfig applied() {
            return AppliedConfig.first(CFG);
        }

        @Override
        public ReloadOutcome reload(GatewayConfig next) {
            throw new UnsupportedOperationException();
        }

        @Override
        public Path baseDir() {
            return null;
        }

        @Override
        public Path configFile() {
            return null;
        }

        @Override
        public void drain(boolean on) {
            draining = on;
        }

        @Override
        public boolean draining() {
            return draining;
        }
    };

    private final AdminApi api = new AdminApi(CONTROL, null, null, List::of);
    private String token;
    private final AdminChannelInitializer init = new AdminChannelInitializer(api, () -> token, () -> CFG.adminLimits());

    private EmbeddedChannel channel() {
        EmbeddedChannel ch = new EmbeddedChannel();
        ch.freezeTime();
        ch.pipeline().addLast(init);
        return ch;
    }

    private static String send(EmbeddedChannel ch, String request) {
        ch.writeInbound(Unpooled.copiedBuffer(request, StandardCharsets.US_ASCII));
        StringBuilder sb = new StringBuilder();
        for (Object o; (o = ch.readOutbound()) != null; ) {
            ByteBuf b = (ByteBuf) o;
            sb.append(b.toString(StandardCharsets.UTF_8));
            b.release();
        }
        return sb.toString();
    }

    @Test
    void oneConnectionMoreThanTheLimitIsAnswered503AndClosed() {
        EmbeddedChannel a = channel();
        EmbeddedChannel b = channel();
        EmbeddedChannel c = channel();
        assertEquals(2, init.openConnections());
        ByteBuf refused = c.readOutbound();
        assertTrue(refused.toString(StandardCharsets.US_ASCII).startsWith("HTTP/1.1 503 Service Unavailable"));
        refused.release();
        assertFalse(c.isOpen());
        a.close();
        EmbeddedChannel d = channel();
        assertTrue(d.isOpen(), "a closed connection frees its slot");
        assertTrue(send(d, "POST /control/v1/drain HTTP/1.1\r\ncontent-length: 0\r\n\r\n").startsWith("HTTP/1.1 200 OK"));
        assertTrue(CONTROL.draining());
        assertTrue(send(d, "DELETE /admin/v1/drain HTTP/1.1\r\ncontent-length: 0\r\n\r\n").contains("{\"draining\":false}"));
        assertFalse(CONTROL.draining(), "drain can be undone");
        b.close();
        d.close();
    }

    @Test
    void anIdleConnectionIsClosedAfterTheIdleTimeout() {
        EmbeddedChannel ch = channel();
        ch.advanceTimeBy(999, TimeUnit.MILLISECONDS);
        ch.runScheduledPendingTasks();
        assertTrue(ch.isOpen());
        ch.advanceTimeBy(1, TimeUnit.MILLISECONDS);
        ch.runScheduledPendingTasks();
        assertFalse(ch.isOpen(), "admin_limits.idle_timeout_ms");
    }

    @Test
    void aBodyAboveTheLimitIs413AndTheTokenIsReadPerRequest() {
        EmbeddedChannel ch = channel();
        String r = send(ch, "PUT /admin/v1/config HTTP/1.1\r\ncontent-length: 2000\r\n\r\n" + "x".repeat(2000));
        assertTrue(r.startsWith("HTTP/1.1 413"), r);
        EmbeddedChannel ch2 = channel();
        token = "t-0123456789abcdef";
        assertTrue(send(ch2, "GET /admin/v1/status HTTP/1.1\r\n\r\n").startsWith("HTTP/1.1 401"));
        assertTrue(send(ch2, "GET /admin/v1/status HTTP/1.1\r\nauthorization: Bearer t-0123456789abcdef\r\n\r\n")
            .startsWith("HTTP/1.1 200"));
    }
}
