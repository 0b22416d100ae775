package io.kvgate.dataplane.tenant;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.control.config.TenancyConfig;
import io.kvgate.control.config.TenancyConfig.Limits;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.handler.codec.http.DefaultHttpHeaders;
import io.netty.handler.codec.http.HttpHeaders;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The two spellings of the rate-limit headers (Netty headers for the gateway's own answers, raw lines for relayed
 * engine heads) say the same thing, and {@link Tenants#current} reports a tenant's windows without reserving.
 */
class RateLimitHeadersTest {
    private final ManualClock clock = new ManualClock(0);
    private final Tenants tenants = new Tenants(clock);
    private static final TenancyConfig ONE_REPLICA = new TenancyConfig(List.of(), null, null, 1);

    private static Tenant tenant(Limits l) {
        return new Tenant("acme", java.util.Set.of(), null, false, l, null, false);
    }

    private static String decimal(long v) {
        ByteBuf b = Unpooled.buffer(1);
        RateLimitHeaders.writeDecimal(b, v);
        return b.toString(StandardCharsets.US_ASCII);
    }

    private static String writtenDuration(long ns) {
        ByteBuf b = Unpooled.buffer(2);
        RateLimitHeaders.writeDuration(b, ns);
        return b.toString(StandardCharsets.US_ASCII);
    }

    @Test
    void theByteSpellingOfNumbersAndDurationsMatchesTheStringOne() {
        for (long v : new long[] {0, 1, 9, 10, 99, 100, 12_345, 1_000_000_007L, Long.MAX_VALUE}) {
            assertEquals(Long.toString(v), decimal(v));
        }
        long[] ns = {-5, 0, 1, 999_999, 1_000_000, 250_000_000L, 999_999_999L, 1_000_000_000L, 11_200_000_000L,
            59_000_000_000L, 60_000_000_000L, 61_000_000_001L, 360_000_000_000L, 3_599_000_000_000L, 3_600_000_000_000L,
            3_723_000_000_000L, 86_400_000_000_000L};
        for (long n : ns) {
            assertEquals(RateLimitHeaders.duration(n), writtenDuration(n), "ns=" + n);
        }
        assertEquals("1h0m0s", writtenDuration(3_600_000_000_000L), "Go's spelling keeps the zero minutes");
        assertEquals("1m1s", writtenDuration(60_500_000_000L), "whole seconds, rounded up");
    }

    private static Map<String, String> lines(Reservation r) {
        ByteBuf b = Unpooled.buffer(16);
        RateLimitHeaders.writeLines(r, b);
        Map<String, String> m = new LinkedHashMap<>();
        String text = b.toString(StandardCharsets.US_ASCII);
        assertTrue(text.isEmpty() || text.endsWith("\r\n"), text);
        for (String line : text.split("\r\n")) {
            if (!line.isEmpty()) {
                int colon = line.indexOf(": ");
                m.put(line.substring(0, colon), line.substring(colon + 2));
            }
        }
        return m;
    }

    private static Map<String, String> headers(Reservation r) {
        HttpHeaders h = new DefaultHttpHeaders();
        RateLimitHeaders.write(r, h);
        Map<String, String> m = new LinkedHashMap<>();
        h.forEach(e -> m.put(e.getKey(), e.getValue()));
        return m;
    }

    @Test
    void relayedLinesAndTheGatewaysOwnHeadersSayTheSame() {
        Tenant t = tenant(new Limits(3, 1000, 0, 0));
        tenants.reserve(t, ONE_REPLICA, 400, false);
        clock.advance(1500, TimeUnit.MILLISECONDS);
        Reservation r = tenants.reserve(t, ONE_REPLICA, 100, false);
        Map<String, String> expected = Map.of(
            "x-ratelimit-limit-requests", "3", "x-ratelimit-remaining-requests", "1", "x-ratelimit-reset-requests", "1m0s",
            "x-ratelimit-limit-tokens", "1000", "x-ratelimit-remaining-tokens", "500", "x-ratelimit-reset-tokens", "1m0s");
        assertEquals(expected, headers(r));
        assertEquals(expected, lines(r));
        assertEquals(Map.of(), lines(null));
        assertEquals(Map.of(), headers(null));
    }

    @Test
    void currentReportsTheWindowsWithoutReservingAndSettlingItDoesNothing() {
        Tenant t = tenant(new Limits(2, 0, 1, 0));
        Reservation held = tenants.reserve(t, ONE_REPLICA, 10, false);
        clock.advance(30, TimeUnit.SECONDS);
        Reservation now = tenants.current(t, ONE_REPLICA);
        assertFalse(now.granted());
        assertNull(now.deniedBy(), "a report, not a decision");
        assertEquals(Map.of("x-ratelimit-limit-requests", "2", "x-ratelimit-remaining-requests", "1",
            "x-ratelimit-reset-requests", "30s"), lines(now));
        tenants.settle(now, 5); // what the connection does at every request's end: nothing for a report
        for (int i = 0; i < 3; i++) {
            assertEquals("1", lines(tenants.current(t, ONE_REPLICA)).get("x-ratelimit-remaining-requests"),
                "reports take nothing from the window");
        }
        assertFalse(tenants.reserve(t, ONE_REPLICA, 1, false).granted(), "max_concurrent 1 is still held by the first");
        tenants.settle(held, 10);
        assertTrue(tenants.reserve(t, ONE_REPLICA, 1, false).granted(), "the report left max_concurrent alone");
        assertNull(tenants.current(tenant(Limits.NONE), ONE_REPLICA), "no limits, no headers");
    }
}
