package io.kvgate.dataplane.upstream;

import io.kvgate.dataplane.wire.ResponseHead;
import io.netty.buffer.ByteBuf;
import io.netty.handler.codec.http.HttpContent;

/**
 * Receives one {@link UpstreamLeg}'s response. Called on the leg's event loop only. An exception thrown from any
 * method ends the leg as {@link LegFailure#INTERNAL} and is reported back through {@link #onFailure} (the watchdog).
 */
public interface LegListener {
    /**
     * The request was handed to the engine's socket; {@code connectNs} is the time spent opening a new connection
     * (0 when a pooled one was reused).
     */
    default void onSent(UpstreamLeg leg, long connectNs) {}

    /**
     * The final response head (1xx heads are skipped). Its raw bytes ({@code head.content()}) are borrowed: valid
     * during this call only (copy what the client needs, e.g. {@code RelayHead.relay}); its parsed facts stay
     * readable. To receive the body in one piece instead of chunk by chunk, call {@link UpstreamLeg#aggregate(int)}
     * from here; the body then arrives through {@link #onAggregated}.
     */
    void onHead(UpstreamLeg leg, ResponseHead head);

    /**
     * A streamed body chunk; the listener owns (must release) it. {@code last} ends the response (the leg is then
     * {@link UpstreamLeg.State#DONE}).
     */
    default void onContent(UpstreamLeg leg, HttpContent content, boolean last) {
        content.release();
    }

    /**
     * A read batch ended while streaming. The leg reads nothing more until the listener calls
     * {@link UpstreamLeg#read()} or {@link UpstreamLeg#readAfter} (read-after-write back-pressure).
     */
    default void onReadComplete(UpstreamLeg leg) {
        leg.read();
    }

    /** The whole aggregated body (the leg is {@link UpstreamLeg.State#DONE}); borrowed: released when this returns. */
    default void onAggregated(UpstreamLeg leg, ResponseHead head, ByteBuf body) {}

    /** The leg failed or was ended by the gateway; it has already returned its connection and endpoint load. */
    void onFailure(UpstreamLeg leg, LegFailure failure, Throwable cause);
}
