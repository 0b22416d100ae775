package io.kvgate.tools.bench;

/**
 * One request body produced by a {@link PromptWorkload}. A workload may hand out the same instance many times
 * (fixed payload): the driver then caches the encoded HTTP request in {@link #wire} and sends it without copying.
 *
 * <p>Threading: owned by the driver's event loop.
 */
public final class BenchRequest {
    final byte[] body;
    /** Multi-turn: the conversation this turn belongs to; null otherwise. */
    final Object conversation;
    /** The encoded request (head + body) for one target, cached by the driver; released at the end of the run. */
    io.netty.buffer.ByteBuf wire;

    BenchRequest(byte[] body, Object conversation) {
        this.body = body;
        this.conversation = conversation;
    }

    public byte[] body() {
        return body;
    }
}
