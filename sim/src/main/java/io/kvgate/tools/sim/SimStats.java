package io.kvgate.tools.sim;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayDeque;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Counters of one simulator, served by {@code GET /sim/stats} and {@link EngineSimulator#stats()} so tests can
 * assert which engine got what. Written on the engine event loop, read from anywhere: thread-safe (atomic
 * counters; the recent-request ring is guarded by its own lock). Bounded: a fixed set of counter names and the
 * last {@value #RECENT} requests.
 */
public final class SimStats {
    static final int RECENT = 256;

    private final Map<String, AtomicLong> counters = new ConcurrentHashMap<>();
    private final ArrayDeque<ObjectNode> recent = new ArrayDeque<>();

    void inc(String name) {
        add(name, 1);
    }

    void add(String name, long delta) {
        counters.computeIfAbsent(name, k -> new AtomicLong()).addAndGet(delta);
    }

    /** Current value of a counter (0 when never touched). */
    public long get(String name) {
        AtomicLong v = counters.get(name);
        return v == null ? 0 : v.get();
    }

    void recordRequest(ObjectNode entry) {
        synchronized (recent) {
            if (recent.size() == RECENT) {
                recent.removeFirst();
            }
            recent.addLast(entry);
        }
    }

    /** Snapshot: {"counters":{...sorted...},"recent":[...]} . */
    public ObjectNode toJson() {
        ObjectNode root = JsonNodeFactory.instance.objectNode();
        ObjectNode c = root.putObject("counters");
        new TreeMap<>(counters).forEach((k, v) -> c.put(k, v.get()));
        ArrayNode r = root.putArray("recent");
        synchronized (recent) {
            for (ObjectNode e : recent) {
                r.add(e.deepCopy());
            }
        }
        return root;
    }

    void reset() {
        counters.clear();
        synchronized (recent) {
            recent.clear();
        }
    }
}
