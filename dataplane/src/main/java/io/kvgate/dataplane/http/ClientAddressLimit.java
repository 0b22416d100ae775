package io.kvgate.dataplane.http;

import java.net.InetAddress;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.IntSupplier;

/**
 * {@code limits.max_connections_per_client}: open client connections per client address, so one greedy client (a
 * slowloris under {@code max_connections}) cannot hold every slot. Enforced on accept like {@link ConnectionLimit},
 * before anything is read. The address is the TCP peer's: behind a reverse proxy it is the proxy's, which all its
 * clients share. Every open connection is counted, with the limit on or off, so a reload that turns it on or lowers
 * it finds the counts true; an address's entry goes when its last connection closes (memory follows open
 * connections). Thread-safe (accept runs on every I/O thread).
 */
public final class ClientAddressLimit {
    private final ConcurrentHashMap<InetAddress, Integer> open = new ConcurrentHashMap<>();
    private final IntSupplier max;

    /** @param max the limit in effect now, read per accepted connection; 0 for none */
    public ClientAddressLimit(IntSupplier max) {
        this.max = max;
    }

    /** Takes a slot of {@code client}'s; false (nothing taken) when it holds its limit already. */
    public boolean tryAcquire(InetAddress client) {
        int limit = max.getAsInt();
        int n = open.merge(client, 1, Integer::sum);
        if (limit > 0 && n > limit) {
            release(client);
            return false;
        }
        return true;
    }

    /** Returns the slot of a connection of {@code client} that closed (exactly once per successful {@link #tryAcquire}). */
    public void release(InetAddress client) {
        open.computeIfPresent(client, (k, n) -> n == 1 ? null : n - 1);
    }

    /** The connections {@code client} holds open now. */
    public int open(InetAddress client) {
        Integer n = open.get(client);
        return n == null ? 0 : n;
    }

    /** Client addresses with at least one open connection. */
    public int addresses() {
        return open.size();
    }
}
