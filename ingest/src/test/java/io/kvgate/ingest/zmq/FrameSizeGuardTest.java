package io.kvgate.ingest.zmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;
import zmq.Msg;

/** Review B-1: the sizes JeroMQ 0.6.0's decoder passes on unchecked are refused without a buffer or an exception. */
class FrameSizeGuardTest {
    private final AtomicInteger refusals = new AtomicInteger();
    private final FrameSizeGuard guard = new FrameSizeGuard(4096, refusals::incrementAndGet);

    @Test
    void negativeAndOversizedSizesBecomeAnEmptyCommandThatNoSocketDelivers() {
        // (int) 0x80000000F1C7A00F, the review's frame; (int) 0x800000007FFFFFFF, a truncation past the bound.
        for (int size : new int[] {(int) 0x80000000F1C7A00FL, -1, Integer.MIN_VALUE, (int) 0x800000007FFFFFFFL, 4097}) {
            Msg m = guard.allocate(size);
            assertEquals(0, m.size(), "nothing reserved for " + size);
            assertTrue(m.isCommand(), "a command: dropped in a handshake, discarded by the session after it");
            assertEquals(size, guard.lastRefusedSize());
        }
        assertEquals(5, guard.refused());
        assertEquals(5, refusals.get());
    }

    @Test
    void sizesWithinTheBoundAreHeapFrames() {
        for (int size : new int[] {0, 1, 4096}) {
            Msg m = guard.allocate(size);
            assertEquals(size, m.size());
            assertFalse(m.isCommand());
            assertFalse(m.buf().isDirect(), "frames stay off direct memory");
        }
        assertEquals(0, guard.refused());
        assertEquals(0, refusals.get());
    }
}
