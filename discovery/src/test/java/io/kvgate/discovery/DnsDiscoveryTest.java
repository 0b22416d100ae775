package io.kvgate.discovery;

import static org.junit.jupiter.api.Assertions.fail;

import io.kvgate.control.config.GatewayConfig;
import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.DatagramChannel;
import io.netty.channel.socket.nio.NioDatagramChannel;
import io.netty.handler.codec.dns.DatagramDnsQuery;
import io.netty.handler.codec.dns.DatagramDnsQueryDecoder;
import io.netty.handler.codec.dns.DatagramDnsResponse;
import io.netty.handler.codec.dns.DatagramDnsResponseEncoder;
import io.netty.handler.codec.dns.DefaultDnsRawRecord;
import io.netty.handler.codec.dns.DnsQuestion;
import io.netty.handler.codec.dns.DnsRecordType;
import io.netty.handler.codec.dns.DnsResponseCode;
import io.netty.handler.codec.dns.DnsSection;
import io.netty.resolver.dns.SingletonDnsServerAddressStreamProvider;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * DNS discovery against a name server of the test's own on 127.0.0.1 (Netty's DNS codec; never the host's resolver):
 * A and AAAA records become endpoints on the configured ports, SRV records on theirs (the lowest priority only), a
 * changed answer is found again after its TTL, NXDOMAIN empties the set and a failing server keeps the last one.
 */
@Tag("system")
class DnsDiscoveryTest {
    private static final long AWAIT_MS = 20_000;
    private EventLoopGroup group;
    private Channel server;
    /** The zone: name (with the trailing dot) and type to records; absent name = NXDOMAIN. */
    private final Map<String, List<byte[]>> zone = new ConcurrentHashMap<>();
    private final Map<String, Long> ttl = new ConcurrentHashMap<>();
    private volatile boolean servfail;
    /** One permit per query answered: a test awaits queries, not time. */
    private final java.util.concurrent.Semaphore queries = new java.util.concurrent.Semaphore(0);
    private Discovery discovery;
    private final BlockingQueue<List<DiscoveredEndpoint>> reports = new LinkedBlockingQueue<>();

    @BeforeEach
    void startServer() throws Exception {
        group = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory());
        server = new Bootstrap().group(group).channel(NioDatagramChannel.class).handler(new ChannelInitializer<DatagramChannel>() {
            @Override
            protected void initChannel(DatagramChannel ch) {
                ch.pipeline().addLast(new DatagramDnsQueryDecoder(), new DatagramDnsResponseEncoder(),
                    new SimpleChannelInboundHandler<DatagramDnsQuery>() {
                        @Override
                        protected void channelRead0(ChannelHandlerContext ctx, DatagramDnsQuery q) {
                            ctx.writeAndFlush(answer(q));
                            queries.release();
                        }
                    });
            }
        }).bind(InetAddress.getLoopbackAddress(), 0).sync().channel();
    }

    @AfterEach
    void stop() {
        if (discovery != null) {
            discovery.close();
        }
        server.close().syncUninterruptibly();
        group.shutdownGracefully(0, 1, TimeUnit.SECONDS);
    }

    private DatagramDnsResponse answer(DatagramDnsQuery q) {
        DnsQuestion question = q.recordAt(DnsSection.QUESTION);
        DatagramDnsResponse r = new DatagramDnsResponse(q.recipient(), q.sender(), q.id());
        r.addRecord(DnsSection.QUESTION, question);
        if (servfail) {
            r.setCode(DnsResponseCode.SERVFAIL);
            return r;
        }
        String key = question.name() + " " + question.type().name();
        boolean known = zone.keySet().stream().anyMatch(k -> k.startsWith(question.name() + " "));
        if (!known) {
            r.setCode(DnsResponseCode.NXDOMAIN);
            return r;
        }
        for (byte[] rdata : zone.getOrDefault(key, List.of())) {
            r.addRecord(DnsSection.ANSWER, new DefaultDnsRawRecord(question.name(), question.type(),
                ttl.getOrDefault(question.name(), 1L), Unpooled.wrappedBuffer(rdata)));
        }
        return r;
    }

    private void records(String name, DnsRecordType type, List<byte[]> rdata) {
        zone.put(name + ". " + type.name(), rdata);
    }

    private static byte[] ip(String literal) throws Exception {
        return InetAddress.getByName(literal).getAddress();
    }

    /** SRV rdata: priority, weight, port, target (uncompressed labels). */
    private static byte[] srv(int priority, int weight, int port, String target) {
        ByteBuf b = Unpooled.buffer();
        b.writeShort(priority).writeShort(weight).writeShort(port);
        for (String label : target.split("\\.")) {
            b.writeByte(label.length()).writeBytes(label.getBytes(StandardCharsets.US_ASCII));
        }
        b.writeByte(0);
        byte[] out = new byte[b.readableBytes()];
        b.readBytes(out);
        return out;
    }

    private void discover(String discoveryYaml) throws Exception {
        InetSocketAddress ns = (InetSocketAddress) server.localAddress();
        discovery = new Discovery((r, found) -> reports.add(found),
            new Discovery.Clients(() -> { throw new AssertionError("no Kubernetes in DNS mode"); },
                new SingletonDnsServerAddressStreamProvider(ns)));
        discovery.sync(GatewayConfig.parse("rules:\n  - name: dns\n    models: [m]\n    discovery: " + discoveryYaml + "\n"));
    }

    private static List<String> show(List<DiscoveredEndpoint> found) {
        List<String> out = new ArrayList<>();
        for (DiscoveredEndpoint e : found) {
            var c = e.config();
            out.add(c.url() + (c.kvEvents() == null ? "" : " kv=" + c.kvEvents()) + (c.weight() > 1 ? " w=" + c.weight() : ""));
        }
        return out;
    }

    private void await(String... expected) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(AWAIT_MS);
        List<String> last = null;
        while (System.nanoTime() < deadline) {
            List<DiscoveredEndpoint> r = reports.poll(deadline - System.nanoTime(), TimeUnit.NANOSECONDS);
            if (r == null) {
                break;
            }
            last = show(r);
            if (last.equals(List.of(expected))) {
                return;
            }
        }
        fail("no report of " + List.of(expected) + " within " + AWAIT_MS + " ms; last: " + last);
    }

    @Test
    void aAndAaaaRecordsAreEndpointsOnEveryPortAndAChangedAnswerIsFoundAfterItsTtl() throws Exception {
        records("vllm.llm.svc.cluster.local", DnsRecordType.A, List.of(ip("10.0.0.1"), ip("10.0.0.2")));
        records("vllm.llm.svc.cluster.local", DnsRecordType.AAAA, List.of(ip("fd00::7")));
        discover("{type: dns, name: vllm.llm.svc.cluster.local, ports: [8000, 8001], kv_events_port: 5557, interval_ms: 30000}");
        await("http://10.0.0.1:8000 kv=tcp://10.0.0.1:5557", "http://10.0.0.1:8001 kv=tcp://10.0.0.1:5558",
            "http://10.0.0.2:8000 kv=tcp://10.0.0.2:5557", "http://10.0.0.2:8001 kv=tcp://10.0.0.2:5558",
            "http://[fd00:0:0:0:0:0:0:7]:8000 kv=tcp://[fd00:0:0:0:0:0:0:7]:5557",
            "http://[fd00:0:0:0:0:0:0:7]:8001 kv=tcp://[fd00:0:0:0:0:0:0:7]:5558");
        // TTL 1 s (below interval_ms 30 s): the next resolution comes after the TTL and finds the pod that left.
        records("vllm.llm.svc.cluster.local", DnsRecordType.A, List.of(ip("10.0.0.2")));
        records("vllm.llm.svc.cluster.local", DnsRecordType.AAAA, List.of());
        await("http://10.0.0.2:8000 kv=tcp://10.0.0.2:5557", "http://10.0.0.2:8001 kv=tcp://10.0.0.2:5558");
    }

    @Test
    void aFailingServerKeepsTheLastSetAndNxdomainEmptiesIt() throws Exception {
        records("vllm.svc", DnsRecordType.A, List.of(ip("10.0.0.1")));
        discover("{type: dns, name: vllm.svc, ports: [8000], interval_ms: 1000}");
        await("http://10.0.0.1:8000");
        servfail = true;
        queries.drainPermits();
        // Several resolutions answered SERVFAIL meanwhile (one query each at least): nothing is reported.
        if (!queries.tryAcquire(4, AWAIT_MS, TimeUnit.MILLISECONDS)) {
            fail("the name server was not asked again within " + AWAIT_MS + " ms");
        }
        if (!reports.isEmpty()) {
            fail("a failing name server must not change the set: " + show(reports.poll()));
        }
        servfail = false;
        zone.clear();
        await();
    }

    @Test
    void srvRecordsGiveTheirPortsAndWeightsAndOnlyTheLowestPriorityIsRouted() throws Exception {
        records("_http._tcp.vllm.svc", DnsRecordType.SRV, List.of(srv(10, 3, 8000, "pod-a.vllm.svc"),
            srv(10, 1, 8001, "pod-b.vllm.svc"), srv(20, 1, 9000, "backup.vllm.svc")));
        records("pod-a.vllm.svc", DnsRecordType.A, List.of(ip("10.0.0.1")));
        records("pod-b.vllm.svc", DnsRecordType.A, List.of(ip("10.0.0.2")));
        records("backup.vllm.svc", DnsRecordType.A, List.of(ip("10.0.0.9")));
        discover("{type: dns, name: _http._tcp.vllm.svc, record: srv}");
        await("http://10.0.0.1:8000 w=3", "http://10.0.0.2:8001");
    }
}
