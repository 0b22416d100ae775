package io.kvgate.dataplane.relay;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;

/**
 * Relays a server-sent-event stream event by event: bytes after the last complete event (a blank line, {@code \n\n}
 * or {@code \r\n\r\n}) are held back until the rest arrives, so an engine dying in the middle of an event never
 * leaves half an event for the client to parse before the gateway's error frame. Engines write whole events, so
 * this normally holds back nothing; bytes are forwarded as they came, never re-serialized. A partial "event"
 * longer than {@link #MAX_HELD_BYTES} is forwarded as it is (bounded memory). Event-loop only.
 */
public final class SseFramer {
    /** Held-back partial event bound: a longer "event" is forwarded as it is. */
    static final int MAX_HELD_BYTES = 1 << 20;

    private final int maxHeldBytes;
    private ByteBuf pending;

    /** Public (with {@link #next} and {@link #finish}) so perf's {@code SseRewriteBench} runs the relay's framing. */
    public SseFramer() {
        this(MAX_HELD_BYTES);
    }

    SseFramer(int maxHeldBytes) {
        this.maxHeldBytes = maxHeldBytes;
    }

    /**
     * Takes {@code chunk} (its reference) and returns what may go to the client now (possibly empty, never null;
     * the caller owns it and need not release an empty one).
     */
    public ByteBuf next(ByteBufAllocator alloc, ByteBuf chunk) {
        ByteBuf data;
        int scanFrom;
        if (pending != null) {
            // The held bytes contain no blank line: only the new bytes (and the 3 before them) can end an event.
            scanFrom = Math.max(0, pending.readableBytes() - 3);
            data = alloc.compositeBuffer(2).addComponents(true, pending, chunk);
            pending = null;
        } else {
            scanFrom = 0;
            data = chunk;
        }
        int cut = lastEventEnd(data, data.readerIndex() + scanFrom);
        if (cut < 0 && data.readableBytes() <= maxHeldBytes) {
            pending = data;
            return Unpooled.EMPTY_BUFFER;
        }
        if (cut < 0 || cut == data.writerIndex()) {
            return data;
        }
        ByteBuf out = data.retainedSlice(data.readerIndex(), cut - data.readerIndex());
        pending = data.readerIndex(cut);
        return out;
    }

    /** The stream ended normally: whatever is held goes out (caller owns it; never null). */
    public ByteBuf finish(ByteBufAllocator alloc, ByteBuf lastChunk) {
        if (pending == null) {
            return lastChunk;
        }
        ByteBuf data = alloc.compositeBuffer(2).addComponents(true, pending, lastChunk);
        pending = null;
        return data;
    }

    /** The stream failed: the partial event the client never saw is dropped. */
    void discard() {
        if (pending != null) {
            pending.release();
            pending = null;
        }
    }

    int heldBytes() {
        return pending == null ? 0 : pending.readableBytes();
    }

    /** Index just past the last blank line ({@code \n\n} or {@code \r\n\r\n}) in {@code buf}, or -1. */
    public static int lastEventEnd(ByteBuf buf) {
        return lastEventEnd(buf, buf.readerIndex());
    }

    /** As {@link #lastEventEnd(ByteBuf)}, for a blank line ending at or after {@code from + 1}. */
    public static int lastEventEnd(ByteBuf buf, int from) {
        for (int i = buf.writerIndex() - 1; i > Math.max(from, buf.readerIndex()); i--) {
            if (buf.getByte(i) == '\n') {
                byte p = buf.getByte(i - 1);
                if (p == '\n') {
                    return i + 1;
                }
                if (p == '\r' && i - 2 >= buf.readerIndex() && buf.getByte(i - 2) == '\n') {
                    return i + 1;
                }
            }
        }
        return -1;
    }
}
