package io.kvgate.discovery;

import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.client.informers.ResourceEventHandler;
import io.fabric8.kubernetes.client.informers.SharedIndexInformer;
import io.kvgate.control.log.Log;
import java.util.List;
import java.util.function.Function;

/**
 * A fabric8 informer over one kind of resource whose whole store is converted into an endpoint set after every
 * event. The informer lists, then watches; it re-lists on resync, reconnects a broken watch and starts over from a
 * fresh list when the API server answers 410 Gone (the watch's resource version expired): each of those ends in an
 * event or a resync, so the set reported is always the store's. Nothing is reported before the first list is in, nor
 * when the conversion returns null (a set that would be partial).
 */
final class Informed<T extends HasMetadata> implements AutoCloseable {
    private final String what;
    private final SharedIndexInformer<T> informer;
    private final Function<List<T>, List<DiscoveredEndpoint>> convert;
    private final SourceReport report;
    private volatile boolean closed;
    /** Set while list or watch fail (one warning per outage), cleared by the next successful list. */
    private final java.util.concurrent.atomic.AtomicBoolean failing = new java.util.concurrent.atomic.AtomicBoolean();

    Informed(String what, SharedIndexInformer<T> informer, Function<List<T>, List<DiscoveredEndpoint>> convert,
             SourceReport report) {
        this.what = what;
        this.informer = informer;
        this.convert = convert;
        this.report = report;
        // fabric8 gives up on an informer whose first list fails (an API server not reachable yet, a Role not yet
        // bound): discovery keeps trying instead, with the informer's own back-off, until closed.
        informer.exceptionHandler((started, failure) -> {
            if (!closed) {
                report.error();
            }
            if (!closed && failing.compareAndSet(false, true)) {
                Log.warn("discovery: " + what + ": " + failure.getMessage() + "; retrying");
            }
            return !closed;
        });
        informer.addEventHandler(new ResourceEventHandler<T>() {
            @Override
            public void onAdd(T obj) {
                report.event("add");
                changed();
            }

            @Override
            public void onUpdate(T oldObj, T newObj) {
                report.event("update");
                changed();
            }

            @Override
            public void onDelete(T obj, boolean deletedFinalStateUnknown) {
                report.event("delete");
                changed();
            }
        });
    }

    /** Starts the informer without waiting for the API server: an unreachable one is retried by the informer. */
    void start() {
        informer.start().whenComplete((ok, failed) -> {
            if (failed == null) {
                report.event("list");
                changed(); // the first list is in: report it even when it is empty
            }
            // a failure here is the informer being closed before its first list: nothing to report
        });
    }

    /** Whether the first list is in. */
    boolean synced() {
        return informer.hasSynced();
    }

    /** The informer's store as it is now. */
    List<T> items() {
        return informer.getStore().list();
    }

    /** Converts the store and reports it (any informer thread; the discovery drops repeats). */
    void changed() {
        if (closed || !informer.hasSynced()) {
            return;
        }
        if (failing.compareAndSet(true, false)) {
            Log.info("discovery: " + what + ": listing and watching again");
        }
        List<DiscoveredEndpoint> found = convert.apply(items());
        if (found != null) {
            report.accept(found);
        }
    }

    @Override
    public void close() {
        closed = true;
        informer.close();
    }
}
