package io.kvgate.dataplane.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import io.kvgate.control.config.EndpointConfig;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** The pin table against a LinkedHashMap in access order (the obvious implementation it replaces). */
class SessionPinsTest {
    private static final EndpointState[] EPS = new EndpointState[4];

    static {
        for (int i = 0; i < EPS.length; i++) {
            EPS[i] = new EndpointState("127.0.0.1:" + (20000 + i), i,
                new EndpointConfig("http://127.0.0.1:" + (20000 + i), "127.0.0.1", 20000 + i, 1, null, false, null, 1, null, null, 0));
        }
    }

    @Test
    void matchesAnAccessOrderedMapUnderRandomPinsGrowthAndEviction() {
        for (int capacity : new int[] {1, 2, 7, 100, 5000}) {
            SessionPins pins = new SessionPins(capacity);
            Map<Long, EndpointState> model = new LinkedHashMap<>(16, 0.75f, true) {
                @Override
                protected boolean removeEldestEntry(Map.Entry<Long, EndpointState> eldest) {
                    return size() > capacity;
                }
            };
            SplittableRandom rnd = new SplittableRandom(capacity);
            // A small key space forces collisions in the index and many updates; keys with equal low bits test probing.
            long keySpace = capacity * 3L + 5;
            for (int op = 0; op < 40_000; op++) {
                long key = (rnd.nextLong(keySpace) << 20) | 1;
                if (rnd.nextInt(3) == 0) {
                    assertSame(model.get(key), pins.endpoint(key), "lookup of " + key + " at op " + op + " (capacity " + capacity + ")");
                    if (model.containsKey(key)) {
                        pins.pin(key, model.get(key), op); // a lookup that is used renews the pin, as the policy does
                    }
                } else {
                    EndpointState ep = EPS[rnd.nextInt(EPS.length)];
                    model.put(key, ep);
                    pins.pin(key, ep, op);
                }
                assertEquals(model.size(), pins.size());
            }
            for (Map.Entry<Long, EndpointState> e : model.entrySet()) {
                assertSame(e.getValue(), pins.endpoint(e.getKey()));
            }
        }
    }

    @Test
    void leastRecentlyUsedGoesFirst() {
        SessionPins pins = new SessionPins(2);
        pins.pin(11, EPS[0], 100);
        pins.pin(22, EPS[1], 100);
        pins.pin(11, EPS[0], 200); // 11 used again: 22 is now the oldest
        pins.pin(33, EPS[2], 300);
        assertNull(pins.endpoint(22));
        assertSame(EPS[0], pins.endpoint(11));
        assertSame(EPS[2], pins.endpoint(33));
        assertEquals(200, pins.expiresNs(11));
    }

    @Test
    void copyKeepsPinsAndTheirOrder() {
        SessionPins old = new SessionPins(3);
        old.pin(1, EPS[0], 10);
        old.pin(2, EPS[1], 20);
        old.pin(3, EPS[2], 30);
        SessionPins next = new SessionPins(2); // a reload that lowered max_entries keeps the newest
        next.copyFrom(old);
        assertNull(next.endpoint(1));
        assertSame(EPS[1], next.endpoint(2));
        assertSame(EPS[2], next.endpoint(3));
        assertEquals(30, next.expiresNs(3));
    }
}
