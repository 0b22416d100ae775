package io.kvgate.dataplane.kv;

import io.kvgate.control.log.Log;
import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.EndpointConfig;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.config.KvIndexSizing;
import io.kvgate.dataplane.route.EndpointRegistry;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.ingest.zmq.HttpKvEventSource;
import io.kvgate.ingest.zmq.KeyMode;
import io.kvgate.ingest.zmq.KvEventIngest;
import io.kvgate.ingest.zmq.KvEventSource;
import io.kvgate.ingest.zmq.SubscriberStatus;
import java.io.IOException;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The gateway's exact KV inventory: one off-heap block index fed by one ingest thread that subscribes to every
 * endpoint's (and every DP rank's) ZeroMQ event stream and drains every TensorRT-LLM endpoint's HTTP
 * {@code /kv_cache_events}. Subscriptions follow configuration swaps: endpoints that appear are subscribed,
 * endpoints that disappear are dropped with their blocks. Thread-safe ({@link #sync} is serialized).
 */
public final class KvState implements AutoCloseable {
    /** Endpoint ids above this are refused (the index sizes per-endpoint arrays up front). */
    public static final int MAX_ENDPOINTS = KvIndexSizing.MAX_ENDPOINTS;

    private final BlockIndex index;
    private final KvEventIngest ingest;
    /** What each endpoint id is subscribed to: a {@link KvEventSource} or an {@link HttpKvEventSource}. */
    private final Map<Integer, Record> subscribed = new HashMap<>();

    public KvState(long capacityBlocks, NanoClock clock) {
        this(capacityBlocks, clock, GatewayConfig.Ingest.DEFAULTS);
    }

    public KvState(long capacityBlocks, NanoClock clock, GatewayConfig.Ingest bounds) {
        this.index = new BlockIndex(KvIndexSizing.indexConfig(capacityBlocks));
        this.ingest = new KvEventIngest(index, clock, KvIndexSizing.ingestConfig(capacityBlocks, bounds));
        ingest.start();
    }

    public static boolean needed(GatewayConfig cfg) {
        for (RuleConfig r : cfg.rules()) {
            for (EndpointConfig e : r.endpoints()) {
                if (e.kvEvents() != null) {
                    return true;
                }
            }
        }
        return false;
    }

    /** Subscribes to what {@code cfg} names and drops what it no longer names. */
    public synchronized void sync(GatewayConfig cfg, EndpointRegistry registry) {
        Map<Integer, Record> want = new HashMap<>();
        for (RuleConfig r : cfg.rules()) {
            KeyMode mode = "learned".equals(r.kvKeyMode()) ? KeyMode.LEARNED : KeyMode.ENGINE;
            for (EndpointConfig e : r.endpoints()) {
                if (e.kvEvents() == null) {
                    continue;
                }
                EndpointState ep = registry.resolve(e);
                if (ep.id() >= MAX_ENDPOINTS) {
                    Log.warn("endpoint " + ep.key() + " has id " + ep.id() + " >= " + MAX_ENDPOINTS
                        + ": its KV events are not indexed (restart the gateway to compact ids)");
                    continue;
                }
                if (!want.containsKey(ep.id())) {
                    // The first rule naming the endpoint keys its requests: its events must carry that block size.
                    ingest.blockSizes().expect(ep.id(), r.blockSize(), ep.key() + " (rule " + r.name() + ")");
                    // Exact keys are the engine's: a hybrid model hashed finer than block_size cannot match them.
                    // Learned keys chain the events' own tokens at their block size, whatever the engine hashed at.
                    ingest.cacheGroups().expect(ep.id(), mode == KeyMode.LEARNED ? 0 : r.blockSize(),
                        ep.key() + " (rule " + r.name() + ")");
                }
                if (e.kvEventsOverHttp()) {
                    // TensorRT-LLM: drained over HTTP; its hashes are the v1 block key, which exact rules reproduce.
                    Record prev = want.get(ep.id());
                    want.put(ep.id(), new HttpKvEventSource(ep.id(), e.kvEvents(), e.kvPollMs() * 1_000_000L, e.dpRanks(),
                        prev == null ? r.name() : label(prev), mode));
                    continue;
                }
                KvEventSource.Curve curve;
                try {
                    curve = e.kvEventsCurveServerKey() == null ? null
                        : KvEventSource.Curve.fromSecretFile(e.kvEventsCurveServerKey(), Path.of(e.kvEventsCurveSecretFile()));
                } catch (IOException | IllegalArgumentException ex) {
                    Log.warn("endpoint " + ep.key() + ": kv_events_curve_secret_file=" + e.kvEventsCurveSecretFile()
                        + " cannot be used (" + ex.getMessage() + "): its KV events are not subscribed");
                    continue;
                }
                // An endpoint shared by several rules is subscribed once; metrics label it with the first rule.
                Record prev = want.get(ep.id());
                want.put(ep.id(), new KvEventSource(ep.id(), e.kvEvents(), e.dpRanks(), e.kvReplay(), e.kvEventsBind(),
                    e.kvTopic(), mode, prev == null ? r.name() : label(prev), e.kvEventsAllow(), curve));
            }
        }
        for (var it = subscribed.entrySet().iterator(); it.hasNext(); ) {
            var en = it.next();
            if (!want.containsKey(en.getKey())) {
                ingest.removeEndpoint(en.getKey());
                it.remove();
            }
        }
        for (var en : want.entrySet()) {
            if (!en.getValue().equals(subscribed.get(en.getKey()))) {
                switch (en.getValue()) {
                    case KvEventSource z -> ingest.addEndpoint(z);
                    case HttpKvEventSource h -> ingest.addHttpEndpoint(h);
                    default -> throw new IllegalStateException("unknown event source " + en.getValue());
                }
                subscribed.put(en.getKey(), en.getValue());
            }
        }
    }

    private static String label(Record source) {
        return source instanceof HttpKvEventSource h ? h.label() : ((KvEventSource) source).label();
    }

    public BlockIndex index() {
        return index;
    }

    public KvEventIngest ingest() {
        return ingest;
    }

    /**
     * For each endpoint of {@code rules} whose KV events carry another block size than its rule keys at, a warning
     * naming both: the KV scores of that endpoint stay zero (no prefix can match) until it is fixed.
     */
    public List<String> blockSizeWarnings(Iterable<io.kvgate.dataplane.route.Rule> rules) {
        List<String> out = new java.util.ArrayList<>();
        for (io.kvgate.dataplane.route.Rule rule : rules) {
            for (EndpointState ep : rule.endpoints()) {
                if (ep.id() < MAX_ENDPOINTS && ingest().blockSizes().mismatched(ep.id())) {
                    out.add("rule " + rule.name() + " endpoint " + ep.key() + ": its KV events carry block_size "
                        + ingest().blockSizes().lastEventBlockSize(ep.id()) + ", the rule keys at "
                        + rule.config().blockSize() + " (no prefix can match)");
                }
            }
        }
        return out;
    }

    public List<SubscriberStatus> status() {
        return ingest.status();
    }

    /** Stops ingest first; the off-heap map is closed only once the ingest thread can no longer write it (L12). */
    @Override
    public void close() {
        if (ingest.stop(10_000)) {
            index.close();
        } else {
            Log.warn("KV ingest did not stop within 10 s; the block index is left open (process exit frees it)");
        }
    }
}
