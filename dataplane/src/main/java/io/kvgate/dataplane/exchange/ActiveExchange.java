package io.kvgate.dataplane.exchange;

/** A request in progress on a client connection. Event-loop only. */
public interface ActiveExchange {
    /** The client went away: cancel engine work and return endpoint load. */
    void onClientGone();
}
