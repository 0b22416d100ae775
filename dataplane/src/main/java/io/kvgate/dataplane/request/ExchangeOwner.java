package io.kvgate.dataplane.request;

/** The client connection's side of an exchange: told once when the response is finished. Event-loop only. */
public interface ExchangeOwner {
    /** @param keepAlive whether the connection may carry the next request */
    void onExchangeDone(boolean keepAlive);

    /** Whether the client connection can take more bytes now (back-pressure). */
    boolean clientWritable();

    /** Registers the action to run when the client connection becomes writable again. */
    void onClientWritable(Runnable action);
}
