package io.kvgate.discovery;

import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.kvgate.control.config.DiscoveryConfig;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.control.log.Log;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.nio.NioIoHandler;
import io.netty.resolver.dns.DnsServerAddressStreamProvider;
import io.netty.resolver.dns.DnsServerAddressStreamProviders;
import io.netty.util.concurrent.DefaultThreadFactory;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * Runs one source per rule whose {@code discovery} is not {@code static} and hands each complete endpoint set it finds
 * to the sink (the gateway, which applies it as a reload of that rule's endpoints). {@link #sync} follows the applied
 * configuration: a rule whose discovery settings changed gets a new source, a rule gone or turned static loses its
 * own. Sets are reported on one thread, in order, and only when they differ from the last one reported for the rule.
 *
 * <p>The Kubernetes client and the DNS event loop are made on first use and shared by every rule's source.
 */
public final class Discovery implements AutoCloseable {
    /** Where sources reach Kubernetes and DNS (tests inject a mock API server's client and a DNS server on loopback). */
    public record Clients(Supplier<KubernetesClient> kubernetes, DnsServerAddressStreamProvider dnsServers) {
        /** The client configured as fabric8 does (in a pod: its service account), and the host's name servers. */
        public static Clients defaults() {
            return new Clients(() -> new KubernetesClientBuilder().build(), DnsServerAddressStreamProviders.platformDefault());
        }
    }

    /** What a source was started for: a change of any of it restarts the source. */
    private record Spec(DiscoveryConfig discovery, String engine, String policy) {
        static Spec of(RuleConfig r) {
            return new Spec(r.discovery(), r.engine(), r.policy());
        }
    }

    private record Running(Spec spec, EndpointSource source) {}

    private final EndpointSink sink;
    private final Clients clients;
    /** Reports are applied here, one at a time: the sink may take as long as a reload takes. */
    private final ExecutorService reports = Executors.newSingleThreadExecutor(new DefaultThreadFactory("kvgate-discovery", true));
    private final Map<String, Running> running = new HashMap<>();
    private final Map<String, List<DiscoveredEndpoint>> lastReported = new HashMap<>();
    private KubernetesClient kubernetes;
    private EventLoopGroup dnsLoop;
    private ScheduledExecutorService dnsTimer;
    private boolean closed;

    private final DiscoveryMetrics metrics;
    private final io.kvgate.control.clock.NanoClock clock;

    public Discovery(EndpointSink sink, Clients clients) {
        this(sink, clients, DiscoveryMetrics.unregistered(), System::nanoTime);
    }

    /** With its metrics and the clock the apply time is read on (tests inject one). */
    public Discovery(EndpointSink sink, Clients clients, DiscoveryMetrics metrics, io.kvgate.control.clock.NanoClock clock) {
        this.sink = Objects.requireNonNull(sink);
        this.clients = Objects.requireNonNull(clients);
        this.metrics = Objects.requireNonNull(metrics);
        this.clock = Objects.requireNonNull(clock);
    }

    /** The discovery's metric families. */
    public DiscoveryMetrics metrics() {
        return metrics;
    }

    /** Starts, restarts or stops sources so that exactly the discovered rules of {@code config} have one. */
    public synchronized void sync(GatewayConfig config) {
        if (closed) {
            return;
        }
        Map<String, Spec> wanted = new HashMap<>();
        for (RuleConfig r : config.rules()) {
            if (!r.discovery().isStatic()) {
                wanted.put(r.name(), Spec.of(r));
            }
        }
        for (String rule : List.copyOf(running.keySet())) {
            Running r = running.get(rule);
            if (!r.spec().equals(wanted.get(rule))) {
                running.remove(rule);
                lastReported.remove(rule);
                r.source().close();
                metrics.forget(rule, sourceLabel(r.spec().discovery()));
                Log.info("discovery: rule '" + rule + "' stopped watching " + describe(r.spec().discovery()));
            }
        }
        for (RuleConfig r : config.rules()) {
            if (wanted.containsKey(r.name()) && !running.containsKey(r.name())) {
                EndpointSource s = newSource(r);
                running.put(r.name(), new Running(Spec.of(r), s));
                s.start();
                Log.info("discovery: rule '" + r.name() + "' watches " + describe(r.discovery()));
            }
        }
    }

    /** Whether a rule has a running source (it is discovered and {@link #sync} has seen it). */
    public synchronized boolean discovers(String rule) {
        return running.containsKey(rule);
    }

    private EndpointSource newSource(RuleConfig r) {
        String rule = r.name();
        EndpointFactory f = new EndpointFactory(r);
        String source = sourceLabel(r.discovery());
        SourceReport report = new SourceReport() {
            @Override
            public void accept(List<DiscoveredEndpoint> found) {
                report(rule, source, found);
            }

            @Override
            public void event(String kind) {
                metrics.event(rule, source, kind);
            }

            @Override
            public void error() {
                metrics.error(rule, source);
            }
        };
        return switch (r.discovery().typeKind()) {
            case DNS -> new DnsSource(rule, r.discovery(), f, dnsLoop(), dnsTimer(), clients.dnsServers(), report);
            case KUBERNETES -> r.discovery().service() != null
                ? new SliceSource(rule, kubernetes(), namespace(r.discovery()), r.discovery(), f, report)
                : new PodSource(rule, kubernetes(), namespace(r.discovery()), roles(r.discovery()), r.discovery().ports(), r.discovery(),
                    f, report);
            case INFERENCE_POOL -> new PoolSource(rule, kubernetes(), namespace(r.discovery()), r.discovery(), f, report);
            case STATIC -> throw new IllegalArgumentException("rule '" + rule + "' is static");
        };
    }

    /** The label selector of each role (null = no P/D role). */
    private static Map<String, Map<String, String>> roles(DiscoveryConfig d) {
        Map<String, Map<String, String>> out = new java.util.LinkedHashMap<>();
        if (!d.selector().isEmpty()) {
            out.put(null, d.selector());
        } else {
            out.put("prefill", d.prefillSelector());
            out.put("decode", d.decodeSelector());
        }
        return out;
    }

    private String namespace(DiscoveryConfig d) {
        if (d.namespace() != null) {
            return d.namespace();
        }
        String own = kubernetes().getNamespace(); // in a pod: its service account's namespace file
        return own != null ? own : "default";
    }

    private KubernetesClient kubernetes() {
        if (kubernetes == null) {
            kubernetes = clients.kubernetes().get();
        }
        return kubernetes;
    }

    private EventLoopGroup dnsLoop() {
        if (dnsLoop == null) {
            dnsLoop = new MultiThreadIoEventLoopGroup(1, new DefaultThreadFactory("kvgate-dns", true), NioIoHandler.newFactory());
        }
        return dnsLoop;
    }

    private ScheduledExecutorService dnsTimer() {
        if (dnsTimer == null) {
            dnsTimer = Executors.newSingleThreadScheduledExecutor(new DefaultThreadFactory("kvgate-dns-timer", true));
        }
        return dnsTimer;
    }

    /** {@code source} of the discovery metrics: the rule's {@code discovery.type}. */
    static String sourceLabel(DiscoveryConfig d) {
        return d.typeKind().name().toLowerCase(java.util.Locale.ROOT);
    }

    /**
     * A source's complete set (any thread, right after the event that produced it): applied on the report thread if
     * the source still runs and it changed; the time from here to the sink's return is the apply time.
     */
    private void report(String rule, String source, List<DiscoveredEndpoint> found) {
        long eventNs = clock.nanoTime();
        List<DiscoveredEndpoint> sorted = new ArrayList<>(found);
        sorted.sort(Comparator.comparing((DiscoveredEndpoint e) -> e.config().key()));
        List<DiscoveredEndpoint> set = List.copyOf(sorted);
        try {
            reports.execute(() -> {
                synchronized (this) {
                    if (closed || !running.containsKey(rule) || set.equals(lastReported.get(rule))) {
                        return;
                    }
                    lastReported.put(rule, set);
                }
                try {
                    sink.endpoints(rule, set);
                    metrics.applied(rule, source, set, clock.nanoTime() - eventNs);
                } catch (RuntimeException e) {
                    Log.warn("discovery: rule '" + rule + "': the endpoints found could not be applied: " + e);
                }
            });
        } catch (java.util.concurrent.RejectedExecutionException e) {
            // closed meanwhile: nothing to apply to
        }
    }

    static String describe(DiscoveryConfig d) {
        return switch (d.typeKind()) {
            case DNS -> "DNS " + d.record().toUpperCase(java.util.Locale.ROOT) + " " + d.name();
            case KUBERNETES -> d.service() != null ? "the EndpointSlices of Service " + d.service()
                : "the pods labelled " + (d.selector().isEmpty() ? "prefill " + d.prefillSelector() + ", decode " + d.decodeSelector()
                    : d.selector().toString());
            case INFERENCE_POOL -> "InferencePool " + d.pool();
            case STATIC -> "its own endpoints";
        };
    }

    @Override
    public void close() {
        List<Running> stop;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            stop = List.copyOf(running.values());
            running.clear();
        }
        stop.forEach(r -> r.source().close());
        reports.shutdownNow();
        if (dnsTimer != null) {
            dnsTimer.shutdownNow();
        }
        if (dnsLoop != null) {
            dnsLoop.shutdownGracefully(0, 1, TimeUnit.SECONDS);
        }
        if (kubernetes != null) {
            kubernetes.close();
        }
    }
}
