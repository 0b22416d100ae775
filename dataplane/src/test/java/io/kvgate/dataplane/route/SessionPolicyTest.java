package io.kvgate.dataplane.route;

import static io.kvgate.dataplane.route.RouteFixtures.config;
import static io.kvgate.dataplane.route.RouteFixtures.decide;
import static io.kvgate.dataplane.route.RouteFixtures.endpoints;
import static io.kvgate.dataplane.route.RouteFixtures.table;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.dataplane.route.RuleStats.MissReason;
import io.kvgate.dataplane.route.RuleStats.Tier;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The session pin table ({@code session.mode: table}): pin, renew, TTL, LRU bound, re-pin when the pinned endpoint goes away; fixed-size keys (M6). */
class SessionPolicyTest {
    private final ManualClock clock = new ManualClock();

    private Rule rule(int maxEntries) {
        return table(config("", RouteFixtures.rule("chat", "    policy: session\n    fallback: round_robin\n"
            + "    session: {mode: table, ttl_ms: 1000, max_entries: " + maxEntries + "}\n", endpoints(3))), null, clock).ruleByName("chat");
    }

    private static RouteEvent withKey(Rule r, String key) {
        return RouteEvent.of(r, Role.ANY, null, null, SessionKeys.hash(key), false, false);
    }

    private EndpointState route(Rule r, String key) {
        return decide(r, withKey(r, key), clock.nanoTime());
    }

    @Test
    void aConversationStaysOnItsEndpointWhileUsedAndTheTtlIsRenewedByUse() {
        Rule r = rule(100);
        EndpointState first = route(r, "alice");
        EndpointState other = route(r, "bob");
        assertNotEquals(first, other, "round robin places the second conversation elsewhere");
        for (int i = 0; i < 5; i++) {
            clock.advance(900, TimeUnit.MILLISECONDS); // under the TTL each time, 4.5 s in total
            assertSame(first, route(r, "alice"));
        }
        assertEquals(2, r.stats().tierCount(Tier.SESSION_NEW), "alice and bob were pinned once each");
        assertEquals(5, r.stats().tierCount(Tier.SESSION_PINNED));
    }

    @Test
    void anExpiredPinIsReplacedByTheFallbacksChoice() {
        Rule r = rule(100);
        route(r, "alice");
        clock.advance(1000, TimeUnit.MILLISECONDS);
        route(r, "alice");
        assertEquals(1, r.stats().tierCount(Tier.SESSION_REPINNED));
    }

    @Test
    void anUnavailablePinnedEndpointIsAbandonedAndTheConversationRepinned() {
        Rule r = rule(100);
        EndpointState pinned = route(r, "alice");
        pinned.reportProbe(false);
        pinned.breaker().applyProbeReport();
        EndpointState moved = route(r, "alice");
        assertNotEquals(pinned, moved);
        pinned.reportProbe(true);
        pinned.breaker().applyProbeReport();
        assertSame(moved, route(r, "alice"), "the new pin holds after the old endpoint recovers");
    }

    @Test
    void theTableKeepsTheMostRecentlyUsedConversations() {
        Rule r = rule(2);
        EndpointState a = route(r, "a");
        route(r, "b");
        route(r, "a");
        route(r, "c"); // evicts b, the least recently used
        SessionPolicy p = (SessionPolicy) r.policy();
        assertEquals(2, p.size());
        assertSame(a, route(r, "a"));
        long repinnedBefore = r.stats().tierCount(Tier.SESSION_NEW);
        route(r, "b");
        assertEquals(repinnedBefore + 1, r.stats().tierCount(Tier.SESSION_NEW), "b was forgotten: a new pin");
    }

    @Test
    void noSessionKeyFallsBackAndIsCounted() {
        Rule r = rule(100);
        RouteEvent e = RouteEvent.of(r, Role.ANY, null, null, SessionKeys.NONE, true, false);
        StringBuilder why = new StringBuilder();
        EndpointState ep = r.policy().choose(r.candidates(Role.ANY), e, clock.nanoTime(), why);
        assertTrue(ep != null);
        assertEquals(1, r.stats().missCount(MissReason.NO_SESSION_KEY));
        assertEquals("tier=fallback(no session key)", why.toString());
    }

    @Test
    void aDryRunPinsNothing() {
        Rule r = rule(100);
        RouteEvent dry = RouteEvent.of(r, Role.ANY, null, null, SessionKeys.hash("alice"), false, true);
        decide(r, dry, clock.nanoTime());
        assertEquals(0, ((SessionPolicy) r.policy()).size());
    }

    /**
     * Regression for reliability review M6: unique multi-megabyte {@code user} values used to become pin-table keys
     * as they were. Keys are now 64-bit hashes computed on the I/O thread: the policy never sees the text, the table
     * stays at its entry bound, and equal texts still meet the same pin.
     */
    @Test
    void hugeUniqueSessionKeysCostAFixedSizeEntryEach() {
        Rule r = rule(50);
        String big = "x".repeat(1 << 18); // 256 KiB each, 75 MiB of keys in all
        EndpointState first = route(r, big + 0);
        for (int i = 1; i < 300; i++) {
            route(r, big + i);
        }
        assertEquals(50, ((SessionPolicy) r.policy()).size());
        assertEquals(300, r.stats().tierCount(Tier.SESSION_NEW));
        EndpointState again = route(r, big + 299);
        assertEquals(1, r.stats().tierCount(Tier.SESSION_PINNED), "the same megabyte key finds its pin through its hash");
        assertTrue(again != null && first != null);
        assertEquals(SessionKeys.hash(big + 7), SessionKeys.hash(new StringBuilder(big).append(7)), "hash depends on the text only");
        assertNotEquals(SessionKeys.hash(big + 7), SessionKeys.hash(big + 8));
        assertNotEquals(SessionKeys.NONE, SessionKeys.hash(""));
    }
}
