package io.kvgate.dataplane.kv;

import io.kvgate.dataplane.route.EndpointRegistry;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.ingest.zmq.SubscriberStatus;
import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.util.List;
import java.util.function.Supplier;

/**
 * KV ingest and index families, per endpoint and DP rank: read on scrape from the KV inventory in effect then (a
 * reload may open one), no samples without KV routing. Registered once at start-up; any scraping thread.
 */
public final class KvMetrics {
    private final PrometheusRegistry registry;
    private final Supplier<KvState> kv;
    private final EndpointRegistry endpoints;

    private KvMetrics(PrometheusRegistry registry, Supplier<KvState> kv, EndpointRegistry endpoints) {
        this.registry = registry;
        this.kv = kv;
        this.endpoints = endpoints;
    }

    /** One per-(endpoint, rank) family of the KV subscribers' status. */
    private record KvStatusFamily(String name, boolean counter, String help, java.util.function.ToDoubleFunction<SubscriberStatus> value) {}

    public static void register(PrometheusRegistry registry, Supplier<KvState> kv, EndpointRegistry endpoints) {
        new KvMetrics(registry, kv, endpoints).registerAll();
    }

    private void registerAll() {
        GaugeWithCallback.builder().name("kvgate_kv_subscriber_up").help("1 when the (endpoint, rank) subscription is open"
                + " and connected; 0 while resolving, connecting or retrying.").labelNames("rule", "endpoint", "rank")
            .callback(cb -> eachKvStatus((st, endpoint) -> cb.call(st.up() ? 1 : 0, st.label(), endpoint, Integer.toString(st.rank()))))
            .register(registry);
        CounterWithCallback.builder().name("kvgate_kv_subscriber_errors_total").help("Subscription failures by cause (resolve,"
                + " bind, connect, replay, denied, internal; HTTP drains also http, timeout, too_large).")
            .labelNames("rule", "endpoint", "rank", "cause")
            .callback(cb -> eachKvStatus((st, endpoint) -> st.errors().forEach((cause, n) ->
                cb.call(n.doubleValue(), st.label(), endpoint, Integer.toString(st.rank()), cause))))
            .register(registry);
        CounterWithCallback.builder().name("kvgate_kv_dropped_events_total").help("KV events dropped whole by a per-event limit, by reason.")
            .labelNames("endpoint", "rank", "reason")
            .callback(cb -> eachKvStatus((st, endpoint) -> st.droppedEvents().forEach((reason, n) ->
                cb.call(n.doubleValue(), endpoint, Integer.toString(st.rank()), reason))))
            .register(registry);
        List<KvStatusFamily> families = List.of(
            new KvStatusFamily("kvgate_kv_subscriber_connected", false, "1 when the SUB socket of (endpoint, rank) is connected.",
                st -> st.connected() ? 1 : 0),
            new KvStatusFamily("kvgate_kv_reconnects_total", true, "Reconnections of the event subscriber.", SubscriberStatus::reconnects),
            new KvStatusFamily("kvgate_kv_gaps_total", true, "Sequence gaps seen (dropped batches).", SubscriberStatus::gaps),
            new KvStatusFamily("kvgate_kv_replays_total", true, "Gaps filled from the engine's replay socket.", SubscriberStatus::replays),
            new KvStatusFamily("kvgate_kv_restarts_total", true, "Engine restarts detected (sequence went backwards).",
                SubscriberStatus::restarts),
            new KvStatusFamily("kvgate_kv_clears_total", true,
                "Times the rank's inventory was cleared (restart, unfillable gap, AllBlocksCleared).", SubscriberStatus::clears),
            new KvStatusFamily("kvgate_kv_decode_errors_total", true, "Malformed event frames counted and dropped.",
                SubscriberStatus::decodeErrors),
            new KvStatusFamily("kvgate_kv_events_total", true, "KV events decoded.", SubscriberStatus::events),
            new KvStatusFamily("kvgate_kv_block_ops_total", true, "Block store/remove operations applied to the index.",
                SubscriberStatus::blockOps),
            new KvStatusFamily("kvgate_kv_last_seq", false, "Last sequence number received.", SubscriberStatus::lastSeq),
            new KvStatusFamily("kvgate_kv_other_drainer", false, "1 while another consumer drains the TensorRT-LLM"
                + " /kv_cache_events endpoint (id jumps on most polls).", st -> st.otherDrainer() ? 1 : 0),
            new KvStatusFamily("kvgate_kv_other_drainer_episodes_total", true, "Times the pattern of another consumer draining"
                + " the endpoint's /kv_cache_events started.", SubscriberStatus::otherDrainerEpisodes));
        for (KvStatusFamily f : families) {
            if (f.counter()) {
                CounterWithCallback.builder().name(f.name()).help(f.help()).labelNames("endpoint", "rank")
                    .callback(cb -> eachKvStatus((st, endpoint) -> cb.call(f.value().applyAsDouble(st), endpoint, Integer.toString(st.rank()))))
                    .register(registry);
            } else {
                GaugeWithCallback.builder().name(f.name()).help(f.help()).labelNames("endpoint", "rank")
                    .callback(cb -> eachKvStatus((st, endpoint) -> cb.call(f.value().applyAsDouble(st), endpoint, Integer.toString(st.rank()))))
                    .register(registry);
            }
        }
        GaugeWithCallback.builder().name("kvgate_kv_endpoint_blocks")
            .help("Distinct blocks the index holds for an endpoint (union of its ranks).").labelNames("endpoint")
            .callback(cb -> eachKvEndpoint((k, ep) -> cb.call(k.index().blocks(ep.id()), ep.key()))).register(registry);
        // The block size each engine keys at (from its stored events) against its rule's: a mismatch is zero hits.
        GaugeWithCallback.builder().name("kvgate_kv_event_block_size")
            .help("Block size of the endpoint's latest stored KV event (0 before any).").labelNames("endpoint")
            .callback(cb -> eachKvEndpoint((k, ep) -> cb.call(k.ingest().blockSizes().lastEventBlockSize(ep.id()), ep.key())))
            .register(registry);
        CounterWithCallback.builder().name("kvgate_kv_block_size_mismatch_total").help("Stored KV events whose block size"
                + " differs from the rule's block_size (their prefixes can never match).").labelNames("endpoint")
            .callback(cb -> eachKvEndpoint((k, ep) -> cb.call(k.ingest().blockSizes().mismatches(ep.id()), ep.key())))
            .register(registry);
        // Hybrid models: blocks of KV-cache groups that do not hold whole prefixes (sliding window, Mamba), not indexed.
        CounterWithCallback.builder().name("kvgate_kv_group_blocks_skipped_total").help("Blocks of an endpoint's"
                + " non-full-attention KV-cache groups (sliding window, Mamba), stored or removed, left out of the index.")
            .labelNames("endpoint")
            .callback(cb -> eachKvEndpoint((k, ep) -> cb.call(k.ingest().cacheGroups().skippedBlocks(ep.id()), ep.key())))
            .register(registry);
        CounterWithCallback.builder().name("kvgate_kv_bigram_events_total").help("Stored KV events whose cells are token"
                + " pairs (SGLang EAGLE bigram keys), which the gateway's keys never match.").labelNames("endpoint")
            .callback(cb -> eachKvEndpoint((k, ep) -> cb.call(k.ingest().blockSizes().bigramEvents(ep.id()), ep.key())))
            .register(registry);
        kvIndexGauge("kvgate_kv_index_blocks", "Distinct blocks in the index.", k -> k.index().size());
        kvIndexGauge("kvgate_kv_index_memberships", "(block, endpoint rank) memberships in the index.", k -> k.index().memberships());
        kvIndexGauge("kvgate_kv_index_capacity_blocks", "Index capacity in distinct blocks.", k -> k.index().config().capacityBlocks());
        kvIndexGauge("kvgate_kv_index_bytes", "Off-heap bytes of the index.", k -> k.index().sizeBytes());
        CounterWithCallback.builder().name("kvgate_kv_index_evictions_total").help("Blocks evicted because the index was full.")
            .callback(cb -> {
                KvState k = kv.get();
                if (k != null) {
                    cb.call(k.index().evictions());
                }
            }).register(registry);
    }

    private void kvIndexGauge(String name, String help, java.util.function.ToDoubleFunction<KvState> value) {
        GaugeWithCallback.builder().name(name).help(help).callback(cb -> {
            KvState k = kv.get();
            if (k != null) {
                cb.call(value.applyAsDouble(k));
            }
        }).register(registry);
    }

    /** Each KV subscriber's status now with its endpoint's key (nothing without KV routing). */
    private void eachKvStatus(java.util.function.BiConsumer<SubscriberStatus, String> f) {
        KvState k = kv.get();
        if (k == null) {
            return;
        }
        java.util.Map<Integer, String> names = new java.util.HashMap<>();
        for (EndpointState ep : endpoints.all()) {
            names.put(ep.id(), ep.key());
        }
        for (SubscriberStatus st : k.status()) {
            f.accept(st, names.getOrDefault(st.endpointId(), String.valueOf(st.endpointId())));
        }
    }

    /** Each endpoint with KV events that the index tracks (nothing without KV routing). */
    private void eachKvEndpoint(java.util.function.BiConsumer<KvState, EndpointState> f) {
        KvState k = kv.get();
        if (k == null) {
            return;
        }
        for (EndpointState ep : endpoints.all()) {
            if (ep.config().kvEvents() != null && ep.id() < KvState.MAX_ENDPOINTS) {
                f.accept(k, ep);
            }
        }
    }
}
