package io.kvgate.tools.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.BlockIndexConfig;
import io.kvgate.ingest.zmq.KeyMode;
import io.kvgate.ingest.zmq.KvEventIngest;
import io.kvgate.ingest.zmq.KvEventSource;
import io.kvgate.ingest.zmq.SubscriberStatus;
import io.kvgate.testkit.TestPorts;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code --kv-flood} over real ZeroMQ on loopback into the gateway's ingest: the simulator binds its PUB, the
 * ingest thread subscribes, and the flood's events arrive decodable (no decode error), as store/remove pairs of
 * whole prompts (stores and removals balance up to the prompt in flight), at the flood's pace.
 */
@Tag("system")
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class KvFloodSystemTest {

    @Test
    void floodReachesTheRealIngestAsBalancedPromptsWithoutDecodeErrors() throws Exception {
        int port = TestPorts.free();
        SimulatorConfig c = new SimulatorConfig().dialect(Dialect.VLLM).port(0).kvEvents("tcp://127.0.0.1:" + port)
            .kvEventsMode("bind").kvFlood(100_000, 32, 0);
        try (BlockIndex index = new BlockIndex(BlockIndexConfig.of(1 << 16, 4));
             KvEventIngest ingest = new KvEventIngest(index, NanoClock.SYSTEM)) {
            ingest.start();
            ingest.addEndpoint(new KvEventSource(2, "tcp://127.0.0.1:" + port, 1, null, false, "kv", KeyMode.ENGINE));
            try (EngineSimulator sim = EngineSimulator.start(c)) {
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                while (blockOps(ingest) < 20_000) {
                    if (System.nanoTime() > deadline) {
                        fail("flood did not reach the ingest within 60 s: " + ingest.status());
                    }
                    Thread.sleep(20);
                }
                assertTrue(sim.stats.get("flood_batches") > 0);
            }
            SubscriberStatus st = ingest.status().get(0);
            assertEquals(0, st.decodeErrors(), st.toString());
            assertTrue(st.events() > 0 && st.batches() > 0, st.toString());
            // Every prompt is stored, then removed whole (a batch lost before the subscription was up aside):
            // stores and removals balance, and the index holds at most the prompt in flight.
            long stored = index.storedOps();
            long removed = index.removedOps();
            assertTrue(Math.abs(stored - removed) <= 2L * KvFlood.PROMPT_BLOCKS,
                "stored " + stored + " removed " + removed);
            assertTrue(index.blocks(2) <= 2L * KvFlood.PROMPT_BLOCKS, "blocks held " + index.blocks(2));
        }
    }

    private static long blockOps(KvEventIngest ingest) {
        long n = 0;
        for (SubscriberStatus s : ingest.status()) {
            n += s.blockOps();
        }
        return n;
    }
}
