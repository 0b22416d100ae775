package io.kvgate.dataplane.request;

import io.kvgate.dataplane.wire.JsonText;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.CompositeByteBuf;
import java.nio.charset.StandardCharsets;

/**
 * Adds a member to a JSON object request body without re-serializing it: the body up to its closing brace (a
 * retained slice, no copy) plus {@code ,"name":value}}. The member goes last, and the engines' JSON readers
 * (Python's {@code json}, llama-server's) keep the last of duplicate keys, so a client's own copy of the member
 * cannot override the gateway's. Stateless.
 */
public final class JsonMembers {
    private JsonMembers() {}

    /**
     * {@code body} (a JSON object; its reference is not taken) with {@code "name": rawValue} as its last member.
     *
     * @param rawValue the member's value as JSON text (see {@link #quote} for strings)
     */
    public static ByteBuf append(ByteBuf body, String name, String rawValue, ByteBufAllocator alloc) {
        int close = body.writerIndex() - 1;
        while (close >= body.readerIndex() && body.getByte(close) != '}') {
            close--; // trailing whitespace after the object
        }
        if (close < body.readerIndex()) {
            throw new IllegalArgumentException("not a JSON object");
        }
        int last = close - 1;
        while (last >= body.readerIndex() && isJsonWhitespace(body.getByte(last))) {
            last--;
        }
        boolean empty = last >= body.readerIndex() && body.getByte(last) == '{';
        byte[] tail = ((empty ? "" : ",") + quote(name) + ":" + rawValue + "}").getBytes(StandardCharsets.UTF_8);
        CompositeByteBuf out = alloc.compositeBuffer(2);
        out.addComponent(true, body.retainedSlice(body.readerIndex(), close - body.readerIndex()));
        out.addComponent(true, alloc.buffer(tail.length).writeBytes(tail));
        return out;
    }

    /** {@code s} as a JSON string literal. */
    public static String quote(String s) {
        StringBuilder sb = new StringBuilder(s.length() + 2);
        JsonText.appendQuoted(sb, s);
        return sb.toString();
    }

    private static boolean isJsonWhitespace(byte b) {
        return b == ' ' || b == '\t' || b == '\n' || b == '\r';
    }
}
