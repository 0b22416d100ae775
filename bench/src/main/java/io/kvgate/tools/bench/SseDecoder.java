package io.kvgate.tools.bench;

import io.netty.buffer.ByteBuf;

/**
 * Incremental Server-Sent-Events decoder: fed the response body as the {@link ByteBuf}s arrive (any split, down to
 * one byte at a time), it hands each complete event's {@code data} to a listener the moment the blank line that ends
 * the event arrives, so time-to-first-token and inter-token gaps are measured on arrival, never after aggregating
 * the body.
 *
 * <p>Follows the WHATWG event-stream grammar where it matters for LLM streams: lines end in {@code \n},
 * {@code \r\n} or a lone {@code \r} (a {@code \r} at the end of one buffer and a {@code \n} at the start of the next
 * are one line end); lines starting with {@code :} are comments; {@code data:} values lose one leading space and
 * several {@code data} lines of one event are joined with {@code \n}; other fields ({@code event}, {@code id},
 * {@code retry}) are ignored; an event with no data line is not dispatched; an unterminated event at the end of the
 * stream is not dispatched (the caller sees no {@code [DONE]} and calls the stream truncated).
 *
 * <p>Bounded: an event whose data exceeds {@code maxEventBytes} is dropped and reported once through
 * {@link Listener#onOversized()}; memory stays at {@code maxEventBytes} plus one line.
 *
 * <p>Threading: single owner (the connection's event loop). Reusable: {@link #reset()} between responses; the
 * data array passed to the listener is reused, copy what you keep.
 */
public final class SseDecoder {
    /** Receives decoded events. */
    public interface Listener {
        /** One event's data ({@code data[0..length)}), valid only during the call. */
        void onData(byte[] data, int length);

        /** An event was larger than the limit and was dropped. */
        default void onOversized() {}
    }

    private static final int SCRATCH_BYTES = 8192;

    private final int maxEventBytes;
    private final byte[] scratch = new byte[SCRATCH_BYTES];
    private byte[] line;
    private int lineLength;
    private boolean lineOverflow;
    private byte[] data;
    private int dataLength;
    private boolean hasData;
    private boolean dataOverflow;
    private boolean lastWasCr;
    private long comments;

    public SseDecoder(int maxEventBytes) {
        if (maxEventBytes < 16) {
            throw new IllegalArgumentException("maxEventBytes=" + maxEventBytes + " must be >= 16");
        }
        this.maxEventBytes = maxEventBytes;
        this.line = new byte[Math.min(1024, maxEventBytes + 8)];
        this.data = new byte[Math.min(1024, maxEventBytes)];
    }

    /** Forgets any partial line or event (next response). */
    public void reset() {
        lineLength = 0;
        lineOverflow = false;
        dataLength = 0;
        hasData = false;
        dataOverflow = false;
        lastWasCr = false;
    }

    /** Comment lines seen since construction (keep-alive pings from some servers). */
    public long comments() {
        return comments;
    }

    /** Decodes every readable byte of {@code buf} without changing its reader index. */
    public void feed(ByteBuf buf, Listener listener) {
        int index = buf.readerIndex();
        int end = buf.writerIndex();
        if (buf.hasArray()) {
            feed(buf.array(), buf.arrayOffset() + index, end - index, listener);
            return;
        }
        while (index < end) {
            int n = Math.min(SCRATCH_BYTES, end - index);
            buf.getBytes(index, scratch, 0, n);
            feed(scratch, 0, n, listener);
            index += n;
        }
    }

    /** Decodes {@code bytes[offset..offset+length)}. */
    public void feed(byte[] bytes, int offset, int length, Listener listener) {
        int end = offset + length;
        int lineStart = offset;
        for (int i = offset; i < end; i++) {
            byte b = bytes[i];
            if (b == '\n' || b == '\r') {
                if (b == '\n' && lastWasCr && i == lineStart && lineLength == 0 && !lineOverflow) {
                    // Second half of a \r\n split across (or within) buffers: the line already ended at the \r.
                    lastWasCr = false;
                    lineStart = i + 1;
                    continue;
                }
                appendLine(bytes, lineStart, i - lineStart);
                onLine(listener);
                lastWasCr = b == '\r';
                lineStart = i + 1;
            } else {
                lastWasCr = false;
            }
        }
        appendLine(bytes, lineStart, end - lineStart);
    }

    private void appendLine(byte[] bytes, int offset, int length) {
        if (length == 0 || lineOverflow) {
            return;
        }
        int needed = lineLength + length;
        if (needed > maxEventBytes + 8) {
            lineOverflow = true;
            return;
        }
        if (needed > line.length) {
            byte[] bigger = new byte[Math.min(maxEventBytes + 8, Math.max(needed, line.length * 2))];
            System.arraycopy(line, 0, bigger, 0, lineLength);
            line = bigger;
        }
        System.arraycopy(bytes, offset, line, lineLength, length);
        lineLength = needed;
    }

    private void onLine(Listener listener) {
        if (lineOverflow) {
            // A line longer than the limit can only belong to an oversized event (or be garbage): drop the event.
            lineOverflow = false;
            lineLength = 0;
            dataOverflow = true;
            hasData = true;
            return;
        }
        int length = lineLength;
        lineLength = 0;
        if (length == 0) {
            dispatch(listener);
            return;
        }
        if (line[0] == ':') {
            comments++;
            return;
        }
        int colon = -1;
        for (int i = 0; i < length; i++) {
            if (line[i] == ':') {
                colon = i;
                break;
            }
        }
        int nameLength = colon < 0 ? length : colon;
        if (nameLength != 4 || line[0] != 'd' || line[1] != 'a' || line[2] != 't' || line[3] != 'a') {
            return; // event:, id:, retry: and unknown fields do not matter for completions streams
        }
        int valueStart = colon < 0 ? length : colon + 1;
        if (valueStart < length && line[valueStart] == ' ') {
            valueStart++;
        }
        appendData(line, valueStart, length - valueStart);
    }

    private void appendData(byte[] bytes, int offset, int length) {
        int separator = hasData ? 1 : 0;
        hasData = true;
        if (dataOverflow) {
            return;
        }
        int needed = dataLength + separator + length;
        if (needed > maxEventBytes) {
            dataOverflow = true;
            return;
        }
        if (needed > data.length) {
            byte[] bigger = new byte[Math.min(maxEventBytes, Math.max(needed, data.length * 2))];
            System.arraycopy(data, 0, bigger, 0, dataLength);
            data = bigger;
        }
        if (separator == 1) {
            data[dataLength++] = '\n';
        }
        System.arraycopy(bytes, offset, data, dataLength, length);
        dataLength += length;
    }

    private void dispatch(Listener listener) {
        if (!hasData) {
            return;
        }
        boolean overflow = dataOverflow;
        int length = dataLength;
        hasData = false;
        dataOverflow = false;
        dataLength = 0;
        if (overflow) {
            listener.onOversized();
        } else {
            listener.onData(data, length);
        }
    }
}
