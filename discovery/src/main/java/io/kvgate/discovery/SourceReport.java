package io.kvgate.discovery;

import java.util.List;
import java.util.function.Consumer;

/**
 * Where a source sends what it finds: each complete endpoint set ({@link #accept}), and, for the discovery metrics,
 * each event it saw and each error it hit. Any thread.
 */
interface SourceReport extends Consumer<List<DiscoveredEndpoint>> {
    /** A watch event ({@code add}, {@code update}, {@code delete}), a first list ({@code list}) or a DNS answer ({@code resolve}). */
    void event(String kind);

    /** A failed list or watch (not a 410 Gone: fabric8 lists afresh on its own), or a failed DNS resolution. */
    void error();
}
