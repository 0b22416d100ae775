package io.kvgate.dataplane.route;

import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Iterator;

/**
 * The bounded waiting room of one rule's admission control: requests wait here while every eligible endpoint is
 * saturated, and leave in order of priority class, then fairly across tenants (API keys) within a class.
 *
 * <ul>
 *   <li><b>Order</b>: a waiting {@link PriorityClass#INTERACTIVE} request always leaves before any
 *       {@code STANDARD}, which leaves before any {@code BATCH}.</li>
 *   <li><b>Fairness</b>: within a class, tenants take turns (round robin, one request per turn: every request counts
 *       the same, the queue has no better cost for a request that has not run yet); each tenant's own requests leave
 *       in arrival order. A tenant with 100 waiting requests cannot starve one with a single request.</li>
 *   <li><b>Bound</b>: at most {@code maxQueue} requests wait. An arrival into a full queue displaces the newest request
 *       of the heaviest tenant of the lowest waiting class, if that class is lower than its own; otherwise the arrival
 *       itself is shed. So the lowest class is always shed first.</li>
 *   <li><b>Deadline</b>: no request waits longer than {@code maxWaitNs}: {@link #expire} sheds every request whose
 *       deadline falls before {@code now + slackNs}, where the slack is the caller's longest gap between two calls, so
 *       a request is shed at its deadline at the latest rather than up to one gap after it.</li>
 * </ul>
 *
 * <p>Not thread-safe: one owner (the routing stage's thread). Times come from the caller (an injected clock in
 * tests). Allocates a node per waiting request and a tenant record per tenant that has some waiting; the queue is
 * only used under overload, when the alternative is refusing the request.
 *
 * @param <T> what waits (the routing stage's copy of a request's routing inputs)
 */
public final class AdmissionQueue<T> {
    /** Why a request left the queue without being dispatched. */
    public enum ShedReason {
        /** The queue was full and this request was of the lowest class present (or displaced by a higher class). */
        QUEUE_FULL,
        /** It waited {@code max_wait_ms}. */
        DEADLINE
    }

    /** Receives the requests the queue gives up on; {@code waitedNs} is -1 for an arrival that never entered. */
    public interface ShedSink<T> {
        void shed(T item, PriorityClass cls, ShedReason reason, long waitedNs);
    }

    private static final class Node<T> {
        final T item;
        final PriorityClass cls;
        final Tenant<T> tenant;
        final long enqueuedNs;

        Node(T item, PriorityClass cls, Tenant<T> tenant, long enqueuedNs) {
            this.item = item;
            this.cls = cls;
            this.tenant = tenant;
            this.enqueuedNs = enqueuedNs;
        }
    }

    private static final class Tenant<T> {
        final long id;
        final ArrayDeque<Node<T>> waiting = new ArrayDeque<>();

        Tenant(long id) {
            this.id = id;
        }
    }

    /** One class: its tenants with waiting requests, the next to be served at the head of the rotation. */
    private static final class ClassQueue<T> {
        final HashMap<Long, Tenant<T>> tenants = new HashMap<>();
        final ArrayDeque<Tenant<T>> rotation = new ArrayDeque<>();
        int size;
    }

    private final ClassQueue<T>[] classes;
    private int maxQueue;
    private long maxWaitNs;
    private int size;

    @SuppressWarnings({"unchecked", "rawtypes"})
    public AdmissionQueue(int maxQueue, long maxWaitNs) {
        this.classes = (ClassQueue<T>[]) new ClassQueue[PriorityClass.count()];
        for (int i = 0; i < classes.length; i++) {
            classes[i] = new ClassQueue<>();
        }
        bounds(maxQueue, maxWaitNs);
    }

    /**
     * New bounds (a configuration change). Requests already waiting keep their arrival time; if the queue now holds
     * more than {@code maxQueue}, the caller sheds the excess with {@link #shrink}.
     */
    public void bounds(int maxQueue, long maxWaitNs) {
        if (maxQueue < 0 || maxWaitNs <= 0) {
            throw new IllegalArgumentException("maxQueue=" + maxQueue + " maxWaitNs=" + maxWaitNs);
        }
        this.maxQueue = maxQueue;
        this.maxWaitNs = maxWaitNs;
    }

    public int size() {
        return size;
    }

    public boolean isEmpty() {
        return size == 0;
    }

    /** Requests of {@code cls} waiting now. */
    public int size(PriorityClass cls) {
        return classes[cls.ordinal()].size;
    }

    /**
     * Puts {@code item} in line (or sheds it, or sheds a lower-class request to make room): returns false when
     * {@code item} itself was shed (reported to {@code sink} first).
     */
    public boolean offer(T item, PriorityClass cls, long tenant, long nowNs, ShedSink<T> sink) {
        if (size >= maxQueue) {
            int lowest = lowestWaitingClass();
            if (lowest <= cls.ordinal()) {
                sink.shed(item, cls, ShedReason.QUEUE_FULL, -1);
                return false;
            }
            Node<T> victim = removeNewestOfHeaviestTenant(classes[lowest]);
            sink.shed(victim.item, victim.cls, ShedReason.QUEUE_FULL, nowNs - victim.enqueuedNs);
        }
        ClassQueue<T> q = classes[cls.ordinal()];
        Tenant<T> t = q.tenants.get(tenant);
        if (t == null) {
            t = new Tenant<>(tenant);
            q.tenants.put(tenant, t);
        }
        if (t.waiting.isEmpty()) {
            q.rotation.addLast(t); // a tenant joins the rotation at the back: it waits for the turns already promised
        }
        t.waiting.addLast(new Node<>(item, cls, t, nowNs));
        q.size++;
        size++;
        return true;
    }

    /** The request that leaves next (highest class, the tenant whose turn it is), or null when none waits. */
    public T peek() {
        ClassQueue<T> q = highest();
        return q == null ? null : q.rotation.peekFirst().waiting.peekFirst().item;
    }

    /** The class of {@link #peek()}'s request (null when none waits). */
    public PriorityClass peekClass() {
        ClassQueue<T> q = highest();
        return q == null ? null : q.rotation.peekFirst().waiting.peekFirst().cls;
    }

    /**
     * Removes the request {@link #peek()} returned (it was dispatched) and returns how long it waited; its tenant's
     * turn ends (the tenant moves to the back of its class's rotation if more of its requests wait).
     */
    public long take(long nowNs) {
        ClassQueue<T> q = highest();
        if (q == null) {
            throw new IllegalStateException("nothing waits");
        }
        Tenant<T> t = q.rotation.pollFirst();
        Node<T> n = t.waiting.pollFirst();
        if (t.waiting.isEmpty()) {
            q.tenants.remove(t.id);
        } else {
            q.rotation.addLast(t);
        }
        q.size--;
        size--;
        return nowNs - n.enqueuedNs;
    }

    /**
     * Sheds every request whose deadline ({@code enqueued + maxWait}) is not after {@code nowNs + slackNs}; returns
     * how many.
     */
    public int expire(long nowNs, long slackNs, ShedSink<T> sink) {
        if (size == 0) {
            return 0;
        }
        int shed = 0;
        long latestKept = nowNs + slackNs - maxWaitNs; // a request enqueued at or before this is due
        for (ClassQueue<T> q : classes) {
            if (q.size == 0) {
                continue;
            }
            for (Iterator<Tenant<T>> it = q.rotation.iterator(); it.hasNext(); ) {
                Tenant<T> t = it.next();
                Node<T> n;
                while ((n = t.waiting.peekFirst()) != null && n.enqueuedNs - latestKept <= 0) {
                    t.waiting.pollFirst();
                    q.size--;
                    size--;
                    shed++;
                    sink.shed(n.item, n.cls, ShedReason.DEADLINE, nowNs - n.enqueuedNs);
                }
                if (t.waiting.isEmpty()) {
                    it.remove();
                    q.tenants.remove(t.id);
                }
            }
        }
        return shed;
    }

    /** Sheds lowest-class requests (newest of the heaviest tenant first) until at most {@code maxQueue} wait. */
    public void shrink(long nowNs, ShedSink<T> sink) {
        while (size > maxQueue) {
            Node<T> victim = removeNewestOfHeaviestTenant(classes[lowestWaitingClass()]);
            sink.shed(victim.item, victim.cls, ShedReason.QUEUE_FULL, nowNs - victim.enqueuedNs);
        }
    }

    /** Removes every waiting request, in the order they would have left, handing each to {@code out}. */
    public void drainTo(java.util.function.Consumer<T> out) {
        while (size > 0) {
            T item = peek();
            take(0);
            out.accept(item);
        }
    }

    private ClassQueue<T> highest() {
        for (ClassQueue<T> q : classes) {
            if (q.size > 0) {
                return q;
            }
        }
        return null;
    }

    private int lowestWaitingClass() {
        for (int i = classes.length - 1; i >= 0; i--) {
            if (classes[i].size > 0) {
                return i;
            }
        }
        return -1;
    }

    /**
     * The tenant with the most waiting requests loses its newest one: shedding is as fair as serving. Among equals,
     * the one latest in the rotation (the one that would be served last) loses.
     */
    private Node<T> removeNewestOfHeaviestTenant(ClassQueue<T> q) {
        Tenant<T> heaviest = null;
        for (Tenant<T> t : q.rotation) {
            if (heaviest == null || t.waiting.size() >= heaviest.waiting.size()) {
                heaviest = t;
            }
        }
        Node<T> n = heaviest.waiting.pollLast();
        if (heaviest.waiting.isEmpty()) {
            q.rotation.remove(heaviest);
            q.tenants.remove(heaviest.id);
        }
        q.size--;
        size--;
        return n;
    }
}
