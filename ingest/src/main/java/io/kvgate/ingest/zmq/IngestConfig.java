package io.kvgate.ingest.zmq;

import io.kvgate.index.block.ChainedTokenHasher;
import io.kvgate.index.block.Fmix64ChainedTokenHasher;

/**
 * Ingest tuning, validated once (messages name the field, the value and the rule).
 *
 * @param maxFrameBytes      largest ZeroMQ frame accepted: set as {@code ZMQ_MAXMSGSIZE} on every SUB and DEALER,
 *                           so a peer that declares a larger frame is disconnected by JeroMQ's decoder before any
 *                           buffer is reserved (config {@code ingest.max_frame_bytes})
 * @param receiveBufferBytes worst-case bytes one socket may queue ({@code ingest.receive_buffer_bytes}); ZeroMQ's
 *                           high-water mark counts messages, so it is set to {@code receiveBufferBytes /
 *                           maxFrameBytes} (see {@link #receiveHighWaterMark()}); holds live batches while a replay
 *                           runs
 * @param socketReceiveBufferBytes the kernel's receive buffer ({@code SO_RCVBUF}) of every connecting SUB and replay
 *                           DEALER ({@code ingest.socket_receive_buffer_bytes}; 0 = the kernel's default and
 *                           autotuning): raw bytes in kernel memory, which keep arriving while ZeroMQ's queue is at its
 *                           high-water mark, so a burst waits in the kernel instead of stalling the publisher's TCP
 *                           stream (see {@link #DEFAULT_SOCKET_RECEIVE_BUFFER_BYTES}). JeroMQ also sizes each
 *                           connection's <em>direct</em> read buffer by it, so a bound SUB, which any peer can reach,
 *                           leaves it to the kernel (see {@link #directBytesPerSubscription()})
 * @param replayTimeoutNs    a replay that has not finished by then is abandoned and the rank cleared
 * @param replayBackoffNs    after a failed replay, no new replay for this long (gaps clear instead)
 * @param retryInitialNs     first delay before re-opening a subscription that failed; doubles per failure
 * @param retryMaxNs         cap of that delay
 * @param maxMessagesPerPoll per socket per duty cycle, so one busy engine cannot starve the others
 * @param learnedKeyCapacity engine-key to own-key mappings kept for learned-key endpoints
 * @param hasher             own chained hash for learned-key endpoints
 * @param maxPeersPerBindSocket peers a bound SUB admits at once ({@code ingest.max_peers_per_bind_socket}); the ZAP
 *                           handler refuses more, so anyone who can reach the port cannot hold more than this many
 *                           connections' buffers (review B-4)
 */
public record IngestConfig(int maxFrameBytes, long receiveBufferBytes, int socketReceiveBufferBytes,
                           long replayTimeoutNs, long replayBackoffNs, long retryInitialNs, long retryMaxNs,
                           int maxMessagesPerPoll, int learnedKeyCapacity, ChainedTokenHasher hasher,
                           int maxPeersPerBindSocket) {

    public static final int DEFAULT_MAX_FRAME_BYTES = 16 << 20;
    public static final long DEFAULT_RECEIVE_BUFFER_BYTES = 256L << 20;
    /**
     * 256 KiB. With ZeroMQ's queue only 16 messages deep (256 MiB / 16 MiB frames) and the kernel's autotuned
     * buffer, one publisher flooding one socket stalled on every refill: the SUB's I/O thread stops reading TCP
     * while its queue is full, and the ingest thread then waits for it to be woken and to refill. Measured end to
     * end at saturation (perf/results/index-ingest-2026-12-02.md): 0.56-0.68 M block ops/s without, 1.28-1.46 M/s
     * with 4 MiB, and 256 KiB as good as 4 MiB (1.24 vs 1.23 M/s). JeroMQ allocates a direct read buffer of this
     * size per connection (review B-4: 4 MiB per subscription was 2 GiB for 512 subscriptions), so the smaller one
     * that measured as well is the default. The kernel caps it at {@code net.core.rmem_max}.
     */
    public static final int DEFAULT_SOCKET_RECEIVE_BUFFER_BYTES = 256 << 10;
    public static final int MAX_SOCKET_RECEIVE_BUFFER_BYTES = 1 << 30;
    /** One engine PUB per rank socket, plus room for a reconnect that overlaps its dead connection. */
    public static final int DEFAULT_MAX_PEERS_PER_BIND_SOCKET = 8;
    public static final int MAX_PEERS_PER_BIND_SOCKET = 1024;
    /**
     * JeroMQ 0.6.0's smallest per-connection batch ({@code Config.IN_BATCH_SIZE} / {@code OUT_BATCH_SIZE}): a
     * connection's direct read buffer is {@code max(SO_RCVBUF option, this)}, its direct write buffer this.
     */
    public static final int ZMQ_MIN_BATCH_BYTES = 8192;

    public IngestConfig {
        if (maxFrameBytes < 1024 || maxFrameBytes > 1 << 30) {
            throw new IllegalArgumentException("ingest.max_frame_bytes=" + maxFrameBytes + " must be in 1024..1073741824");
        }
        if (receiveBufferBytes < maxFrameBytes) {
            throw new IllegalArgumentException("ingest.receive_buffer_bytes=" + receiveBufferBytes
                + " must be >= ingest.max_frame_bytes=" + maxFrameBytes);
        }
        if (socketReceiveBufferBytes < 0 || socketReceiveBufferBytes > MAX_SOCKET_RECEIVE_BUFFER_BYTES) {
            throw new IllegalArgumentException("ingest.socket_receive_buffer_bytes=" + socketReceiveBufferBytes
                + " must be in 0..1073741824 (0 = the kernel's default)");
        }
        if (replayTimeoutNs <= 0 || replayBackoffNs < 0) {
            throw new IllegalArgumentException("replayTimeoutNs=" + replayTimeoutNs + " must be > 0, replayBackoffNs="
                + replayBackoffNs + " must be >= 0");
        }
        if (retryInitialNs <= 0 || retryMaxNs < retryInitialNs) {
            throw new IllegalArgumentException("ingest.retry_initial_ms=" + retryInitialNs / 1_000_000
                + " must be > 0 and <= ingest.retry_max_ms=" + retryMaxNs / 1_000_000);
        }
        if (maxMessagesPerPoll < 1) {
            throw new IllegalArgumentException("maxMessagesPerPoll=" + maxMessagesPerPoll + " must be >= 1");
        }
        if (learnedKeyCapacity < 16) {
            throw new IllegalArgumentException("learnedKeyCapacity=" + learnedKeyCapacity + " must be >= 16");
        }
        if (hasher == null) {
            hasher = Fmix64ChainedTokenHasher.INSTANCE;
        }
        if (maxPeersPerBindSocket < 1 || maxPeersPerBindSocket > MAX_PEERS_PER_BIND_SOCKET) {
            throw new IllegalArgumentException("ingest.max_peers_per_bind_socket=" + maxPeersPerBindSocket
                + " must be in 1.." + MAX_PEERS_PER_BIND_SOCKET);
        }
    }

    public static IngestConfig defaults() {
        return new IngestConfig(DEFAULT_MAX_FRAME_BYTES, DEFAULT_RECEIVE_BUFFER_BYTES,
            DEFAULT_SOCKET_RECEIVE_BUFFER_BYTES, 2_000_000_000L, 30_000_000_000L, 100_000_000L, 30_000_000_000L, 1024,
            1 << 20, Fmix64ChainedTokenHasher.INSTANCE, DEFAULT_MAX_PEERS_PER_BIND_SOCKET);
    }

    /** Defaults with the gateway's {@code ingest} section applied. */
    public static IngestConfig of(int maxFrameBytes, long receiveBufferBytes, int socketReceiveBufferBytes,
                                  long retryInitialMs, long retryMaxMs) {
        return of(maxFrameBytes, receiveBufferBytes, socketReceiveBufferBytes, retryInitialMs, retryMaxMs,
            DEFAULT_MAX_PEERS_PER_BIND_SOCKET);
    }

    /** Defaults with the gateway's {@code ingest} section applied. */
    public static IngestConfig of(int maxFrameBytes, long receiveBufferBytes, int socketReceiveBufferBytes,
                                  long retryInitialMs, long retryMaxMs, int maxPeersPerBindSocket) {
        IngestConfig d = defaults();
        return new IngestConfig(maxFrameBytes, receiveBufferBytes, socketReceiveBufferBytes, d.replayTimeoutNs(),
            d.replayBackoffNs(), retryInitialMs * 1_000_000L, retryMaxMs * 1_000_000L, d.maxMessagesPerPoll(),
            d.learnedKeyCapacity(), d.hasher(), maxPeersPerBindSocket);
    }

    public IngestConfig withRetry(long initialNs, long maxNs) {
        return new IngestConfig(maxFrameBytes, receiveBufferBytes, socketReceiveBufferBytes, replayTimeoutNs,
            replayBackoffNs, initialNs, maxNs, maxMessagesPerPoll, learnedKeyCapacity, hasher, maxPeersPerBindSocket);
    }

    public IngestConfig withFrames(int maxFrameBytes, long receiveBufferBytes) {
        return new IngestConfig(maxFrameBytes, receiveBufferBytes, socketReceiveBufferBytes, replayTimeoutNs,
            replayBackoffNs, retryInitialNs, retryMaxNs, maxMessagesPerPoll, learnedKeyCapacity, hasher,
            maxPeersPerBindSocket);
    }

    public IngestConfig withSocketReceiveBuffer(int bytes) {
        return new IngestConfig(maxFrameBytes, receiveBufferBytes, bytes, replayTimeoutNs, replayBackoffNs,
            retryInitialNs, retryMaxNs, maxMessagesPerPoll, learnedKeyCapacity, hasher, maxPeersPerBindSocket);
    }

    public IngestConfig withMaxPeersPerBindSocket(int peers) {
        return new IngestConfig(maxFrameBytes, receiveBufferBytes, socketReceiveBufferBytes, replayTimeoutNs,
            replayBackoffNs, retryInitialNs, retryMaxNs, maxMessagesPerPoll, learnedKeyCapacity, hasher, peers);
    }

    /** Direct memory of one ZeroMQ connection: JeroMQ's read buffer (sized by the SO_RCVBUF option) and write buffer. */
    public static long directBytesPerConnection(int socketReceiveBufferBytes) {
        return Math.max(socketReceiveBufferBytes, ZMQ_MIN_BATCH_BYTES) + (long) ZMQ_MIN_BATCH_BYTES;
    }

    /**
     * The most direct memory one (endpoint, DP rank) subscription holds, whatever its mode: connecting, a SUB and a
     * replay DEALER with one connection each at {@link #socketReceiveBufferBytes}; bound, at most
     * {@link #maxPeersPerBindSocket} admitted peers at JeroMQ's minimum buffers (a bound SUB never sets
     * {@code SO_RCVBUF}) plus the replay DEALER. Frames themselves are heap ({@link FrameSizeGuard}). Multiply by
     * the subscriptions (endpoints x DP ranks) for the ingest's budget, which must fit under
     * {@code -XX:MaxDirectMemorySize} beside the front door's buffers. Not counted: peers still in their ZMTP
     * handshake on a bound port (refused or admitted within {@code RankSubscriber.HANDSHAKE_TIMEOUT_MS}) and the
     * JDK's one temporary direct buffer per I/O thread for reads into heap frames (at most
     * {@link #maxFrameBytes}).
     */
    public long directBytesPerSubscription() {
        long replay = directBytesPerConnection(socketReceiveBufferBytes);
        long connecting = directBytesPerConnection(socketReceiveBufferBytes) + replay;
        long bound = maxPeersPerBindSocket * directBytesPerConnection(0) + replay;
        return Math.max(connecting, bound);
    }

    /** Receive high-water mark in messages: worst-case queued bytes per socket stay within receiveBufferBytes. */
    public int receiveHighWaterMark() {
        return (int) Math.max(1, Math.min(Integer.MAX_VALUE, receiveBufferBytes / maxFrameBytes));
    }

    /** Delay before retry number {@code failures} (1 = first failure): initial * 2^(failures-1), capped. */
    public long retryDelayNs(int failures) {
        int shift = Math.max(0, Math.min(failures - 1, 40));
        long d = retryInitialNs << shift;
        return d <= 0 || d > retryMaxNs || (d >>> shift) != retryInitialNs ? retryMaxNs : d;
    }
}
