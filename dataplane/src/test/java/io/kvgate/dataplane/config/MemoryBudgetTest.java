package io.kvgate.dataplane.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.config.MemoryBudget.Kind;
import io.kvgate.dataplane.config.MemoryBudget.Line;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The budget's arithmetic on two configurations, each line worked out by hand from the keys it names. */
class MemoryBudgetTest {
    private static final long KIB = 1024;
    private static final long MIB = 1024 * 1024;

    private static GatewayConfig parse(String yaml) throws Exception {
        return GatewayConfig.parse("listen: 127.0.0.1:18080\nadmin_listen: 127.0.0.1:18081\n" + yaml);
    }

    private static long line(MemoryBudget b, String prefix) {
        for (Line l : b.lines()) {
            if (l.what().startsWith(prefix)) {
                return l.bytes();
            }
        }
        throw new AssertionError("no line '" + prefix + "' in " + b.lines());
    }

    @Test
    void aSmallKvExactGatewayWithTightLimits() throws Exception {
        MemoryBudget b = MemoryBudget.of(parse("""
            limits: {max_connections: 100, max_body_bytes: 1048576, max_header_bytes: 16384, max_initial_line_bytes: 8192}
            ingest: {max_frame_bytes: 1048576, receive_buffer_bytes: 33554432, socket_receive_buffer_bytes: 4096}
            rules:
              - name: kv
                models: [m]
                engine: vllm
                policy: kv_exact
                block_size: 16
                hash_seed: "0"
                hash_algo: sha256_cbor
                kv_capacity_blocks: 1024
                max_prompt_tokens: 4096
                endpoints:
                  - url: http://127.0.0.1:9001
                    kv_events: tcp://127.0.0.1:5557
                    kv_replay: tcp://127.0.0.1:5558
                    dp_ranks: 2
                  - url: http://127.0.0.1:9002
                    kv_events: tcp://127.0.0.1:5567
                    kv_replay: tcp://127.0.0.1:5568
            """), 2);
        // 256 lookup blocks: keys, reader (4 bit sets of one long, stamps, 1024 ids, one cache slot, key);
        // 1024-entry memo (16 + 64 + 64 B); 1024-entry overlay (2048 slots x 40 B); the DP-rank pins (4096 x 20 B).
        long rule = 256 * 8 + (4 * 256 * 8 + 256 * 9 + 1024 * 4 + 40 + 8) + 1024 * 144 + 2048 * 40 + 4096 * 20;
        assertEquals(rule, line(b, "rule kv: kv routing state"));
        // 1024 ids x 8 ranks: writer words and value scratch, generations, counters, rank-set rows (2 endpoints
        // stored), a 16-entry change log (no reader caches over 64 ids); learned-key map 2 x 1024 entries x 16 B.
        long index = 2 * (1024 * 8 * 3 + 1) * 8 + 1024 * 8 * 4 + 1024 * 8 + 1024 * 8 + 2 * 256 * 8 + 16 * 32 + 8;
        assertEquals(index + 2048 * 16, line(b, "block index: on-heap"));
        assertEquals(1024 * 52, line(b, "block index: 1024 blocks"));
        assertEquals(2 * MIB, line(b, "ingest: frame buffers"));
        // Per (endpoint, rank) the larger of: connecting, SUB + replay DEALER each max(4 KiB SO_RCVBUF, 8 KiB) read + 8 KiB
        // write = 32 KiB; bound, 8 peers at 8 + 8 KiB + the DEALER's 16 KiB = 144 KiB. Three subscriptions.
        assertEquals(3 * 144 * KIB, line(b, "ingest: 3 ZeroMQ subscription(s)"));
        assertEquals(3 * 32 * MIB, line(b, "ingest: queued events, 3 SUB socket(s)"));
        // Per connection: unsent answers, the 64 KiB high-water mark + the largest answer (max_body_bytes 1 MiB); the
        // request being read, 8 KiB line + 16 KiB headers + 1 MiB body + one 64 KiB read of pipelined input.
        long perConnection = 64 * KIB + MIB + 8 * KIB + 16 * KIB + MIB + 64 * KIB;
        assertEquals(100 * perConnection, line(b, "client connections"));
        assertEquals(64 * 4 * MIB, line(b, "admin connections"));
        assertEquals(2 * 4 * MIB, line(b, "engine load scrapes"));
        assertEquals(2 * 8 * MIB, line(b, "engine load scrapes, pages"));

        long heap = 32 * MIB + rule + index + 2048 * 16 + 2 * MIB + 3 * 32 * MIB + 2 * 8 * MIB;
        long direct = 16 * MIB + 3 * 144 * KIB + 100 * perConnection + 256 * MIB + 8 * MIB;
        assertEquals(heap, b.total(Kind.HEAP));
        assertEquals(direct, b.total(Kind.DIRECT));
        assertEquals(2 * 1024 * 52, b.total(Kind.NATIVE));
        assertEquals(32 * MIB + rule + index + 2048 * 16 + 2 * MIB, b.upFront(Kind.HEAP));
        // 1.5 x 146.8 MiB = 220.2 MiB -> 256 MiB; 495.3 MiB of direct -> 512 MiB.
        assertEquals(256 * MIB, MemoryBudget.suggestedMaxHeapBytes(heap));
        assertEquals(512 * MIB, MemoryBudget.suggestedMaxDirectBytes(direct));
        assertTrue(b.report().contains("  suggested JVM options: -Xmx256m -XX:MaxDirectMemorySize=512m"), String.join("\n", b.report()));
    }

    @Test
    void aPlainGatewayWithDefaultLimitsHasNoIndexLinesAndWarnsOnASmallHost() throws Exception {
        MemoryBudget b = MemoryBudget.of(parse("""
            rules:
              - name: rr
                models: [m]
                engine: vllm
                policy: round_robin
                endpoints:
                  - url: http://127.0.0.1:9001
                  - url: http://127.0.0.1:9002
                  - url: http://127.0.0.1:9003
            """), 4);
        for (Line l : b.lines()) {
            assertFalse(l.what().contains("block index") || l.what().contains("ingest") || l.what().startsWith("rule"), l.toString());
        }
        // Defaults: 100000 connections x (64 KiB high-water mark + an 8 MiB answer + 8 KiB line + 16 KiB headers
        // + an 8 MiB body + one 64 KiB read).
        long clients = 100_000L * (16 * MIB + 152 * KIB);
        assertEquals(clients, line(b, "client connections"));
        assertEquals(32 * MIB + 3 * 8 * MIB, b.total(Kind.HEAP));
        assertEquals(16 * MIB + clients + 64 * 4 * MIB + 3 * 4 * MIB, b.total(Kind.DIRECT));
        assertEquals(0, b.total(Kind.NATIVE));
        List<String> report = b.report(64L << 30);
        assertTrue(report.getLast().startsWith("  warning: the worst case (") && report.getLast().contains("client connections"),
            String.join("\n", report));
        assertFalse(b.report(0).getLast().contains("warning"));
        // 1577.3 GiB of direct memory is said in whole gigabytes: the JVM takes -XX:MaxDirectMemorySize=1578g.
        assertEquals("1578g", MemoryBudget.jvmSize(MemoryBudget.suggestedMaxDirectBytes(b.total(Kind.DIRECT))));
    }
}
