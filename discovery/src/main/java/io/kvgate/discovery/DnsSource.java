package io.kvgate.discovery;

import io.kvgate.control.config.DiscoveryConfig;
import io.kvgate.control.log.Log;
import io.netty.buffer.ByteBuf;
import io.netty.channel.AddressedEnvelope;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.nio.NioDatagramChannel;
import io.netty.handler.codec.dns.DefaultDnsQuestion;
import io.netty.handler.codec.dns.DefaultDnsRecordDecoder;
import io.netty.handler.codec.dns.DnsRawRecord;
import io.netty.handler.codec.dns.DnsRecord;
import io.netty.handler.codec.dns.DnsRecordType;
import io.netty.handler.codec.dns.DnsResponse;
import io.netty.handler.codec.dns.DnsResponseCode;
import io.netty.handler.codec.dns.DnsSection;
import io.netty.resolver.dns.DnsNameResolver;
import io.netty.resolver.dns.DnsNameResolverBuilder;
import io.netty.resolver.dns.DnsServerAddressStreamProvider;
import io.netty.resolver.dns.NoopDnsCache;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * {@code discovery.type dns}: the A and AAAA records of a name (a headless Service's: one record per ready pod), each
 * address an endpoint on every configured port; or its SRV records (the lowest priority's targets, each resolved to
 * its addresses, on the record's port, weighted by the record's weight). Resolved again after the answer's smallest
 * TTL, but never later than {@code interval_ms} and never sooner than {@link #MIN_INTERVAL_MS}. The answer is the
 * set: NXDOMAIN or an empty answer is an empty set, while a failure (timeout, SERVFAIL) keeps the last set and
 * retries at the next interval — a name server that stops answering must not take every engine away.
 *
 * <p>Queries go to the name servers of {@code servers} (the host's resolv.conf by default) through Netty's
 * {@link DnsNameResolver}, without its cache: a TTL is honoured here, by when the next query is sent.
 */
final class DnsSource implements EndpointSource {
    /** The soonest a name is resolved again, whatever its TTL (0 is a common TTL for headless Services' records). */
    static final long MIN_INTERVAL_MS = 1_000;
    static final long QUERY_TIMEOUT_MS = 3_000;

    private final String rule;
    private final DiscoveryConfig discovery;
    private final EndpointFactory factory;
    private final ScheduledExecutorService timer;
    private final SourceReport report;
    private final DnsNameResolver resolver;
    private volatile boolean closed;
    private ScheduledFuture<?> next;
    private boolean failing;

    DnsSource(String rule, DiscoveryConfig discovery, EndpointFactory factory, EventLoopGroup loop, ScheduledExecutorService timer,
              DnsServerAddressStreamProvider servers, SourceReport report) {
        this.rule = rule;
        this.discovery = discovery;
        this.factory = factory;
        this.timer = timer;
        this.report = report;
        this.resolver = new DnsNameResolverBuilder(loop.next()).datagramChannelType(NioDatagramChannel.class)
            .nameServerProvider(servers).resolveCache(NoopDnsCache.INSTANCE).queryTimeoutMillis(QUERY_TIMEOUT_MS)
            .recursionDesired(true).build();
    }

    @Override
    public void start() {
        schedule(0);
    }

    private synchronized void schedule(long delayMs) {
        if (!closed) {
            next = timer.schedule(this::resolveOnce, delayMs, TimeUnit.MILLISECONDS);
        }
    }

    /** One resolution (timer thread; it waits for the answers, the event loop does the I/O). */
    private void resolveOnce() {
        long ttlMs;
        try {
            Answer a = "srv".equals(discovery.record()) ? srv() : addresses(discovery.name(), portsOf(discovery));
            if (failing) {
                Log.info("discovery: rule '" + rule + "': " + discovery.name() + " resolves again");
                failing = false;
            }
            report.event("resolve");
            report.accept(a.endpoints());
            ttlMs = a.ttlSeconds() * 1000L;
        } catch (Exception e) {
            report.error();
            if (!failing) {
                Log.warn("discovery: rule '" + rule + "': cannot resolve " + discovery.name() + " (" + e.getMessage()
                    + "); the last endpoints found stay, retrying every " + discovery.intervalMs() + " ms");
                failing = true;
            }
            ttlMs = discovery.intervalMs();
        }
        schedule(Math.max(Math.min(discovery.intervalMs(), MIN_INTERVAL_MS), Math.min(ttlMs, discovery.intervalMs())));
    }

    private static List<Integer> portsOf(DiscoveryConfig d) {
        return d.ports().stream().map(DiscoveryConfig::portNumber).toList();
    }

    /** The endpoints of one answer and its smallest TTL (the interval's when there is no record). */
    private record Answer(List<DiscoveredEndpoint> endpoints, long ttlSeconds) {}

    private Answer addresses(String name, List<Integer> ports) throws Exception {
        List<DiscoveredEndpoint> out = new ArrayList<>();
        long ttl = Long.MAX_VALUE;
        for (DnsRecordType type : List.of(DnsRecordType.A, DnsRecordType.AAAA)) {
            for (DnsRawRecord r : query(name, type)) {
                ByteBuf c = r.content();
                byte[] addr = new byte[c.readableBytes()];
                c.getBytes(c.readerIndex(), addr);
                String ip = InetAddress.getByAddress(addr).getHostAddress();
                ttl = Math.min(ttl, r.timeToLive());
                for (int i = 0; i < ports.size(); i++) {
                    out.add(new DiscoveredEndpoint(factory.endpoint(ip, ports.get(i), kvPort(i), null, 0), false));
                }
                r.release();
            }
        }
        return new Answer(out, ttl == Long.MAX_VALUE ? discovery.intervalMs() / 1000 : ttl);
    }

    private int kvPort(int index) {
        return factory.kvPortOf(discovery.kvEventsPort() == null ? 0 : DiscoveryConfig.portNumber(discovery.kvEventsPort()), index);
    }

    private Answer srv() throws Exception {
        record Srv(int priority, int weight, int port, String target) {}
        List<Srv> records = new ArrayList<>();
        long ttl = Long.MAX_VALUE;
        for (DnsRawRecord r : query(discovery.name(), DnsRecordType.SRV)) {
            ByteBuf c = r.content().duplicate();
            int priority = c.readUnsignedShort();
            int weight = c.readUnsignedShort();
            int port = c.readUnsignedShort();
            // The target may be compressed: the record's content is a view of the whole message, so pointers resolve.
            String target = DefaultDnsRecordDecoder.decodeName(c);
            records.add(new Srv(priority, weight, port, target));
            ttl = Math.min(ttl, r.timeToLive());
            r.release();
        }
        int best = records.stream().mapToInt(Srv::priority).min().orElse(0);
        List<DiscoveredEndpoint> out = new ArrayList<>();
        for (Srv s : records) {
            if (s.priority() != best) {
                continue; // lower-priority targets are a fallback set (RFC 2782); the preferred set is what is routed to
            }
            Answer a = addresses(s.target(), List.of(s.port()));
            ttl = Math.min(ttl, a.ttlSeconds());
            for (DiscoveredEndpoint e : a.endpoints()) {
                var cfg = e.config();
                out.add(new DiscoveredEndpoint(new io.kvgate.control.config.EndpointConfig(cfg.url(), cfg.host(), cfg.port(),
                    Math.max(1, s.weight()), cfg.kvEvents(), cfg.kvEventsBind(), cfg.kvTopic(), cfg.dpRanks(), cfg.kvReplay(),
                    cfg.role(), cfg.bootstrapPort()), false));
            }
        }
        return new Answer(out, ttl == Long.MAX_VALUE ? discovery.intervalMs() / 1000 : ttl);
    }

    /** The answer records of one query (retained copies; the caller releases), empty for NXDOMAIN. */
    private List<DnsRawRecord> query(String name, DnsRecordType type) throws Exception {
        AddressedEnvelope<DnsResponse, InetSocketAddress> env = resolver.query(new DefaultDnsQuestion(name, type))
            .get(QUERY_TIMEOUT_MS * 2, TimeUnit.MILLISECONDS);
        try {
            DnsResponse res = env.content();
            if (res.code() == DnsResponseCode.NXDOMAIN) {
                return List.of();
            }
            if (res.code() != DnsResponseCode.NOERROR) {
                throw new java.io.IOException(type + " " + name + ": " + res.code());
            }
            List<DnsRawRecord> out = new ArrayList<>();
            for (int i = 0; i < res.count(DnsSection.ANSWER); i++) {
                DnsRecord r = res.recordAt(DnsSection.ANSWER, i);
                if (r.type() == type && r instanceof DnsRawRecord raw) {
                    out.add(raw.retainedDuplicate());
                }
            }
            return out;
        } finally {
            env.release();
        }
    }

    @Override
    public synchronized void close() {
        closed = true;
        if (next != null) {
            next.cancel(false);
        }
        resolver.close();
    }
}
