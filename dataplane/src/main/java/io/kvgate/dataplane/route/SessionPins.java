package io.kvgate.dataplane.route;

/**
 * The session pin table of one rule: session key hash → (endpoint, expiry), bounded to {@code maxEntries} with the
 * least recently used pin evicted first. Keys are fixed-size hashes ({@link SessionKeys}), so the table's memory is
 * fixed at construction whatever clients send, and no operation allocates: entries live in parallel arrays, an
 * intrusive doubly linked list keeps LRU order, and an open-addressed index (linear probing, backward-shift deletion)
 * finds them. The arrays start small and double (a handful of times over the table's life) up to {@code maxEntries},
 * so a rule with a large bound does not hold its full size until its traffic needs it.
 *
 * <p>Routing stage only (single writer, no synchronization).
 */
final class SessionPins {
    private static final int INITIAL_ENTRIES = 4096;

    private final int capacity;
    private long[] keys;
    private EndpointState[] endpoints;
    private long[] expiresNs;
    private int[] older;
    private int[] newer;
    /** Open-addressed index: entry slot + 1, 0 = empty; at least twice the entry arrays' length. */
    private int[] index;
    private int mask;
    private int size;
    private int oldest = -1;
    private int newest = -1;

    SessionPins(int maxEntries) {
        if (maxEntries < 1) {
            throw new IllegalArgumentException("maxEntries=" + maxEntries + " must be >= 1");
        }
        this.capacity = maxEntries;
        allocate(Math.min(maxEntries, INITIAL_ENTRIES));
    }

    private void allocate(int entries) {
        keys = new long[entries];
        endpoints = new EndpointState[entries];
        expiresNs = new long[entries];
        older = new int[entries];
        newer = new int[entries];
        int slots = Integer.highestOneBit(Math.max(2, entries) * 2 - 1) << 1;
        index = new int[slots];
        mask = slots - 1;
    }

    /** Doubles the arrays (bounded by the capacity), keeping slots, links and LRU order; rebuilds the index. */
    private void grow() {
        long[] k = keys;
        EndpointState[] ep = endpoints;
        long[] ex = expiresNs;
        int[] o = older;
        int[] n = newer;
        allocate((int) Math.min(capacity, 2L * keys.length));
        System.arraycopy(k, 0, keys, 0, size);
        System.arraycopy(ep, 0, endpoints, 0, size);
        System.arraycopy(ex, 0, expiresNs, 0, size);
        System.arraycopy(o, 0, older, 0, size);
        System.arraycopy(n, 0, newer, 0, size);
        for (int e = 0; e < size; e++) {
            insertIntoIndex(keys[e], e);
        }
    }

    int size() {
        return size;
    }

    int capacity() {
        return capacity;
    }

    /** The pinned endpoint of {@code key}, or null (expired pins are returned; the caller checks {@link #expiresNs}). */
    EndpointState endpoint(long key) {
        int e = find(key);
        return e < 0 ? null : endpoints[e];
    }

    /** Expiry of {@code key}'s pin, or {@link Long#MIN_VALUE} when it has none. */
    long expiresNs(long key) {
        int e = find(key);
        return e < 0 ? Long.MIN_VALUE : expiresNs[e];
    }

    /** Pins {@code key} to {@code ep} until {@code untilNs} and makes it the most recently used pin. */
    void pin(long key, EndpointState ep, long untilNs) {
        int e = find(key);
        if (e < 0) {
            if (size == capacity) {
                e = oldest;
                unlink(e);
                removeFromIndex(keys[e]);
            } else {
                if (size == keys.length) {
                    grow();
                }
                e = size++;
            }
            keys[e] = key;
            insertIntoIndex(key, e);
        } else {
            unlink(e);
        }
        endpoints[e] = ep;
        expiresNs[e] = untilNs;
        linkNewest(e);
    }

    /** Takes over the pins of {@code previous} (a configuration swap), oldest first so that LRU order is kept. */
    void copyFrom(SessionPins previous) {
        for (int e = previous.oldest; e >= 0; e = previous.newer[e]) {
            pin(previous.keys[e], previous.endpoints[e], previous.expiresNs[e]);
        }
    }

    private int home(long key) {
        return (int) (key ^ (key >>> 32)) & mask;
    }

    private int find(long key) {
        for (int i = home(key); ; i = (i + 1) & mask) {
            int v = index[i];
            if (v == 0) {
                return -1;
            }
            if (keys[v - 1] == key) {
                return v - 1;
            }
        }
    }

    private void insertIntoIndex(long key, int entry) {
        int i = home(key);
        while (index[i] != 0) {
            i = (i + 1) & mask;
        }
        index[i] = entry + 1;
    }

    private void removeFromIndex(long key) {
        int i = home(key);
        while (keys[index[i] - 1] != key) {
            i = (i + 1) & mask;
        }
        // Backward-shift deletion (Knuth, algorithm R): later entries of the probe run move into the hole unless their
        // home lies cyclically in (hole, position].
        int j = i;
        while (true) {
            j = (j + 1) & mask;
            int v = index[j];
            if (v == 0) {
                break;
            }
            int k = home(keys[v - 1]);
            boolean stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
            if (!stays) {
                index[i] = v;
                i = j;
            }
        }
        index[i] = 0;
    }

    private void unlink(int e) {
        int o = older[e];
        int n = newer[e];
        if (o >= 0) {
            newer[o] = n;
        } else {
            oldest = n;
        }
        if (n >= 0) {
            older[n] = o;
        } else {
            newest = o;
        }
    }

    private void linkNewest(int e) {
        older[e] = newest;
        newer[e] = -1;
        if (newest >= 0) {
            newer[newest] = e;
        } else {
            oldest = e;
        }
        newest = e;
    }
}
