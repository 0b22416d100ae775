package io.kvgate.dataplane.exchange;

/** The client connection's side of an exchange: told once when the response is finished. Event-loop only. */
public interface ExchangeOwner {
    /** @param keepAlive whether the connection may carry the next request */
    void onExchangeDone(boolean keepAlive);

    /** Whether the client connection can take more bytes now (back-pressure). */
    boolean clientWritable();

    /** Registers the action to run when the client connection becomes writable again. */
    void onClientWritable(Runnable action);

    /**
     * The access-log record of the request this exchange answers (the connection's, filled by the front door with
     * what it read); the exchange completes it and logs it when the request ends, before {@link #onExchangeDone}.
     * By default (an owner with no connection behind it) a record of the exchange's own.
     */
    default io.kvgate.dataplane.accesslog.AccessRecord accessRecord() {
        return new io.kvgate.dataplane.accesslog.AccessRecord();
    }
}
