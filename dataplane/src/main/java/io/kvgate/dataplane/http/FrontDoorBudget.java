package io.kvgate.dataplane.http;

import io.kvgate.control.config.GatewayConfig;

/**
 * What one client connection can hold in buffers at worst, from configuration alone: the per-connection term of a
 * memory budget ({@code max_connections} times {@link #perConnectionBytes}). Every term is a bound the front door
 * enforces, not an estimate:
 * <ul>
 *   <li><b>Answers</b> ({@link #responseBytes}): reading and answering stop once the unsent bytes are over
 *       {@code limits.max_buffered_response_bytes} (the connection's write high-water mark), so they reach at most
 *       that plus the one answer that crossed it. The largest answer is an aggregated one (a P/D decode's JSON, a
 *       rewritten answer: at most {@code limits.max_body_bytes}; an engine error: {@code upstream.max_error_body_bytes})
 *       or one relayed read batch of a stream (the relay reads the engine again only once the client took the last
 *       batch). The gateway's local answers (health, models, metrics) are smaller except a {@code /metrics} page,
 *       whose size follows the configured rules and endpoints.</li>
 *   <li><b>The request being read</b>: its line, its headers, its body ({@code limits.max_initial_line_bytes},
 *       {@code max_header_bytes}, {@code max_body_bytes}), plus one socket read of pipelined requests queued behind it
 *       (reading stops at the first one queued).</li>
 * </ul>
 * Stateless.
 */
public final class FrontDoorBudget {
    /**
     * One socket read: Netty's adaptive receive buffer grows to 64 KiB at most. It bounds both a relayed batch of an
     * engine's stream and the pipelined input decoded from one client read.
     */
    public static final int READ_BATCH_BYTES = 64 << 10;

    private FrontDoorBudget() {
    }

    /** Unsent answer bytes one client connection can hold: the high-water mark plus the largest single answer. */
    public static long responseBytes(GatewayConfig c) {
        long largestAnswer = Math.max(Math.max(c.limits().maxBodyBytes(), c.upstream().maxErrorBodyBytes()), READ_BATCH_BYTES);
        return (long) c.limits().maxBufferedResponseBytes() + largestAnswer;
    }

    /** Request bytes one client connection can hold: the request being read and one read of pipelined input. */
    public static long requestBytes(GatewayConfig c) {
        GatewayConfig.Limits l = c.limits();
        return (long) l.maxInitialLineBytes() + l.maxHeaderBytes() + l.maxBodyBytes() + READ_BATCH_BYTES;
    }

    /** The per-connection budget: {@link #responseBytes} plus {@link #requestBytes}. */
    public static long perConnectionBytes(GatewayConfig c) {
        return responseBytes(c) + requestBytes(c);
    }
}
