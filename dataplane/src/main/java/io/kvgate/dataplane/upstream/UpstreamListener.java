package io.kvgate.dataplane.upstream;

import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpResponse;

/** Receives one upstream call's response as it arrives. Called on the call's event loop only. */
public interface UpstreamListener {
    /** How a call ended badly. Only {@link #CONNECT} guarantees the engine never saw the request. */
    enum Failure {
        /** The connection could not be made (or a pooled one was dead before the request left): retry elsewhere. */
        CONNECT,
        /** The connection closed or broke before the response head arrived. */
        EARLY_CLOSE,
        /** The connection closed or broke in the middle of the body. */
        MID_BODY,
        /** No response head within the first-byte timeout. */
        FIRST_BYTE_TIMEOUT,
        /** No bytes for the idle timeout while the body was streaming. */
        IDLE_TIMEOUT
    }

    /**
     * The request was handed to the engine's socket; {@code connectNs} is the time spent opening a new connection
     * (0 when a pooled one was reused).
     */
    default void onSent(UpstreamCall call, long connectNs) {}

    void onResponseHead(UpstreamCall call, HttpResponse head);

    /** A body chunk; the listener owns (must release) it. {@code last} ends the response. */
    void onContent(UpstreamCall call, HttpContent content, boolean last);

    /** Read batch ended: a good moment to flush downstream and decide whether to read more. */
    void onReadComplete(UpstreamCall call);

    void onFailure(UpstreamCall call, Failure failure, Throwable cause);
}
