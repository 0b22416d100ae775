package io.kvgate.ingest.zmq;

/**
 * A snapshot of one (endpoint, DP rank) subscriber's counters (each read atomically, not all at one instant).
 *
 * @param connected      at least one live ZMQ connection (socket monitor)
 * @param lastSeq        last applied batch seq, -1 before the first
 * @param gaps           forward jumps in seq
 * @param replays        replay requests sent
 * @param replayFailures replays that timed out or could not fill the gap
 * @param restarts       seq went backwards (publisher restarted)
 * @param reconnects     connections established after the first
 * @param decodeErrors   malformed or oversize payloads (and short messages)
 * @param clears         times this rank's inventory was cleared (restart, unfillable gap, decode error,
 *                       AllBlocksCleared)
 * @param batches        batches applied
 * @param events         events applied
 * @param blockOps       block store/remove operations applied to the index
 */
public record SubscriberStatus(int endpointId, int rank, String uri, boolean connected, long lastSeq, long gaps,
                               long replays, long replayFailures, long restarts, long reconnects,
                               long decodeErrors, long clears, long batches, long events, long blockOps) {
}
