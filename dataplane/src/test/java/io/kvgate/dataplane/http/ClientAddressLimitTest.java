package io.kvgate.dataplane.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.GatewayConfig;
import java.net.InetAddress;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** The per-address connection counts, and the per-connection budget {@code serve --check} multiplies. */
class ClientAddressLimitTest {
    private static final InetAddress A = InetAddress.getLoopbackAddress();
    private static final InetAddress B;

    static {
        try {
            B = InetAddress.getByAddress(new byte[] {127, 0, 0, 2});
        } catch (java.net.UnknownHostException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    @Test
    void eachAddressHoldsAtMostItsLimitAndItsSlotsComeBackOnClose() {
        AtomicInteger max = new AtomicInteger(2);
        ClientAddressLimit limit = new ClientAddressLimit(max::get);
        assertTrue(limit.tryAcquire(A));
        assertTrue(limit.tryAcquire(A));
        assertFalse(limit.tryAcquire(A), "a third connection of the same address");
        assertEquals(2, limit.open(A), "a refused connection takes nothing");
        assertTrue(limit.tryAcquire(B), "another address has its own share");
        limit.release(A);
        assertTrue(limit.tryAcquire(A));
        limit.release(A);
        limit.release(A);
        limit.release(B);
        assertEquals(0, limit.addresses(), "an address's entry goes with its last connection");
    }

    @Test
    void zeroIsNoLimitAndAReloadFindsTrueCounts() {
        AtomicInteger max = new AtomicInteger(0);
        ClientAddressLimit limit = new ClientAddressLimit(max::get);
        for (int i = 0; i < 5; i++) {
            assertTrue(limit.tryAcquire(A));
        }
        max.set(3); // turned on with 5 open: none is cut, new ones wait until fewer than 3 are open
        assertFalse(limit.tryAcquire(A));
        limit.release(A);
        limit.release(A);
        assertFalse(limit.tryAcquire(A), "3 still open");
        limit.release(A);
        assertTrue(limit.tryAcquire(A));
    }

    @Test
    void thePerConnectionBudgetIsTheHighWaterMarkPlusTheLargestAnswerPlusTheRequestBeingRead() throws Exception {
        GatewayConfig c = GatewayConfig.parse("""
            listen: 127.0.0.1:0
            limits: {max_body_bytes: 1048576, max_header_bytes: 16384, max_initial_line_bytes: 8192,
                     max_buffered_response_bytes: 131072}
            upstream: {max_error_body_bytes: 65536}
            rules:
              - name: r
                models: [m]
                endpoints:
                  - url: http://127.0.0.1:1
            """);
        assertEquals(131_072 + 1_048_576, FrontDoorBudget.responseBytes(c));
        assertEquals(8_192 + 16_384 + 1_048_576 + 65_536, FrontDoorBudget.requestBytes(c));
        assertEquals(FrontDoorBudget.responseBytes(c) + FrontDoorBudget.requestBytes(c), FrontDoorBudget.perConnectionBytes(c));
    }
}
