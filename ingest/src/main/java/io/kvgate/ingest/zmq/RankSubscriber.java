package io.kvgate.ingest.zmq;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;

import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZEvent;
import org.zeromq.ZMQ;

/**
 * The sockets, sequence state and supervision state of one (endpoint, DP rank) publisher: a SUB on the live stream,
 * an optional DEALER on the replay ROUTER, and the SUB's connection events ({@link PeerEvents}) for connection state.
 *
 * <p><b>Life cycle</b> ({@link State}): {@code RESOLVING} (hosts are being resolved off the ingest thread) then
 * {@code CONNECTING} (sockets open, no peer yet) and {@code UP} (a peer is connected); any failure to open (a name
 * that does not resolve, a bind port in use, a failing replay socket) or an exception while serving the rank closes
 * its sockets and moves it to {@code RETRYING} until {@link #nextAttemptNs} (capped exponential backoff on the
 * ingest's clock). The sequence tracker survives a retry, so the first batch after it is judged against the last one
 * applied (a gap: replayed or cleared). A connecting SUB whose connection ended and that ZeroMQ will not reconnect
 * ({@link #sessionEnded}: JeroMQ ends the session for good on a protocol error, e.g. a frame over
 * {@code max_frame_bytes}, review B-2) is also closed and retried, and its rank cleared (the feed is lost).
 *
 * <p><b>Threading contract:</b> created, used and closed on the ingest thread only; {@link #status()} is safe from
 * any thread (counters are published with release stores, the state and last error are volatile).
 */
final class RankSubscriber {
    /** Supervision states; {@link #wire()} is what the inventory and metrics show. */
    enum State {
        RESOLVING, CONNECTING, UP, RETRYING;

        String wire() {
            return name().toLowerCase(java.util.Locale.ROOT);
        }
    }

    /** Failure causes (label {@code cause} of {@code kvgate_kv_subscriber_errors_total}). */
    static final String[] CAUSES = {"resolve", "bind", "connect", "replay", "denied", "internal", "protocol"};
    static final int CAUSE_RESOLVE = 0;
    static final int CAUSE_BIND = 1;
    static final int CAUSE_CONNECT = 2;
    static final int CAUSE_REPLAY = 3;
    static final int CAUSE_DENIED = 4;
    static final int CAUSE_INTERNAL = 5;
    /** A peer broke ZMTP: a refused frame size ({@link FrameSizeGuard}) or a connection ZeroMQ ended for good. */
    static final int CAUSE_PROTOCOL = 6;

    /** Per-event limit reasons (an event dropped whole, the rest of its batch applied). */
    static final String[] DROP_REASONS = {"too_many_blocks", "too_many_tokens"};

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
    static final int C_ERRORS = 12; // .. + CAUSES.length
    static final int C_DROPPED = C_ERRORS + CAUSES.length; // .. + DROP_REASONS.length
    private static final int COUNTERS = C_DROPPED + DROP_REASONS.length;

    private static final byte[] EMPTY = new byte[0];
    /**
     * A ZMTP handshake not finished by then is dropped and the connection retried. JeroMQ 0.6.0 stalls the
     * handshake of about one loopback connection in 40 (TCP connected, no handshake event, no data, measured with a
     * bare PUB/SUB pair); with the default 30 s such a subscriber stays silent for 30 s.
     */
    static final int HANDSHAKE_TIMEOUT_MS = 1_000;
    /**
     * A connecting SUB's disconnect not followed by ZeroMQ's reconnect attempt within this long means its session
     * ended for good. JeroMQ raises the attempt ({@code CONNECT_RETRIED}) right after the disconnect, from the same
     * I/O thread, when it will reconnect: only a session that it terminated (a protocol error) or an I/O thread that
     * no longer runs leaves it out.
     */
    static final long SESSION_END_GRACE_NS = 1_000_000_000L;

    final KvEventSource source;
    final int rank;
    final String liveUri;
    final String replayUri;
    final byte[] topic;
    final String zapDomain;
    final SequenceTracker seq = new SequenceTracker();
    private final AtomicLongArray counters = new AtomicLongArray(COUNTERS);
    private final byte[] replayRequest = new byte[8];

    ZMQ.Socket sub;
    ZMQ.Socket dealer;
    /** The connection events of the current opening (a fresh object per opening: a closed SUB's late events land in
     * its own, discarded one). */
    private PeerEvents peerEvents;
    /** The frame-size guard of the current opening's sockets (fresh per opening, as {@link #peerEvents}). */
    private FrameSizeGuard frameGuard;
    private long refusedSeen;
    private final SessionEndWatch sessionEndWatch = new SessionEndWatch();
    private long connectsSeen;
    /** The replay URI with its host resolved (set by {@link #open}). */
    private String replayAddress;

    private volatile State state = State.RESOLVING;
    private volatile String lastError = "";
    /**
     * Consecutive failures: the backoff exponent. Reset once a batch is applied, not when a peer merely connects: an
     * engine that accepts the connection and then breaks the protocol every time must not be retried at the
     * initial delay forever.
     */
    int failures;
    long nextAttemptNs;
    /** Host resolution in flight: {live IP literal, replay IP literal or null}. */
    CompletableFuture<String[]> resolving;

    boolean replaying;
    long replayStartSeq;
    long replayDeadlineNs;
    boolean replayBackoff;
    long replayBackoffUntilNs;
    private int connections;
    private boolean everConnected;

    /** Called on JeroMQ's I/O thread after a connect or disconnect: wakes the agent so status follows at once. */
    private final Runnable onPeerEvent;

    RankSubscriber(KvEventSource source, int rank) {
        this(source, rank, () -> { });
    }

    RankSubscriber(KvEventSource source, int rank, Runnable onPeerEvent) {
        this.onPeerEvent = onPeerEvent;
        this.source = source;
        this.rank = rank;
        this.liveUri = KvEventSource.forRank(source.kvEventsUri(), rank);
        this.replayUri = source.replayUri() == null ? null : KvEventSource.forRank(source.replayUri(), rank);
        this.topic = source.topicBytes();
        // One ZAP domain per rank's socket: the handler learns which socket a peer knocks at (its peer count).
        this.zapDomain = "kvgate-endpoint-" + source.endpointId() + "/" + rank;
        counters.set(C_LAST_SEQ, -1);
    }

    State state() {
        return state;
    }

    boolean isOpen() {
        return sub != null;
    }

    /**
     * Opens the sockets against resolved addresses. On failure every socket opened so far is closed and the
     * exception says which step failed ({@link OpenFailure#cause}).
     */
    void open(ZContext ctx, IngestConfig config, String liveAddress, String replayAddress) {
        this.replayAddress = replayAddress;
        try {
            frameGuard = new FrameSizeGuard(config.maxFrameBytes(), onPeerEvent);
            refusedSeen = 0;
            sessionEndWatch.reset();
            sub = ctx.createSocket(SocketType.SUB);
            sub.setLinger(0);
            // Hostile-input bounds (review H7): JeroMQ reserves a buffer of the size a frame header declares, so the
            // size is capped before any peer can connect; the queue is bounded in bytes via the message count. The
            // guard refuses the negative sizes JeroMQ's own check misses (review B-1, see FrameSizeGuard).
            sub.setMaxMsgSize(config.maxFrameBytes());
            sub.setMsgAllocator(frameGuard);
            sub.setRcvHWM(config.receiveHighWaterMark());
            // Bytes beyond that queue wait in the kernel (bounded by this, raw, no frame header can inflate them)
            // instead of stalling the publisher every time the queue fills (see IngestConfig). JeroMQ also sizes
            // every connection's direct read buffer by it: a bound SUB, which any peer can reach before ZAP has
            // answered, keeps the kernel's default and JeroMQ's 8 KiB (review B-4).
            if (config.socketReceiveBufferBytes() > 0 && !source.bind()) {
                sub.setReceiveBufferSize(config.socketReceiveBufferBytes());
            }
            // An engine that is not up yet is normal: ZMQ keeps retrying; cap the interval so a restart is seen fast.
            sub.setReconnectIVL(100);
            sub.setReconnectIVLMax(5_000);
            sub.setHandshakeIvl(HANDSHAKE_TIMEOUT_MS);
            applySecurity(sub, source.bind());
            // An event hook, not a monitor socket: see PeerEvents.
            peerEvents = new PeerEvents(onPeerEvent);
            connectsSeen = 0;
            if (!sub.setEventHook(peerEvents, ZMQ.EVENT_CONNECTED | ZMQ.EVENT_ACCEPTED | ZMQ.EVENT_DISCONNECTED
                | ZMQ.EVENT_CONNECT_RETRIED)) {
                throw new IllegalStateException("socket event hook refused (context terminated)");
            }
            sub.subscribe(topic);
        } catch (RuntimeException e) {
            close();
            throw new OpenFailure(CAUSE_INTERNAL, "socket setup: " + describe(e), e);
        }
        try {
            if (source.bind()) {
                sub.bind(liveAddress);
            } else {
                sub.connect(liveAddress);
            }
        } catch (RuntimeException e) {
            close();
            throw new OpenFailure(source.bind() ? CAUSE_BIND : CAUSE_CONNECT,
                (source.bind() ? "bind " : "connect ") + liveAddress + ": " + describe(e), e);
        }
        if (replayAddress != null) {
            try {
                openDealer(ctx, config);
            } catch (RuntimeException e) {
                close();
                throw new OpenFailure(CAUSE_REPLAY, "replay connect " + replayAddress + ": " + describe(e), e);
            }
        }
        state = State.CONNECTING;
    }

    private void applySecurity(ZMQ.Socket s, boolean server) {
        KvEventSource.Curve c = source.curve();
        if (c != null) {
            if (server) {
                s.setCurveServer(true);
                s.setCurveSecretKey(ZMQ.Curve.z85Decode(c.ourSecretKey()));
            } else {
                s.setCurveServerKey(ZMQ.Curve.z85Decode(c.serverPublicKey()));
                s.setCurvePublicKey(ZMQ.Curve.z85Decode(c.ourPublicKey()));
                s.setCurveSecretKey(ZMQ.Curve.z85Decode(c.ourSecretKey()));
            }
        }
        if (server) {
            // Every accepted peer goes through the ingest's ZAP handler (allow-list by address; CURVE clients too).
            s.setZapDomain(zapDomain);
        }
    }

    private void openDealer(ZContext ctx, IngestConfig config) {
        dealer = ctx.createSocket(SocketType.DEALER);
        dealer.setLinger(0);
        dealer.setMaxMsgSize(config.maxFrameBytes());
        dealer.setMsgAllocator(frameGuard);
        dealer.setRcvHWM(config.receiveHighWaterMark());
        if (config.socketReceiveBufferBytes() > 0) {
            dealer.setReceiveBufferSize(config.socketReceiveBufferBytes());
        }
        dealer.setReconnectIVL(100);
        dealer.setReconnectIVLMax(5_000);
        dealer.setHandshakeIvl(HANDSHAKE_TIMEOUT_MS);
        applySecurity(dealer, false);
        dealer.connect(replayAddress);
    }

    /** Drops the replay socket (and any late replies of an abandoned request) and opens a fresh one. */
    void resetDealer(ZContext ctx, IngestConfig config) {
        if (dealer != null) {
            dealer.close();
            dealer = null;
        }
        try {
            openDealer(ctx, config);
        } catch (RuntimeException e) {
            if (dealer != null) {
                dealer.close();
                dealer = null;
            }
            throw new OpenFailure(CAUSE_REPLAY, "replay reconnect " + replayAddress + ": " + describe(e), e);
        }
    }

    /** Closes every socket (idempotent); the supervision state is the caller's to set. */
    void close() {
        if (sub != null) {
            sub.close();
            sub = null;
        }
        if (dealer != null) {
            dealer.close();
            dealer = null;
        }
        peerEvents = null;
        frameGuard = null;
        connections = 0;
        replaying = false;
        counters.setRelease(C_CONNECTED, 0);
    }

    /** Counts an error without closing anything (a bound socket keeps serving its other peers). */
    void noteError(int cause, String message) {
        add(C_ERRORS + cause, 1);
        lastError = CAUSES[cause] + ": " + message;
    }

    /** A batch was applied: the feed works, so the next failure starts the backoff from the beginning. */
    void fed() {
        failures = 0;
    }

    /**
     * Frame headers the current opening's {@link FrameSizeGuard} refused since the last call, with the last size in
     * {@code lastSize[0]}; 0 when none (or closed).
     */
    long takeRefusedFrames(int[] lastSize) {
        FrameSizeGuard g = frameGuard;
        if (g == null) {
            return 0;
        }
        long n = g.refused() - refusedSeen;
        if (n > 0) {
            refusedSeen += n;
            lastSize[0] = g.lastRefusedSize();
        }
        return n;
    }

    /**
     * Whether this connecting SUB's connection ended and ZeroMQ will not reconnect it: a disconnect not followed by
     * a reconnect attempt within {@link #SESSION_END_GRACE_NS} on the ingest's clock (see there). A bound SUB's
     * sessions end with their peers, which reconnect by themselves: never.
     */
    boolean sessionEnded(long nowNs) {
        PeerEvents events = peerEvents;
        return events != null && !source.bind() && sessionEndWatch.ended(events.unansweredDisconnect, nowNs);
    }

    /**
     * Times one unanswered disconnect on the ingest's clock: the session ended once the same disconnect is still
     * unanswered {@link #SESSION_END_GRACE_NS} after the agent first saw it. Ingest thread only.
     */
    static final class SessionEndWatch {
        private long seen;
        private long sinceNs;

        void reset() {
            seen = 0;
        }

        /** @param unanswered {@link PeerEvents#unansweredDisconnect} as read now (0 = none) */
        boolean ended(long unanswered, long nowNs) {
            if (unanswered == 0) {
                seen = 0;
                return false;
            }
            if (unanswered != seen) {
                seen = unanswered;
                sinceNs = nowNs;
                return false;
            }
            return nowNs - sinceNs >= SESSION_END_GRACE_NS;
        }
    }

    /** Whether a connecting SUB waits for ZeroMQ's reconnect after a disconnect ({@link #sessionEnded} is due). */
    boolean disconnectUnanswered() {
        PeerEvents events = peerEvents;
        return events != null && !source.bind() && events.unansweredDisconnect != 0;
    }

    /** Live connections of the open SUB as its events count them (accepted or connected, not yet disconnected). */
    int liveConnections() {
        PeerEvents events = peerEvents;
        return events == null ? 0 : (int) Math.max(0, events.connects.get() - events.disconnects.get());
    }

    /** Records a failure: sockets closed, state {@code RETRYING} until {@code now + backoff}. */
    void failed(int cause, String message, long nowNs, IngestConfig config) {
        close();
        if (resolving != null) {
            resolving.cancel(false);
            resolving = null;
        }
        failures++;
        add(C_ERRORS + cause, 1);
        lastError = CAUSES[cause] + ": " + message;
        nextAttemptNs = nowNs + config.retryDelayNs(failures);
        state = State.RETRYING;
    }

    void resolvingStarted() {
        state = State.RESOLVING;
    }

    /** A peer refused by the ZAP handler: counted and shown, the socket stays bound for the allowed peers. */
    void denied(String address) {
        add(C_ERRORS + CAUSE_DENIED, 1);
        lastError = CAUSES[CAUSE_DENIED] + ": peer " + address + " is not in kv_events_allow";
    }

    static String describe(Throwable e) {
        String m = e.getMessage();
        Throwable c = e.getCause();
        if ((m == null || m.isEmpty()) && c != null) {
            m = c.toString();
        }
        return e.getClass().getSimpleName() + (m == null || m.isEmpty() ? "" : " " + m);
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

    /**
     * Takes in the connection events of the open SUB since the last call; returns 1 if the connections changed, else
     * 0 (the duty cycle's work count). Called every duty cycle (two volatile reads when nothing changed), so a state change shows within one poll timeout.
     */
    int pollPeerEvents() {
        PeerEvents events = peerEvents;
        if (events == null) {
            return 0;
        }
        long connects = events.connects.get();
        long disconnects = events.disconnects.get();
        int live = (int) Math.max(0, connects - disconnects);
        long newConnects = connects - connectsSeen;
        if (newConnects == 0 && live == connections) {
            return 0;
        }
        if (newConnects > 0) {
            add(C_RECONNECTS, everConnected ? newConnects : newConnects - 1);
            everConnected = true;
        }
        connectsSeen = connects;
        connections = live;
        counters.setRelease(C_CONNECTED, live > 0 ? 1 : 0);
        if (state != State.RETRYING) {
            state = live > 0 ? State.UP : State.CONNECTING;
        }
        return 1;
    }

    /**
     * A SUB's connection events, counted on JeroMQ's I/O thread as they happen. Not a monitor socket: JeroMQ 0.6.0
     * writes monitor events to its PAIR with a <em>blocking</em> send from the I/O thread, so an event raised after
     * the reading PAIR was closed (a peer disconnecting while a failed subscriber's SUB is still being torn down)
     * blocks that I/O thread for good — and with it every socket of the ingest context: no subscriber connected again
     * (state stuck at {@code connecting}) and {@code ZContext.close} hung. Reproduced by
     * {@code KvEventIngestSystemTest.aReopenedSubscriberSeesItsPeerEveryTime} (about one reopening in 25 under load,
     * the I/O thread's stack in {@code SocketBase.send} from {@code StreamEngine.error}). Counting never blocks.
     */
    static final class PeerEvents implements ZEvent.ZEventConsummer {
        final AtomicLong connects = new AtomicLong();
        final AtomicLong disconnects = new AtomicLong();
        /**
         * The number of the last disconnect not yet followed by a connect or a reconnect attempt, 0 when there is
         * none: written only by the socket's I/O thread, in event order.
         */
        volatile long unansweredDisconnect;
        private final Runnable then;

        PeerEvents(Runnable then) {
            this.then = then;
        }

        /** The raw event, without JeroMQ's per-event {@link ZEvent} wrapper. */
        @Override
        public void consume(zmq.ZMQ.Event event) {
            switch (event.event) {
                case zmq.ZMQ.ZMQ_EVENT_CONNECTED, zmq.ZMQ.ZMQ_EVENT_ACCEPTED -> {
                    connects.incrementAndGet();
                    unansweredDisconnect = 0;
                }
                case zmq.ZMQ.ZMQ_EVENT_DISCONNECTED -> unansweredDisconnect = disconnects.incrementAndGet();
                case zmq.ZMQ.ZMQ_EVENT_CONNECT_RETRIED -> {
                    unansweredDisconnect = 0;
                    return; // no change of connections: no wake-up needed
                }
                default -> {
                    return;
                }
            }
            then.run();
        }

        @Override
        public void consume(ZEvent event) {
            throw new AssertionError("raw events are consumed directly"); // never called: consume(Event) overrides
        }
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
        Map<String, Long> errors = new LinkedHashMap<>();
        for (int c = 0; c < CAUSES.length; c++) {
            long v = get(C_ERRORS + c);
            if (v != 0) {
                errors.put(CAUSES[c], v);
            }
        }
        Map<String, Long> dropped = new LinkedHashMap<>();
        for (int r = 0; r < DROP_REASONS.length; r++) {
            long v = get(C_DROPPED + r);
            if (v != 0) {
                dropped.put(DROP_REASONS[r], v);
            }
        }
        return new SubscriberStatus(source.endpointId(), rank, liveUri, source.label(), state.wire(), lastError,
            errors, get(C_CONNECTED) != 0, get(C_LAST_SEQ), get(C_GAPS), get(C_REPLAYS), get(C_REPLAY_FAILURES),
            get(C_RESTARTS), get(C_RECONNECTS), get(C_DECODE_ERRORS), get(C_CLEARS), get(C_BATCHES), get(C_EVENTS),
            get(C_BLOCK_OPS), dropped);
    }

    /** Why {@link #open} or {@link #resetDealer} failed: a {@link #CAUSES} index and a message for the inventory. */
    static final class OpenFailure extends RuntimeException {
        final int cause;

        OpenFailure(int cause, String message, Throwable e) {
            super(message, e);
            this.cause = cause;
        }
    }
}
