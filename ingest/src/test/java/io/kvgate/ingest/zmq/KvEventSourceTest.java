package io.kvgate.ingest.zmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class KvEventSourceTest {

    @Test
    void rankRUsesPortPlusR() {
        assertEquals("tcp://10.0.0.5:5560", KvEventSource.forRank("tcp://10.0.0.5:5557", 3));
        assertEquals("tcp://[::1]:5558", KvEventSource.forRank("tcp://[::1]:5557", 1));
        KvEventSource s = KvEventSource.connect(2, "tcp://h:5557", 8, "tcp://h:5600");
        assertEquals("", s.topic());
        assertEquals(KeyMode.ENGINE, s.keyMode());
    }

    @Test
    void errorsNameFieldValueAndRule() {
        String m = assertThrows(IllegalArgumentException.class,
            () -> KvEventSource.connect(0, "tcp://h:5557", 9, null)).getMessage();
        assertTrue(m.contains("dp_ranks=9") && m.contains("1..8"), m);
        m = assertThrows(IllegalArgumentException.class,
            () -> KvEventSource.connect(0, "tcp://h", 1, null)).getMessage();
        assertTrue(m.startsWith("kv_events=tcp://h"), m);
        m = assertThrows(IllegalArgumentException.class,
            () -> KvEventSource.connect(0, "tcp://h:65535", 2, null)).getMessage();
        assertTrue(m.contains("65535"), m);
        m = assertThrows(IllegalArgumentException.class,
            () -> KvEventSource.connect(0, "tcp://h:5557", 1, "udp://h:1")).getMessage();
        assertTrue(m.startsWith("kv_replay=udp://h:1"), m);
        m = assertThrows(IllegalArgumentException.class,
            () -> KvEventSource.connect(0, "ipc:///tmp/kv", 2, null)).getMessage();
        assertTrue(m.contains("dp_ranks=2"), m);
    }
}
