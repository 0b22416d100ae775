package io.kvgate.ingest.zmq;

import java.util.concurrent.atomic.AtomicLong;

import zmq.Msg;
import zmq.msg.MsgAllocator;

/**
 * The message allocator of every ingest socket ({@code ZMQ.Socket.setMsgAllocator}): it refuses the frame sizes
 * JeroMQ 0.6.0's ZMTP 3 decoder lets through, and keeps frames off direct memory.
 *
 * <p><b>Why</b> (review B-1): {@code zmq.io.coder.Decoder.sizeReady} rejects a declared size above
 * {@code MAXMSGSIZE} or {@code Integer.MAX_VALUE} but not a <em>negative</em> one (a 64-bit size with the top bit
 * set, e.g. {@code 0x80000000F1C7A00F}), and passes {@code (int) size} here. The stock allocator then throws
 * {@code NegativeArraySizeException}, which leaves {@code DecoderBase.decode} looping forever on the context's only
 * I/O thread: every subscription stopped, from a peer the ZAP allow-list would have refused. And the truncated
 * {@code int} can also be positive and up to 2 GiB ({@code 0x800000007FFFFFFF}), past the size bound.
 *
 * <p><b>How</b>: the allocator is the one step of that path JeroMQ lets a socket replace (its decoder classes are
 * fixed for ZMTP sockets; {@code setDecoder} applies to raw sockets only), so the fix needs no copy of a JeroMQ
 * class that would have to come first on every class path. A size below 0 or above {@code maxFrameBytes} is
 * answered with an empty <em>command</em> message: the decoder goes on to the next frame header (no loop, nothing
 * reserved), a peer still in its handshake (not yet admitted by ZAP) is dropped by the mechanism as an unexpected
 * command, and an admitted peer's command is discarded by the session, never delivered. The refusal is counted and
 * {@code onRefused} runs (on the I/O thread: it must only count and wake); the ingest then logs it and, for a
 * connecting subscription whose only peer is the engine's publisher, reopens the socket (its stream is out of step).
 * A positive size within the bound is a frame as any other.
 *
 * <p>Frames are allocated on the heap: the stock allocator puts frames over 1 MiB in direct buffers, so a peer
 * could hold {@code max_frame_bytes} of direct memory per connection by sending a large frame slowly.
 */
final class FrameSizeGuard implements MsgAllocator {
    private final int maxFrameBytes;
    private final Runnable onRefused;
    private final AtomicLong refused = new AtomicLong();
    private volatile int lastRefusedSize;

    FrameSizeGuard(int maxFrameBytes, Runnable onRefused) {
        this.maxFrameBytes = maxFrameBytes;
        this.onRefused = onRefused;
    }

    @Override
    public Msg allocate(int size) {
        if (size < 0 || size > maxFrameBytes) {
            lastRefusedSize = size;
            refused.incrementAndGet();
            onRefused.run();
            Msg discarded = new Msg(0);
            discarded.setFlags(Msg.COMMAND);
            return discarded;
        }
        return new Msg(size);
    }

    /** Frame headers refused so far (any thread). */
    long refused() {
        return refused.get();
    }

    /** The {@code int} JeroMQ passed for the last refused header (the low 32 bits of the declared size). */
    int lastRefusedSize() {
        return lastRefusedSize;
    }
}
