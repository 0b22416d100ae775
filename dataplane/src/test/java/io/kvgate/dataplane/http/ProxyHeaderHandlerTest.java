package io.kvgate.dataplane.http;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.Unpooled;
import io.netty.channel.embedded.EmbeddedChannel;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * {@code proxy_protocol: true} on the real front-door pipeline ({@link FrontDoorHarness}, an embedded channel): the
 * header, then the request, in any split; a header that never completes is closed at {@code request_read_timeout_ms}
 * on the channel's clock.
 */
class ProxyHeaderHandlerTest {
    private static final String YAML = FrontDoorHarness.BASE_YAML.replace("limits:", "proxy_protocol: true\nlimits:");
    private static final String HEALTH = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";

    @Test
    void headerThenRequestInEverySplitIsServedAndTheHeaderHandlersLeaveThePipeline() throws Exception {
        byte[] v1 = ("PROXY TCP4 10.0.0.7 127.0.0.1 40000 8080\r\n" + HEALTH).getBytes(StandardCharsets.US_ASCII);
        byte[] v2 = ProxyProtocolSystemTest.v2(new int[] {10, 0, 0, 7}, HEALTH);
        try (FrontDoorHarness h = new FrontDoorHarness(YAML)) {
            for (byte[] all : new byte[][] {v1, v2}) {
                for (int cut = 1; cut < all.length; cut++) {
                    EmbeddedChannel ch = h.channel();
                    ch.writeInbound(Unpooled.wrappedBuffer(Arrays.copyOfRange(all, 0, cut)));
                    ch.writeInbound(Unpooled.wrappedBuffer(Arrays.copyOfRange(all, cut, all.length)));
                    String out = FrontDoorHarness.output(ch);
                    assertTrue(out.startsWith("HTTP/1.1 200 OK"), "cut at " + cut + ": " + out);
                    assertNull(ch.pipeline().get("proxy-protocol"), "cut at " + cut);
                    assertNull(ch.pipeline().get("proxy-header"), "cut at " + cut);
                    ch.finishAndReleaseAll();
                }
            }
        }
    }

    @Test
    void aHeaderThatNeverCompletesIsClosedAtTheReadTimeoutAndCounted() throws Exception {
        try (FrontDoorHarness h = new FrontDoorHarness(YAML)) { // request_read_timeout_ms: 1000
            EmbeddedChannel ch = h.channel();
            ch.writeInbound(Unpooled.copiedBuffer("PROXY TCP4 10.0.0.7", StandardCharsets.US_ASCII));
            ch.advanceTimeBy(900, TimeUnit.MILLISECONDS);
            ch.runScheduledPendingTasks();
            assertTrue(ch.isOpen());
            ch.advanceTimeBy(200, TimeUnit.MILLISECONDS);
            ch.runScheduledPendingTasks();
            assertFalse(ch.isOpen());
            assertTrue(h.metrics.render().contains("kvgate_bad_requests_total{reason=\"proxy_protocol_timeout\"} 1"));
            ch.finishAndReleaseAll();
        }
    }

    @Test
    void anAdmittedConnectionIsNotClosedByTheHeaderDeadline() throws Exception {
        try (FrontDoorHarness h = new FrontDoorHarness(YAML)) {
            EmbeddedChannel ch = h.channel();
            ch.writeInbound(Unpooled.copiedBuffer("PROXY TCP4 10.0.0.7 127.0.0.1 1 2\r\n", StandardCharsets.US_ASCII));
            ch.advanceTimeBy(1100, TimeUnit.MILLISECONDS);
            ch.runScheduledPendingTasks();
            assertTrue(ch.isOpen(), "the header arrived: the idle timeout (120 s) governs the connection now");
            ch.writeInbound(Unpooled.copiedBuffer(HEALTH, StandardCharsets.US_ASCII));
            assertTrue(FrontDoorHarness.output(ch).startsWith("HTTP/1.1 200 OK"));
            ch.finishAndReleaseAll();
        }
    }
}
