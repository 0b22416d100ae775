package io.kvgate.dataplane.config;

import io.kvgate.control.config.EndpointConfig;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.http.FrontDoorBudget;
import io.kvgate.dataplane.route.RulePolicies;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.BlockIndexConfig;
import io.kvgate.index.block.BlockIndexReader;
import io.kvgate.index.block.LearnedKeyMap;
import io.kvgate.ingest.zmq.IngestConfig;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * What a configuration may cost in memory (issue #43 item 2): per rule, per subscription and per connection, times
 * the counts the configuration sets, on the Java heap ({@code -Xmx}), in direct buffers
 * ({@code -XX:MaxDirectMemorySize}) and in native memory neither flag bounds (the block index's Chronicle Map).
 * {@code serve --check} prints it ({@link #report()}), so an operator can size the JVM before starting it.
 *
 * <p>Every formula is one static method here, each the single place its line is computed. Where the structure's
 * own module states its size ({@code heapBytesFor} on the index's classes, {@link RulePolicies#kvRoutingHeapBytes})
 * the method calls it, so the report and the allocation cannot drift apart: the front door states what one client
 * connection can hold ({@link FrontDoorBudget#perConnectionBytes}), the ingest what one subscription holds in direct
 * memory ({@link IngestConfig#directBytesPerSubscription}). {@link #tokenizerHeapBytes} is a measured ratio, not
 * arithmetic on arrays.
 *
 * <p>Immutable; built from a configuration that passed {@link ConfigCheck}.
 */
public final class MemoryBudget {
    private static final long KIB = 1L << 10;
    private static final long MIB = 1L << 20;

    /**
     * Heap of the gateway with nothing configured to size: JVM, Netty, classes' static state, the routing ring.
     * Measured live after a full GC on an idle gateway with one round-robin rule: 13.4 MB (this build), 17-25 MB in
     * the 2026-12-07 review; 32 MiB covers both.
     */
    public static final long BASELINE_HEAP_BYTES = 32 * MIB;
    /**
     * Direct memory of the same idle gateway (Netty's transport buffers): 1.9 MiB measured with native memory
     * tracking ({@code Other}); rounded up for the allocator's chunks once traffic flows (per-request bytes are the
     * connection lines).
     */
    public static final long BASELINE_DIRECT_BYTES = 16 * MIB;
    /**
     * Heap per byte of a tokenizer's tokenizer.json (uncompressed), measured as live heap after a full GC with a
     * round-robin rule naming the directory minus without: Qwen3 16.4 MB for 11.4 MB of JSON (1.44), Llama 3.1
     * 23.1 MB for 9.1 MB (2.54). The larger ratio, rounded up: an estimate, the vocabulary's shape decides.
     */
    public static final double TOKENIZER_HEAP_PER_JSON_BYTE = 2.6;
    /**
     * Chronicle Map native bytes per configured entry at creation ({@link BlockIndex#sizeBytes()}): 50.3 at 1024
     * entries, 39.3 at 10^6, 37.4 at 10^7; rounded up.
     */
    public static final double INDEX_NATIVE_BYTES_PER_BLOCK = 52.0;
    /** The map may add segment tiers up to this factor of its creation size ({@code maxBloatFactor}). */
    public static final double INDEX_MAX_BLOAT = 2.0;
    /** Live heap is kept under two thirds of -Xmx: collections stay rare and short. */
    public static final double HEAP_HEADROOM = 1.5;

    /** Where a line's bytes live. */
    public enum Kind { HEAP, DIRECT, NATIVE }

    /**
     * One line of the budget.
     *
     * @param upFront allocated at start-up (or rule build) whatever the traffic; otherwise a bound reached under load
     */
    public record Line(String what, Kind kind, long bytes, boolean upFront, String formula) {}

    private final List<Line> lines;

    private MemoryBudget(List<Line> lines) {
        this.lines = List.copyOf(lines);
    }

    public List<Line> lines() {
        return lines;
    }

    /** The budget of {@code cfg}; {@code ioThreads} is the I/O thread count it resolves to on this host. */
    public static MemoryBudget of(GatewayConfig cfg, int ioThreads) {
        List<Line> out = new ArrayList<>();
        out.add(new Line("baseline (JVM, Netty, classes, routing ring)", Kind.HEAP, BASELINE_HEAP_BYTES, true,
            "measured on an idle round-robin gateway, rounded up"));
        out.add(new Line("baseline (Netty transport buffers)", Kind.DIRECT, BASELINE_DIRECT_BYTES, true,
            "measured idle: 1.9 MiB, rounded up for the allocator's chunks"));
        boolean index = cfg.needsKvIndex();
        BlockIndexConfig indexCfg = KvIndexSizing.indexConfig(Math.max(16, cfg.kvIndexCapacityBlocks()));
        for (RuleConfig r : cfg.rules()) {
            if (index && RulePolicies.looksUpIndex(r)) {
                out.add(new Line("rule " + r.name() + ": kv routing state", Kind.HEAP, ruleRoutingHeapBytes(r, indexCfg), true,
                    "lookup " + indexCfg.lookupDepthBlocks(r.maxPromptTokens(), r.blockSize()) + " blocks (max_prompt_tokens "
                        + r.maxPromptTokens() + " / block_size " + r.blockSize() + ") x " + r.endpoints().size()
                        + " endpoint(s), hash memo and speculative overlay for kv_capacity_blocks " + r.kvCapacityBlocks()));
            }
        }
        for (Map.Entry<String, List<String>> t : tokenizers(cfg).entrySet()) {
            long json = tokenizerJsonBytes(Path.of(t.getKey()));
            out.add(new Line("tokenizer " + t.getKey() + " (rules " + String.join(", ", t.getValue()) + ")", Kind.HEAP,
                tokenizerHeapBytes(json), true, "estimate: " + TOKENIZER_HEAP_PER_JSON_BYTE + " x tokenizer.json "
                    + bytes(json) + " (measured ratio; one copy per directory)"));
        }
        if (index) {
            int endpoints = eventEndpoints(cfg).size();
            out.add(new Line("block index: " + indexCfg.capacityBlocks() + " blocks in a Chronicle Map", Kind.NATIVE,
                indexNativeBytes(indexCfg), true, "kv_capacity_blocks (largest rule) x " + INDEX_NATIVE_BYTES_PER_BLOCK
                    + " B; off heap in native memory: counts in RSS, bounded by neither -Xmx nor MaxDirectMemorySize"));
            out.add(new Line("block index: extra segment tiers under hash skew", Kind.NATIVE,
                indexNativeBloatBytes(indexCfg), false, "up to x" + INDEX_MAX_BLOAT + " of the creation size"));
            out.add(new Line("block index: on-heap counters and learned-key map", Kind.HEAP, indexHeapBytes(indexCfg, endpoints)
                + learnedKeyMapHeapBytes(cfg), true, KvIndexSizing.MAX_ENDPOINTS + " endpoint ids, " + endpoints
                + " endpoint(s) with kv_events, learned-key map "
                + LearnedKeyMap.entriesFor(indexCfg.capacityBlocks(), KvIndexSizing.ingestConfig(indexCfg.capacityBlocks(),
                    cfg.ingest()).learnedKeyCapacity()) + " entries"));
            out.add(new Line("ingest: frame buffers", Kind.HEAP, ingestFrameBufferHeapBytes(cfg.ingest()), true,
                "2 x ingest.max_frame_bytes " + bytes(cfg.ingest().maxFrameBytes())));
            int sockets = eventSockets(cfg);
            if (sockets > 0) {
                IngestConfig ingest = KvIndexSizing.ingestConfig(indexCfg.capacityBlocks(), cfg.ingest());
                out.add(new Line("ingest: " + sockets + " ZeroMQ subscription(s)", Kind.DIRECT,
                    sockets * directBytesPerSubscription(ingest), true, "endpoints x dp_ranks x the larger of a connecting "
                        + "SUB + replay DEALER at ingest.socket_receive_buffer_bytes " + bytes(cfg.ingest().socketReceiveBufferBytes())
                        + " and a bound SUB's ingest.max_peers_per_bind_socket " + cfg.ingest().maxPeersPerBindSocket()
                        + " peers at JeroMQ's minimum buffers"));
                out.add(new Line("ingest: queued events, " + sockets + " SUB socket(s)", Kind.HEAP,
                    sockets * ingestQueueHeapBytesPerSocket(cfg.ingest()), false,
                    "ingest.receive_buffer_bytes " + bytes(cfg.ingest().receiveBufferBytes()) + " per socket (a full queue)"));
            }
            long pdReaders = pdReaderHeapBytes(cfg, indexCfg, ioThreads);
            if (pdReaders > 0) {
                out.add(new Line("pd: decode-side index readers", Kind.HEAP, pdReaders, false,
                    ioThreads + " I/O thread(s) x one reader of " + indexCfg.maxPromptBlocks() + " blocks"));
            }
        }
        GatewayConfig.Limits l = cfg.limits();
        out.add(new Line("client connections", Kind.DIRECT, (long) l.maxConnections() * clientConnectionBytes(cfg), false,
            "limits.max_connections " + l.maxConnections() + " x (the request being read: max_initial_line_bytes "
                + bytes(l.maxInitialLineBytes()) + " + max_header_bytes " + bytes(l.maxHeaderBytes()) + " + max_body_bytes "
                + bytes(l.maxBodyBytes()) + " + one 64 KiB read; unsent answers: max_buffered_response_bytes "
                + bytes(l.maxBufferedResponseBytes()) + " + the largest answer)"));
        GatewayConfig.AdminLimits a = cfg.adminLimits();
        out.add(new Line("admin connections", Kind.DIRECT, (long) a.maxConnections() * a.maxBodyBytes(), false,
            "admin_limits.max_connections " + a.maxConnections() + " x max_body_bytes " + bytes(a.maxBodyBytes())));
        int scraped = cfg.load().enabled() ? endpointKeys(cfg).size() : 0;
        if (scraped > 0) {
            out.add(new Line("engine load scrapes", Kind.DIRECT, scraped * loadScrapeDirectBytes(cfg.load()), false,
                scraped + " endpoint(s) x load.max_body_bytes " + bytes(cfg.load().maxBodyBytes())));
            out.add(new Line("engine load scrapes, pages as text", Kind.HEAP, scraped * loadScrapeHeapBytes(cfg.load()), false,
                scraped + " endpoint(s) x 2 x load.max_body_bytes (the page decoded while it is parsed)"));
        }
        return new MemoryBudget(out);
    }

    // ---------------------------------------------------------------- formulas, one per line

    /** A kv_exact (or P/D kv_exact prefill) rule's lookup keys, reader, hash memo and overlay. */
    public static long ruleRoutingHeapBytes(RuleConfig rule, BlockIndexConfig index) {
        return RulePolicies.kvRoutingHeapBytes(rule, index);
    }

    /** The block index's own arrays (holder generations, counters, writer scratch, change log). */
    public static long indexHeapBytes(BlockIndexConfig index, int endpointsWithEvents) {
        return BlockIndex.heapBytesFor(index, endpointsWithEvents);
    }

    /** The ingest's engine-key to own-key map, sized by the index capacity. */
    public static long learnedKeyMapHeapBytes(GatewayConfig cfg) {
        long capacity = cfg.kvIndexCapacityBlocks();
        return LearnedKeyMap.heapBytesFor(KvIndexSizing.ingestConfig(capacity, cfg.ingest()).learnedKeyCapacity());
    }

    /** The Chronicle Map of the block index: native memory, allocated in full at start. */
    public static long indexNativeBytes(BlockIndexConfig index) {
        return (long) Math.ceil(index.capacityBlocks() * INDEX_NATIVE_BYTES_PER_BLOCK);
    }

    /** What the Chronicle Map may add to {@link #indexNativeBytes} when segments overflow into extra tiers. */
    public static long indexNativeBloatBytes(BlockIndexConfig index) {
        return (long) Math.ceil(indexNativeBytes(index) * (INDEX_MAX_BLOAT - 1));
    }

    /** The ingest thread's two frame buffers, each the largest frame allowed. */
    public static long ingestFrameBufferHeapBytes(GatewayConfig.Ingest ingest) {
        return 2L * ingest.maxFrameBytes();
    }

    /** A SUB socket's queue when full: the high-water mark in frames times the largest frame, at most. */
    public static long ingestQueueHeapBytesPerSocket(GatewayConfig.Ingest ingest) {
        return ingest.receiveBufferBytes();
    }

    /** One (endpoint, DP rank) ZeroMQ subscription's direct memory, as the ingest states it. */
    public static long directBytesPerSubscription(IngestConfig ingest) {
        return ingest.directBytesPerSubscription();
    }

    /** What one client connection may buffer, as the front door states it. */
    public static long clientConnectionBytes(GatewayConfig cfg) {
        return FrontDoorBudget.perConnectionBytes(cfg);
    }

    /** One engine's metrics page while it is read (aggregated in Netty's buffers). */
    public static long loadScrapeDirectBytes(GatewayConfig.Load load) {
        return load.maxBodyBytes();
    }

    /** One engine's metrics page while it is parsed: the page as a string plus its decoding buffer. */
    public static long loadScrapeHeapBytes(GatewayConfig.Load load) {
        return 2L * load.maxBodyBytes();
    }

    /** A tokenizer directory loaded once for every rule naming it. */
    public static long tokenizerHeapBytes(long tokenizerJsonBytes) {
        return (long) Math.ceil(tokenizerJsonBytes * TOKENIZER_HEAP_PER_JSON_BYTE);
    }

    /** P/D rules whose decode endpoints publish events: one single-candidate reader per I/O thread. */
    public static long pdReaderHeapBytes(GatewayConfig cfg, BlockIndexConfig index, int ioThreads) {
        for (RuleConfig r : cfg.rules()) {
            if (r.policyKind() == RuleConfig.Policy.PD) {
                for (EndpointConfig e : r.endpoints()) {
                    if (!"prefill".equals(e.role()) && e.kvEvents() != null) {
                        return ioThreads * BlockIndexReader.heapBytesFor(index, 1, index.maxPromptBlocks());
                    }
                }
            }
        }
        return 0;
    }

    /** Suggested {@code -Xmx}: the heap total with {@link #HEAP_HEADROOM}, rounded up to 64 MiB. */
    public static long suggestedMaxHeapBytes(long heapBytes) {
        return roundUp((long) Math.ceil(heapBytes * HEAP_HEADROOM), 64 * MIB);
    }

    /** Suggested {@code -XX:MaxDirectMemorySize}: the direct total, rounded up to 64 MiB. */
    public static long suggestedMaxDirectBytes(long directBytes) {
        return roundUp(directBytes, 64 * MIB);
    }

    // ---------------------------------------------------------------- counts from the configuration

    /** Endpoints (by key: shared by rules, subscribed once) that publish KV events over ZeroMQ or HTTP. */
    static Map<String, EndpointConfig> eventEndpoints(GatewayConfig cfg) {
        Map<String, EndpointConfig> eps = new LinkedHashMap<>();
        for (RuleConfig r : cfg.rules()) {
            for (EndpointConfig e : r.endpoints()) {
                if (e.kvEvents() != null) {
                    eps.putIfAbsent(e.key(), e);
                }
            }
        }
        return eps;
    }

    /** SUB sockets: one per DP rank of every ZeroMQ event endpoint. */
    static int eventSockets(GatewayConfig cfg) {
        int n = 0;
        for (EndpointConfig e : eventEndpoints(cfg).values()) {
            if (!e.kvEventsOverHttp()) {
                n += e.dpRanks();
            }
        }
        return n;
    }


    private static Set<String> endpointKeys(GatewayConfig cfg) {
        Set<String> keys = new LinkedHashSet<>();
        for (RuleConfig r : cfg.rules()) {
            for (EndpointConfig e : r.endpoints()) {
                keys.add(e.key());
            }
        }
        return keys;
    }

    private static Map<String, List<String>> tokenizers(GatewayConfig cfg) {
        Map<String, List<String>> dirs = new LinkedHashMap<>();
        for (RuleConfig r : cfg.rules()) {
            if (r.tokenizer() != null) {
                dirs.computeIfAbsent(r.tokenizer(), d -> new ArrayList<>()).add(r.name());
            }
        }
        return dirs;
    }

    /**
     * Size of the directory's tokenizer.json, uncompressed: a {@code .gz} file's trailer states it (ISIZE, the
     * length mod 2^32, exact below 4 GiB), so nothing is inflated. 0 when neither file is there.
     */
    static long tokenizerJsonBytes(Path dir) {
        try {
            Path json = dir.resolve("tokenizer.json");
            if (Files.isRegularFile(json)) {
                return Files.size(json);
            }
            Path gz = dir.resolve("tokenizer.json.gz");
            if (Files.isRegularFile(gz)) {
                try (RandomAccessFile f = new RandomAccessFile(gz.toFile(), "r")) {
                    f.seek(f.length() - 4);
                    return Integer.toUnsignedLong(Integer.reverseBytes(f.readInt()));
                }
            }
        } catch (IOException e) {
            return 0;
        }
        return 0;
    }

    // ---------------------------------------------------------------- totals and the report

    public long total(Kind kind) {
        long sum = 0;
        for (Line l : lines) {
            if (l.kind() == kind) {
                sum += l.bytes();
            }
        }
        return sum;
    }

    /** Bytes of {@code kind} allocated at start-up whatever the traffic. */
    public long upFront(Kind kind) {
        long sum = 0;
        for (Line l : lines) {
            if (l.kind() == kind && l.upFront()) {
                sum += l.bytes();
            }
        }
        return sum;
    }

    /** The lines {@code serve --check} prints. */
    public List<String> report() {
        List<String> out = new ArrayList<>();
        out.add("memory budget (worst case the configuration allows; see docs/operations.md, \"Sizing the JVM from --check\"):");
        for (Line l : lines) {
            out.add(String.format(Locale.ROOT, "  %-6s %10s %s  %s: %s", l.kind().name().toLowerCase(Locale.ROOT),
                bytes(l.bytes()), l.upFront() ? "at start " : "under load", l.what(), l.formula()));
        }
        long heap = total(Kind.HEAP);
        long direct = total(Kind.DIRECT);
        out.add(String.format(Locale.ROOT, "  total heap %s (at start %s), direct %s (at start %s), native %s",
            bytes(heap), bytes(upFront(Kind.HEAP)), bytes(direct), bytes(upFront(Kind.DIRECT)), bytes(total(Kind.NATIVE))));
        out.add("  suggested JVM options: -Xmx" + jvmSize(suggestedMaxHeapBytes(heap)) + " -XX:MaxDirectMemorySize="
            + jvmSize(suggestedMaxDirectBytes(direct)));
        return out;
    }

    /**
     * As {@link #report()}, with a warning when the worst case exceeds {@code hostMemoryBytes} (this host's
     * physical memory; 0 = unknown), naming the largest line: the keys to lower are in its formula.
     */
    public List<String> report(long hostMemoryBytes) {
        List<String> out = new ArrayList<>(report());
        long worst = total(Kind.HEAP) + total(Kind.DIRECT) + total(Kind.NATIVE);
        if (hostMemoryBytes > 0 && worst > hostMemoryBytes) {
            Line largest = lines.get(0);
            for (Line l : lines) {
                if (l.bytes() > largest.bytes()) {
                    largest = l;
                }
            }
            out.add("  warning: the worst case (" + bytes(worst) + ") exceeds this host's memory (" + bytes(hostMemoryBytes)
                + "); the largest line is " + largest.what() + " (" + bytes(largest.bytes()) + "): " + largest.formula());
        }
        return out;
    }

    /** A JVM size option's value: megabytes, or whole gigabytes (rounded up) from 10 GiB on. */
    static String jvmSize(long bytes) {
        return bytes < 10L << 30 ? bytes / MIB + "m" : roundUp(bytes, 1L << 30) / (1L << 30) + "g";
    }

    private static long roundUp(long v, long unit) {
        return (v + unit - 1) / unit * unit;
    }

    /** Bytes as an operator reads them: B, KiB, MiB or GiB with one decimal. */
    static String bytes(long b) {
        if (b < KIB) {
            return b + " B";
        }
        if (b < MIB) {
            return String.format(Locale.ROOT, "%.1f KiB", b / (double) KIB);
        }
        if (b < 1L << 30) {
            return String.format(Locale.ROOT, "%.1f MiB", b / (double) MIB);
        }
        return String.format(Locale.ROOT, "%.1f GiB", b / (double) (1L << 30));
    }
}
