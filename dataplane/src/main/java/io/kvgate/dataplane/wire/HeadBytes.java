package io.kvgate.dataplane.wire;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.util.concurrent.FastThreadLocal;
import java.util.Arrays;

/**
 * An HTTP head assembled in this thread's scratch array and then copied into its buffer at once. A head is a few
 * hundred bytes written in a dozen small pieces; written into a (direct) {@code ByteBuf} piece by piece, every piece
 * pays the buffer's bounds, reference-count and capacity checks and a copy call of its own, which cost more than the
 * bytes (the 1 KiB proxy profile had the engine request's head encode at ~6% of the gateway's Java time). Plain array
 * stores here, then one copy. One per thread, reused: {@link #start()} hands it out empty, and a head is always
 * finished ({@link #toBuffer}) before the next starts. Event-loop threads only (never nested).
 */
final class HeadBytes {
    private static final FastThreadLocal<HeadBytes> SCRATCH = new FastThreadLocal<>() {
        @Override
        protected HeadBytes initialValue() {
            return new HeadBytes();
        }
    };

    private byte[] bytes = new byte[1024];
    private int length;

    private HeadBytes() {}

    /** This thread's scratch head, empty. */
    static HeadBytes start() {
        HeadBytes h = SCRATCH.get();
        h.length = 0;
        return h;
    }

    private byte[] room(int n) {
        if (length + n > bytes.length) {
            bytes = Arrays.copyOf(bytes, Math.max(bytes.length * 2, length + n));
        }
        return bytes;
    }

    HeadBytes bytes(byte[] src) {
        System.arraycopy(src, 0, room(src.length), length, src.length);
        length += src.length;
        return this;
    }

    /** {@code n} bytes of {@code src} from {@code index} (its indices untouched). */
    HeadBytes bytes(ByteBuf src, int index, int n) {
        src.getBytes(index, room(n), length, n);
        length += n;
        return this;
    }

    HeadBytes crlf() {
        return two((byte) '\r', (byte) '\n');
    }

    HeadBytes colonSpace() {
        return two((byte) ':', (byte) ' ');
    }

    private HeadBytes two(byte first, byte second) {
        byte[] b = room(2);
        b[length] = first;
        b[length + 1] = second;
        length += 2;
        return this;
    }

    /**
     * Characters as their low bytes, as Netty's encoder writes header names and values (ISO-8859-1): what the client
     * codec decoded is written back byte for byte.
     */
    HeadBytes latin1(CharSequence s) {
        int n = s.length();
        byte[] b = room(n);
        for (int i = 0; i < n; i++) {
            b[length + i] = (byte) s.charAt(i);
        }
        length += n;
        return this;
    }

    /**
     * A header value the gateway makes (or passes on from a client): a control character or a non-ASCII one becomes
     * {@code '?'}, so no value can end its line early or smuggle a header in (HTTP/1.1 field-value, RFC 9110 §5.5).
     */
    HeadBytes fieldValue(CharSequence s) {
        int n = s.length();
        byte[] b = room(n);
        for (int i = 0; i < n; i++) {
            char c = s.charAt(i);
            b[length + i] = c >= 0x20 && c < 0x7f ? (byte) c : (byte) '?';
        }
        length += n;
        return this;
    }

    HeadBytes decimal(int v) {
        if (v < 0) {
            throw new IllegalArgumentException("negative length " + v);
        }
        int digits = 1;
        for (int x = v; x >= 10; x /= 10) {
            digits++;
        }
        byte[] b = room(digits);
        for (int i = length + digits - 1, x = v; i >= length; i--, x /= 10) {
            b[i] = (byte) ('0' + x % 10);
        }
        length += digits;
        return this;
    }

    int length() {
        return length;
    }

    /** The head so far in a new buffer with room for {@code spare} more bytes (written later, by its owner). */
    ByteBuf toBuffer(ByteBufAllocator alloc, int spare) {
        return alloc.buffer(length + spare).writeBytes(bytes, 0, length);
    }
}
