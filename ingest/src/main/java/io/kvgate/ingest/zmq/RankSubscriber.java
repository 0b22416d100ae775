package io.kvgate.ingest.zmq;

import java.util.concurrent.atomic.AtomicLongArray;

import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZEvent;
import org.zeromq.ZMQ;
import org.zeromq.ZMonitor;

/**
 * The sockets and sequence state of one (endpoint, DP rank) publisher: a SUB on the live stream, an optional
 * DEALER on the replay ROUTER, and a PAIR reading the SUB's socket monitor for connection state.
 *
 * <p><b>Threading contract:</b> created, used and closed on the ingest thread only; {@link #status()} is safe from
 * any thread (counters are published with release stores).
 */
final class RankSubscriber {
    static final int C_LAST_SEQ = 0;
    static final int C_GAPS = 1;
    static final int C_REPLAYS = 2;
    static final int C_REPLAY_FAILURES = 3;
    static final int C_RESTARTS = 4;
    static final int C_RECONNECTS = 5;
    static final int C_DECODE_ERRORS = 6;
    static final int C_CLEARS = 7;
    static final int C_BATCHES = 8;
    static final int C_EVENTS = 9;
    static final int C_BLOCK_OPS = 10;
    static final int C_CONNECTED = 11;
    private static final int COUNTERS = 12;

    private static final byte[] EMPTY = new byte[0];

    final KvEventSource source;
    final int rank;
    final String liveUri;
    final String replayUri;
    final byte[] topic;
    final SequenceTracker seq = new SequenceTracker();
    private final AtomicLongArray counters = new AtomicLongArray(COUNTERS);
    private final byte[] replayRequest = new byte[8];

    ZMQ.Socket sub;
    ZMQ.Socket dealer;
    ZMQ.Socket monitor;
    private final String monitorAddress;

    boolean replaying;
    long replayStartSeq;
    long replayDeadlineNs;
    boolean replayBackoff;
    long replayBackoffUntilNs;
    private int connections;
    private boolean everConnected;

    RankSubscriber(KvEventSource source, int rank, int uniqueId) {
        this.source = source;
        this.rank = rank;
        this.liveUri = KvEventSource.forRank(source.kvEventsUri(), rank);
        this.replayUri = source.replayUri() == null ? null : KvEventSource.forRank(source.replayUri(), rank);
        this.topic = source.topicBytes();
        this.monitorAddress = "inproc://kvgate-ingest-monitor-" + uniqueId;
        counters.set(C_LAST_SEQ, -1);
    }

    void open(ZContext ctx, int receiveHighWaterMark) {
        sub = ctx.createSocket(SocketType.SUB);
        sub.setLinger(0);
        sub.setRcvHWM(receiveHighWaterMark);
        // An engine that is not up yet is normal: ZMQ keeps retrying; cap the interval so a restart is seen fast.
        sub.setReconnectIVL(100);
        sub.setReconnectIVLMax(5_000);
        sub.monitor(monitorAddress, ZMQ.EVENT_CONNECTED | ZMQ.EVENT_ACCEPTED | ZMQ.EVENT_DISCONNECTED);
        monitor = ctx.createSocket(SocketType.PAIR);
        monitor.setLinger(0);
        monitor.connect(monitorAddress);
        sub.subscribe(topic);
        if (source.bind()) {
            sub.bind(liveUri);
        } else {
            sub.connect(liveUri);
        }
        if (replayUri != null) {
            openDealer(ctx);
        }
    }

    void openDealer(ZContext ctx) {
        dealer = ctx.createSocket(SocketType.DEALER);
        dealer.setLinger(0);
        dealer.setReconnectIVL(100);
        dealer.setReconnectIVLMax(5_000);
        dealer.connect(replayUri);
    }

    /** Drops the replay socket (and any late replies of an abandoned request) and opens a fresh one. */
    void resetDealer(ZContext ctx) {
        if (dealer != null) {
            dealer.close();
            dealer = null;
        }
        openDealer(ctx);
    }

    void close(ZContext ctx) {
        if (sub != null) {
            sub.close();
            sub = null;
        }
        if (dealer != null) {
            dealer.close();
            dealer = null;
        }
        if (monitor != null) {
            monitor.close();
            monitor = null;
        }
        counters.setRelease(C_CONNECTED, 0);
    }

    /**
     * Sends a replay request: an empty delimiter frame then the 8-byte big-endian start seq, so a ROUTER written for
     * REQ clients (vLLM reads exactly [identity, "", seq]) accepts it.
     */
    boolean requestReplay(long startSeq, long nowNs, long timeoutNs) {
        for (int i = 0; i < 8; i++) {
            replayRequest[i] = (byte) (startSeq >>> (56 - 8 * i));
        }
        if (!dealer.sendMore(EMPTY) || !dealer.send(replayRequest, ZMQ.DONTWAIT)) {
            return false;
        }
        replaying = true;
        replayStartSeq = startSeq;
        replayDeadlineNs = nowNs + timeoutNs;
        add(C_REPLAYS, 1);
        return true;
    }

    boolean replayAvailable(long nowNs) {
        return dealer != null && (!replayBackoff || nowNs - replayBackoffUntilNs >= 0);
    }

    /** Drains socket-monitor events; returns how many. Allocates one event object each: connection changes only. */
    int pollMonitor() {
        int n = 0;
        ZEvent e;
        while ((e = ZEvent.recv(monitor, ZMQ.DONTWAIT)) != null) {
            n++;
            ZMonitor.Event ev = e.getEvent();
            if (ev == ZMonitor.Event.CONNECTED || ev == ZMonitor.Event.ACCEPTED) {
                if (everConnected) {
                    add(C_RECONNECTS, 1);
                }
                everConnected = true;
                connections++;
            } else if (ev == ZMonitor.Event.DISCONNECTED) {
                connections = Math.max(0, connections - 1);
            }
            counters.setRelease(C_CONNECTED, connections > 0 ? 1 : 0);
        }
        return n;
    }

    void add(int counter, long delta) {
        counters.setRelease(counter, counters.getPlain(counter) + delta);
    }

    void set(int counter, long value) {
        counters.setRelease(counter, value);
    }

    long get(int counter) {
        return counters.getAcquire(counter);
    }

    SubscriberStatus status() {
        return new SubscriberStatus(source.endpointId(), rank, liveUri, get(C_CONNECTED) != 0, get(C_LAST_SEQ),
            get(C_GAPS), get(C_REPLAYS), get(C_REPLAY_FAILURES), get(C_RESTARTS), get(C_RECONNECTS),
            get(C_DECODE_ERRORS), get(C_CLEARS), get(C_BATCHES), get(C_EVENTS), get(C_BLOCK_OPS));
    }
}
