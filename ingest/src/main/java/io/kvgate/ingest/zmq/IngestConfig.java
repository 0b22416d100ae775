package io.kvgate.ingest.zmq;

import io.kvgate.index.block.ChainedTokenHasher;
import io.kvgate.index.block.Fmix64ChainedTokenHasher;

/**
 * Ingest tuning, validated once.
 *
 * @param maxFrameBytes        largest payload frame accepted (bigger ones are counted as decode errors)
 * @param replayTimeoutNs      a replay that has not finished by then is abandoned and the rank cleared
 * @param replayBackoffNs      after a failed replay, no new replay for this long (gaps clear instead)
 * @param receiveHighWaterMark SUB receive queue bound in messages: holds live batches while a replay runs
 * @param maxMessagesPerPoll   per socket per duty cycle, so one busy engine cannot starve the others
 * @param learnedKeyCapacity   engine-key to own-key mappings kept for learned-key endpoints
 * @param hasher               own chained hash for learned-key endpoints
 */
public record IngestConfig(int maxFrameBytes, long replayTimeoutNs, long replayBackoffNs, int receiveHighWaterMark,
                           int maxMessagesPerPoll, int learnedKeyCapacity, ChainedTokenHasher hasher) {

    public IngestConfig {
        if (maxFrameBytes < 1024 || maxFrameBytes > 1 << 30) {
            throw new IllegalArgumentException("maxFrameBytes=" + maxFrameBytes + " must be in 1024..1073741824");
        }
        if (replayTimeoutNs <= 0 || replayBackoffNs < 0) {
            throw new IllegalArgumentException("replayTimeoutNs=" + replayTimeoutNs + " must be > 0, replayBackoffNs="
                + replayBackoffNs + " must be >= 0");
        }
        if (receiveHighWaterMark < 1 || maxMessagesPerPoll < 1) {
            throw new IllegalArgumentException("receiveHighWaterMark=" + receiveHighWaterMark
                + " and maxMessagesPerPoll=" + maxMessagesPerPoll + " must be >= 1");
        }
        if (learnedKeyCapacity < 16) {
            throw new IllegalArgumentException("learnedKeyCapacity=" + learnedKeyCapacity + " must be >= 16");
        }
        if (hasher == null) {
            hasher = Fmix64ChainedTokenHasher.INSTANCE;
        }
    }

    public static IngestConfig defaults() {
        return new IngestConfig(16 << 20, 2_000_000_000L, 30_000_000_000L, 100_000, 1024, 1 << 20,
            Fmix64ChainedTokenHasher.INSTANCE);
    }
}
