package io.kvgate.dataplane.exchange;

import io.kvgate.control.log.Log;
import io.kvgate.dataplane.route.EndpointState;
import io.netty.channel.EventLoop;
import io.netty.util.concurrent.FastThreadLocal;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The exchanges in progress, so the drain deadline can end them cleanly (live streams get an error frame and
 * {@code [DONE]} instead of a silent cut). One intrusive list per event loop, touched only by that loop: joining and
 * leaving cost two field writes and no allocation.
 */
public final class LiveExchanges {
    /** An exchange that can be listed. Its list fields belong to {@link LiveExchanges}. */
    public abstract static class Entry {
        private Entry prev;
        private Entry next;
        private PerLoop list;

        /** The drain deadline passed: end now (error frame + {@code [DONE]} on a stream, 503 before a response). On the entry's loop. */
        protected abstract void endForDrain();

        /**
         * The health probe found {@code ep} down: an exchange waiting on it must not wait for its timeouts (an engine
         * stopped with SIGTERM keeps its open connections silent). On the entry's loop; the default ignores it.
         */
        protected void onEndpointDown(EndpointState ep) {}

        /**
         * {@code ctl drain ENDPOINT --migrate}: a live stream on {@code ep} moves to another endpoint now if it can
         * (mid-stream failover), else it may finish until {@code withinMs} and is then ended with an error event.
         */
        protected void onMigrateOff(EndpointState ep, long withinMs) {}
    }

    private static final class PerLoop {
        final EventLoop loop;
        Entry head;

        PerLoop(EventLoop loop) {
            this.loop = loop;
        }
    }

    private final List<PerLoop> loops = new CopyOnWriteArrayList<>();
    private final FastThreadLocal<PerLoop> local = new FastThreadLocal<>();

    /** Lists {@code e} as live on {@code loop} (the calling thread). */
    public void add(EventLoop loop, Entry e) {
        if (e.list != null) {
            return;
        }
        PerLoop p = local.get();
        if (p == null || p.loop != loop) {
            p = new PerLoop(loop);
            local.set(p);
            loops.add(p);
        }
        e.list = p;
        e.prev = null;
        e.next = p.head;
        if (p.head != null) {
            p.head.prev = e;
        }
        p.head = e;
    }

    /** Unlists {@code e} (no-op if it is not listed). On the loop it was added on. */
    public void remove(Entry e) {
        PerLoop p = e.list;
        if (p == null) {
            return;
        }
        if (e.prev != null) {
            e.prev.next = e.next;
        } else {
            p.head = e.next;
        }
        if (e.next != null) {
            e.next.prev = e.prev;
        }
        e.prev = null;
        e.next = null;
        e.list = null;
    }

    /**
     * Ends every listed exchange on its own loop and waits up to {@code waitMs} for the loops to have done it.
     * Returns how many exchanges were ended.
     */
    public int endAll(long waitMs) {
        CountDownLatch done = new CountDownLatch(loops.size());
        AtomicInteger ended = new AtomicInteger();
        onEveryLoop(p -> {
            try {
                Entry e = p.head;
                while (e != null) {
                    Entry next = e.next;
                    remove(e);
                    ended.incrementAndGet();
                    try {
                        e.endForDrain();
                    } catch (RuntimeException ex) {
                        Log.error("ending an exchange at the drain deadline failed: " + ex);
                    }
                    e = next;
                }
            } finally {
                done.countDown();
            }
        }, done::countDown);
        try {
            done.await(waitMs, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return ended.get();
    }

    /**
     * Tells every listed exchange, each on its own loop, that the health probe found {@code ep} down. Does not wait:
     * the exchanges fail over or end on their loops.
     */
    public void endpointDown(EndpointState ep) {
        onEveryLoop(p -> {
            Entry e = p.head;
            while (e != null) {
                Entry next = e.next; // the exchange may finish, and leave the list, while it handles this
                try {
                    e.onEndpointDown(ep);
                } catch (RuntimeException ex) {
                    Log.error("failing an exchange over from a down endpoint failed: " + ex);
                }
                e = next;
            }
        }, () -> {});
    }

    /** {@code ctl drain ENDPOINT --migrate}: every listed exchange on {@code ep} moves off it (see {@link Entry#onMigrateOff}). */
    public void migrateOff(EndpointState ep, long withinMs) {
        onEveryLoop(p -> {
            Entry e = p.head;
            while (e != null) {
                Entry next = e.next;
                try {
                    e.onMigrateOff(ep, withinMs);
                } catch (RuntimeException ex) {
                    Log.error("moving an exchange off a drained endpoint failed: " + ex);
                }
                e = next;
            }
        }, () -> {});
    }

    /**
     * Runs {@code task} on each loop that listed an exchange, on that loop; {@code shutDown} instead for a loop already
     * shut down (nothing of it is live).
     */
    private void onEveryLoop(java.util.function.Consumer<PerLoop> task, Runnable shutDown) {
        for (PerLoop p : loops) {
            try {
                p.loop.execute(() -> task.accept(p));
            } catch (java.util.concurrent.RejectedExecutionException ex) {
                shutDown.run();
            }
        }
    }
}
