package io.kvgate.dataplane.relay;

import io.netty.buffer.ByteBuf;
import io.netty.util.ByteProcessor;

/**
 * Finds a short byte string ({@code "error"}, {@code "usage"}) in relayed bytes without copying or allocating: one
 * pass of {@link ByteBuf#forEachByte} (which walks a composite buffer's components directly). The needle must not
 * repeat its first byte inside itself (true of a quoted JSON name), so a mismatch only ever restarts at that byte.
 * It replaces Netty's {@code ByteBufUtil.indexOf(ByteBuf, ByteBuf)} in the stream check, which was several times
 * slower per 512-byte read in a smoke run of the JMH {@code SseRewriteBench} ({@code nettyIndexOf} vs
 * {@code byteMatcher}; a loaded machine, so the ratio, not the numbers). One per stream (it holds the match position
 * while it runs); event-loop only. Public (its constructor and {@link #find(ByteBuf)}) for that benchmark, which
 * lives in perf's own package.
 */
public final class ByteMatcher implements ByteProcessor {
    private final byte[] needle;
    private int matched;

    public ByteMatcher(byte[] needle) {
        this.needle = needle;
    }

    /** First index of the needle in {@code b[from, end)}, or -1. */
    int find(ByteBuf b, int from, int end) {
        if (end - from < needle.length) {
            return -1;
        }
        matched = 0;
        int last = b.forEachByte(from, end - from, this);
        return last < 0 ? -1 : last - needle.length + 1;
    }

    /** First index of the needle in {@code b}'s readable bytes, or -1. */
    public int find(ByteBuf b) {
        return find(b, b.readerIndex(), b.writerIndex());
    }

    @Override
    public boolean process(byte value) {
        if (value == needle[matched]) {
            return ++matched != needle.length;
        }
        matched = value == needle[0] ? 1 : 0;
        return true;
    }
}
