package io.kvgate.ingest.zmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Stored events whose block size is not the rule's: counted per endpoint, warned about once, judged afresh on change. */
class EventBlockSizesTest {
    @Test
    void mismatchesAreCountedAndWarnedOncePerEndpoint() {
        List<String> warnings = new ArrayList<>();
        EventBlockSizes s = new EventBlockSizes(warnings::add);
        s.expect(3, 16, "127.0.0.1:8000 (rule kv)");
        s.observe(3, 16);
        assertEquals(16, s.lastEventBlockSize(3));
        assertEquals(0, s.mismatches(3));
        assertFalse(s.mismatched(3));

        // vLLM with DCP 2 (or a backend-picked size) keys at 32 while the rule says 16.
        s.observe(3, 32);
        s.observe(3, 32);
        assertEquals(2, s.mismatches(3));
        assertTrue(s.mismatched(3));
        assertEquals(1, warnings.size(), warnings.toString());
        assertTrue(warnings.get(0).startsWith("endpoint 127.0.0.1:8000 (rule kv): the engine's KV events carry block_size 32"
            + " but its rule keys requests at block_size 16"), warnings.get(0));
        assertTrue(warnings.get(0).endsWith("set the rule's block_size to 32"), warnings.get(0));

        // Another endpoint is judged on its own; an endpoint with no expectation is never a mismatch.
        s.observe(4, 32);
        assertEquals(0, s.mismatches(4));
        assertFalse(s.mismatched(4));

        // The rule is fixed (a reload): counting starts afresh and the endpoint matches.
        s.expect(3, 32, "127.0.0.1:8000 (rule kv)");
        assertEquals(0, s.mismatches(3));
        s.observe(3, 32);
        assertFalse(s.mismatched(3));
        assertEquals(1, warnings.size());
        // Out-of-range ids and empty events are ignored, never thrown on.
        s.observe(-1, 16);
        s.observe(3, 0);
        assertEquals(32, s.lastEventBlockSize(3));
    }

    /** SGLang with EAGLE publishes token-pair cells (bigram radix keys): counted per endpoint, warned about once. */
    @Test
    void bigramCellsAreCountedAndWarnedOnce() {
        List<String> warnings = new ArrayList<>();
        EventBlockSizes s = new EventBlockSizes(warnings::add);
        s.expect(2, 1, "127.0.0.1:30000 (rule sg)");
        s.observeCells(2, 1);
        assertEquals(0, s.bigramEvents(2));
        s.observeCells(2, 2);
        s.observeCells(2, 2);
        assertEquals(2, s.bigramEvents(2));
        assertEquals(1, warnings.size(), warnings.toString());
        assertTrue(warnings.get(0).startsWith("endpoint 127.0.0.1:30000 (rule sg): the engine's KV events key pages by token"
            + " pairs"), warnings.get(0));
        assertEquals(0, s.bigramEvents(3));
    }
}
