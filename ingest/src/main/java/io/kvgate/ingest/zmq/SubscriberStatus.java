package io.kvgate.ingest.zmq;

import java.util.Map;

/**
 * A snapshot of one (endpoint, DP rank) subscriber's state and counters (each read atomically, not all at one
 * instant).
 *
 * @param label          the source's label (the rule that names the endpoint), "" when unnamed
 * @param state          {@code resolving}, {@code connecting}, {@code up} or {@code retrying} (see
 *                       {@link RankSubscriber.State})
 * @param lastError      the last failure ("cause: message"), "" when none yet
 * @param errors         failures by cause ({@code resolve}, {@code bind}, {@code connect}, {@code replay},
 *                       {@code denied}, {@code internal}); only causes seen are present
 * @param connected      at least one live ZMQ connection (the SUB's connection events)
 * @param lastSeq        last applied batch seq, -1 before the first
 * @param gaps           forward jumps in seq
 * @param replays        replay requests sent
 * @param replayFailures replays that timed out or could not fill the gap
 * @param restarts       seq went backwards (publisher restarted)
 * @param reconnects     connections established after the first
 * @param decodeErrors   malformed payloads (and short messages)
 * @param clears         times this rank's inventory was cleared (restart, unfillable gap, decode error,
 *                       AllBlocksCleared)
 * @param batches        batches applied
 * @param events         events applied
 * @param blockOps       block store/remove operations applied to the index
 * @param droppedEvents  events dropped whole by a per-event limit, by reason ({@code too_many_blocks}, ...)
 * @param otherDrainer   an HTTP-drained endpoint ({@code POST /kv_cache_events}) shows the pattern of another consumer
 *                       draining it: event-id jumps on most recent polls (see {@link HttpKvPoller}); false for ZeroMQ
 * @param otherDrainerEpisodes times that pattern started (each episode is logged once)
 */
public record SubscriberStatus(int endpointId, int rank, String uri, String label, String state, String lastError,
                               Map<String, Long> errors, boolean connected, long lastSeq, long gaps, long replays,
                               long replayFailures, long restarts, long reconnects, long decodeErrors, long clears,
                               long batches, long events, long blockOps, Map<String, Long> droppedEvents,
                               boolean otherDrainer, long otherDrainerEpisodes) {

    /** The shape before other-drainer detection (ZeroMQ subscriptions: nothing drains them but kvgate). */
    public SubscriberStatus(int endpointId, int rank, String uri, String label, String state, String lastError,
                            Map<String, Long> errors, boolean connected, long lastSeq, long gaps, long replays,
                            long replayFailures, long restarts, long reconnects, long decodeErrors, long clears,
                            long batches, long events, long blockOps, Map<String, Long> droppedEvents) {
        this(endpointId, rank, uri, label, state, lastError, errors, connected, lastSeq, gaps, replays, replayFailures,
            restarts, reconnects, decodeErrors, clears, batches, events, blockOps, droppedEvents, false, 0);
    }

    /** The shape before supervision: state derived from {@code connected}, no errors, no drops. */
    public SubscriberStatus(int endpointId, int rank, String uri, boolean connected, long lastSeq, long gaps,
                            long replays, long replayFailures, long restarts, long reconnects, long decodeErrors,
                            long clears, long batches, long events, long blockOps) {
        this(endpointId, rank, uri, "", connected ? "up" : "connecting", "", Map.of(), connected, lastSeq, gaps,
            replays, replayFailures, restarts, reconnects, decodeErrors, clears, batches, events, blockOps, Map.of());
    }

    /** 1 when the subscription is open and connected to at least one peer. */
    public boolean up() {
        return "up".equals(state);
    }
}
