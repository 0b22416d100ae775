package io.kvgate.ingest.zmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.Test;

class PeerAllowListTest {
    @Test
    void literalsAndCidrBlocksV4AndV6() {
        PeerAllowList a = new PeerAllowList(List.of("10.0.0.7", "192.168.4.0/22", "fd00::/8", "::1"));
        assertTrue(a.allows("10.0.0.7"));
        assertFalse(a.allows("10.0.0.8"));
        assertTrue(a.allows("192.168.7.255"));
        assertFalse(a.allows("192.168.8.0"));
        assertTrue(a.allows("fd12::5"));
        assertFalse(a.allows("fe80::1"));
        assertTrue(a.allows("::1"));
        assertTrue(a.allows("::ffff:10.0.0.7"), "v4-mapped v6 is the v4 address");
        assertFalse(a.allows("not-an-ip"), "ZAP never reports names; anything but a literal is refused");
        assertTrue(new PeerAllowList(List.of()).allows("203.0.113.9"), "an empty list allows every peer");
    }

    @Test
    void entriesThatAreNotLiteralsAreRejectedNamingTheEntry() {
        for (String bad : List.of("example.com", "10.0.0.0/33", "10.0.0.256", "10.0.0.0/x", "")) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> PeerAllowList.parse(bad));
            assertTrue(e.getMessage().startsWith("kv_events_allow=" + bad + " must be"), e.getMessage());
        }
    }

    @Test
    void retryBackoffDoublesAndIsCapped() {
        IngestConfig c = IngestConfig.defaults().withRetry(100_000_000L, 1_000_000_000L);
        assertEquals(100_000_000L, c.retryDelayNs(1));
        assertEquals(200_000_000L, c.retryDelayNs(2));
        assertEquals(800_000_000L, c.retryDelayNs(4));
        assertEquals(1_000_000_000L, c.retryDelayNs(5));
        assertEquals(1_000_000_000L, c.retryDelayNs(10_000), "no overflow however many failures");
        assertEquals(16, IngestConfig.defaults().receiveHighWaterMark(), "256 MiB / 16 MiB frames");
        assertEquals(8, IngestConfig.defaults().withFrames(1 << 20, 8L << 20).receiveHighWaterMark());
    }

    @Test
    void socketReceiveBufferDefaultsTo256KiBAndIsRangeChecked() {
        assertEquals(256 << 10, IngestConfig.defaults().socketReceiveBufferBytes());
        assertEquals(0, IngestConfig.defaults().withSocketReceiveBuffer(0).socketReceiveBufferBytes(), "0 = kernel's");
        assertEquals(1 << 30, IngestConfig.defaults().withSocketReceiveBuffer(1 << 30).socketReceiveBufferBytes());
        for (int bad : new int[] {-1, (1 << 30) + 1, Integer.MIN_VALUE}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> IngestConfig.defaults().withSocketReceiveBuffer(bad));
            assertTrue(e.getMessage().contains("ingest.socket_receive_buffer_bytes=" + bad), e.getMessage());
            assertTrue(e.getMessage().contains("must be in 0..1073741824"), e.getMessage());
        }
        IngestConfig of = IngestConfig.of(1 << 20, 8L << 20, 65_536, 5, 50);
        assertEquals(65_536, of.socketReceiveBufferBytes());
        assertEquals(8, of.receiveHighWaterMark());
    }

    @Test
    void maxPeersPerBindSocketDefaultsTo8AndIsRangeChecked() {
        assertEquals(8, IngestConfig.defaults().maxPeersPerBindSocket());
        assertEquals(8, IngestConfig.of(1 << 20, 8L << 20, 0, 5, 50).maxPeersPerBindSocket());
        assertEquals(1024, IngestConfig.defaults().withMaxPeersPerBindSocket(1024).maxPeersPerBindSocket());
        for (int bad : new int[] {0, -1, 1025}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> IngestConfig.defaults().withMaxPeersPerBindSocket(bad));
            assertTrue(e.getMessage().contains("ingest.max_peers_per_bind_socket=" + bad), e.getMessage());
            assertTrue(e.getMessage().contains("must be in 1..1024"), e.getMessage());
        }
    }

    @Test
    void directBytesPerSubscriptionIsTheWorstOfConnectingAndBoundFromTheConfiguration() {
        // Connecting: SUB + replay DEALER, each JeroMQ read buffer = SO_RCVBUF option (min 8 KiB) + 8 KiB write buffer.
        IngestConfig d = IngestConfig.defaults();
        assertEquals(2 * ((256 << 10) + 8192L), d.directBytesPerSubscription());
        // Bound: up to max_peers_per_bind_socket peers at JeroMQ's minimum (16 KiB) plus the replay DEALER.
        IngestConfig manyPeers = d.withSocketReceiveBuffer(0).withMaxPeersPerBindSocket(100);
        assertEquals(100 * 16384L + 16384L, manyPeers.directBytesPerSubscription());
        assertEquals(16384L, IngestConfig.directBytesPerConnection(0));
        assertEquals((4 << 20) + 8192L, IngestConfig.directBytesPerConnection(4 << 20));
    }
}
