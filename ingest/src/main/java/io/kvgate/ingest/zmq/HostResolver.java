package io.kvgate.ingest.zmq;

import java.net.InetAddress;
import java.net.UnknownHostException;

/**
 * Turns the host of a {@code kv_events}/{@code kv_replay} URI into an IP literal before a socket connects to it.
 * Resolution is the ingest's, not JeroMQ's, so that a name that does not resolve yet (a Kubernetes headless service
 * at start-up) is an ordinary, retried failure of one subscription, and so that tests can simulate a name that
 * starts resolving later. Called off the ingest thread (on the resolver executor, see {@link KvEventIngest}); must be
 * thread-safe.
 */
@FunctionalInterface
public interface HostResolver {
    /** An IP literal for {@code host}; throws when it does not resolve (the message is shown as the last error). */
    String resolve(String host) throws UnknownHostException;

    /** The JVM's resolver (system DNS, with the JVM's positive/negative caches). */
    HostResolver SYSTEM = host -> InetAddress.getByName(host).getHostAddress();
}
