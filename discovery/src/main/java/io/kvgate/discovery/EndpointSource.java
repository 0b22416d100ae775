package io.kvgate.discovery;

/** A running discovery of one rule's endpoints: it reports every change of the set until closed. */
interface EndpointSource extends AutoCloseable {
    /** Begins watching or resolving; returns at once (the first set is reported when found). */
    void start();

    @Override
    void close();
}
