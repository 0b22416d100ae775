package io.kvgate.ingest.zmq;

import io.kvgate.control.log.Log;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.Pipe;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.agrona.concurrent.Agent;
import org.agrona.concurrent.AgentRunner;
import org.agrona.concurrent.AgentTerminationException;
import org.agrona.concurrent.NoOpIdleStrategy;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.LearnedKeyMap;
import io.kvgate.ingest.codec.KvEventDecoder;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * KV-event ingest, a supervised agent in Agrona's duty-cycle style: one JeroMQ SUB per (endpoint, DP rank), all
 * polled by ONE ingest thread that decodes the msgpack payloads and is the single writer of the {@link BlockIndex}.
 * Ingest never blocks the data plane: the routing thread only reads the index.
 *
 * <p><b>Supervision</b> (review H6): every step of the duty cycle is guarded. A subscription that cannot be opened
 * (a {@code kv_events}/{@code kv_replay} name that does not resolve yet, a bind port in use, a replay socket that
 * cannot be re-opened) or that throws while being served is closed and retried with capped exponential backoff
 * ({@link IngestConfig#retryDelayNs}) on the injected clock; it shows as state {@code retrying} with its last error
 * in {@link #status()}. Nothing one endpoint sends or fails at stops ingest for the others, and an exception that
 * escapes a whole duty cycle is counted ({@link #agentErrors()}) and the loop goes on. Host names are resolved by a
 * {@link HostResolver} on a resolver executor, never on the ingest thread (a slow DNS answer stalls no one).
 *
 * <p><b>Commands are bounded</b>: {@link #addEndpoint}/{@link #removeEndpoint} record the wanted state per endpoint
 * id (latest wins, at most {@code maxEndpoints} entries) and the agent reconciles on its next cycle, so the pending
 * work can never grow beyond the endpoint count, even while a cycle is slow.
 *
 * <p><b>Hostile input</b> (review H7): see {@link RankSubscriber#open} for the per-socket bounds. In bind mode every
 * connecting peer is checked by this agent's ZAP handler (the endpoint's {@code kv_events_allow} list, and at most
 * {@link IngestConfig#maxPeersPerBindSocket} connections per bound socket, review B-4); refused peers are counted on
 * the endpoint's subscribers ({@code denied}). A frame size JeroMQ would mishandle is refused by
 * {@link FrameSizeGuard} (review B-1): counted as {@code protocol} on the subscriber and logged; a connecting
 * subscription, whose one peer is the engine, is then reopened and its rank cleared.
 *
 * <p><b>The ZeroMQ context</b> (review B-1): errors JeroMQ's threads report are counted and logged (the 1st, 2nd,
 * 4th, 8th, ...: a peer repeating one must not flood the log). A thread of the context that died (an
 * {@link Error} escapes JeroMQ's loop, e.g. direct memory exhausted) leaves every socket of that context dead, so the
 * agent then abandons the context (terminated on a daemon thread, since termination waits for the dead thread),
 * clears the ranks it fed and reopens every subscription on a fresh one with the retry backoff.
 *
 * <p><b>Sequence handling per rank</b> (engine-contracts §2.3): batches in order are applied; a forward jump is
 * filled by replay when a replay endpoint is configured (a DEALER sends the 8-byte big-endian start seq to the
 * engine's ROUTER; replies {@code [.., seq, payload]} end with seq -1 or an empty payload; while a replay runs the
 * rank's SUB is not read, so live batches wait in its bounded queue and those the replay already covered are
 * skipped). A gap replay cannot fill (the engine's buffer moved on, or the replay timed out) clears the rank, as
 * do a seq going backwards (engine restart), an AllBlocksCleared, and a malformed payload (its lost part may have
 * held removals: a phantom block is a correctness bug, a cold window only costs performance). A clear is O(1) in
 * the index ({@link BlockIndex#clearRank}), so a stream of forged or broken frames costs O(1) per frame.
 *
 * <p><b>Threading contract:</b> {@link #addEndpoint}, {@link #removeEndpoint}, {@link #status} and
 * {@link #close} are thread-safe. {@link #start()} runs the duty cycle as an Agrona agent on a thread of its own; tests may instead call
 * {@link #doWork(long)} from one thread. {@link #close()} returns only once the ingest thread has stopped writing,
 * so the index may be closed after it (review L12).
 */
public final class KvEventIngest implements AutoCloseable {
    private static final int KIND_SUB = 0;
    private static final int KIND_DEALER = 1;
    private static final int KIND_ZAP = 2;
    private static final int KIND_WAKE = 3;
    /**
     * How long one duty cycle waits for socket activity while something is due on a clock (a retry, a host
     * resolution, a replay deadline, a TensorRT-LLM poll) or the last cycles did work.
     */
    static final long ACTIVE_POLL_MS = 10;
    /**
     * How long it waits once nothing is due on a clock (every subscription open, none replaying, no HTTP endpoint,
     * no change pending) and the last {@link #IDLE_CYCLES_BEFORE_BACKOFF} cycles found nothing to do. What can give
     * it work then wakes the poll at once: a message on a socket, {@link #addEndpoint}/{@link #removeEndpoint}/
     * {@link #stop}, a peer's connect or disconnect ({@link #wake()}). With the 10 ms poll kept while idle this
     * thread woke 100 times a second, about 1% of the gateway's core on an idle host (perf/idle-cost.sh).
     */
    static final long IDLE_POLL_MS = 500;
    static final int IDLE_CYCLES_BEFORE_BACKOFF = 10;
    /** Where JeroMQ sends ZAP requests (RFC 27); one handler per context. */
    private static final String ZAP_ENDPOINT = "inproc://zeromq.zap.01";

    private final BlockIndex index;
    private final NanoClock clock;
    private final IngestConfig config;
    private final HostResolver resolver;
    private final Executor resolverExecutor;
    private final ExecutorService ownedResolverExecutor;
    /** Replaced when one of its threads dies ({@link #rebuildContext}); used by the ingest thread only. */
    private ZContext ctx;
    /** Set by a dying JeroMQ thread of {@link #ctx}; the agent rebuilds the context on its next cycle. */
    private volatile Throwable contextDied;
    private final AtomicLong contextRebuilds = new AtomicLong();
    private final AtomicLong refusedFrames = new AtomicLong();
    private final AtomicLong sessionsEnded = new AtomicLong();
    private final int[] refusedSize = new int[1];
    private final KvEventDecoder decoder;
    private final IndexEventSink sink;
    private final LearnedKeyMap learned;
    /** TensorRT-LLM endpoints: drained over HTTP by a non-blocking poller stepped in this agent's duty cycle. */
    private final HttpKvPoller http;

    /** Wanted changes per endpoint id, latest wins (bounded by the endpoint count). */
    private final ConcurrentHashMap<Integer, Change> pending = new ConcurrentHashMap<>();

    private record Change(KvEventSource source, HttpKvEventSource http, boolean clearFirst) {
    }

    private final List<RankSubscriber> subscribers = new ArrayList<>();
    private volatile RankSubscriber[] published = new RankSubscriber[0];
    private ZMQ.Poller poller;
    private RankSubscriber[] itemSub = new RankSubscriber[0];
    private int[] itemKind = new int[0];
    private boolean pollerDirty = true;

    private ZMQ.Socket zap;
    /** Wakes a waiting poll from other threads: its source is in every poller, one byte is written per wake-up. */
    private final Pipe wakePipe;
    private final AtomicBoolean wakePending = new AtomicBoolean();
    private final ByteBuffer wakeByte = ByteBuffer.allocateDirect(1);
    private final ByteBuffer wakeDrain = ByteBuffer.allocateDirect(64);
    private final Map<String, PeerAllowList> allowByDomain = new HashMap<>();

    // Frames of the message being read: alternate between two buffers so the last two frames (seq, payload) survive.
    private final byte[][] frameBuf;
    private final int[] frameLen = new int[2];
    private int lastFrame;
    private final boolean[] topicOk = new boolean[1];

    private final AtomicLong duplicates = new AtomicLong();
    private final AtomicLong shortMessages = new AtomicLong();
    private final AtomicLong agentErrors = new AtomicLong();
    private final AtomicLong ioThreadErrors = new AtomicLong();
    private final AtomicLong zapAllowed = new AtomicLong();
    private final AtomicLong zapDenied = new AtomicLong();
    private volatile String lastAgentError = "";
    private volatile boolean running;
    private AgentRunner runner;
    /** The runner's thread, kept from its factory: {@link #stop} joins it even before the runner ran. */
    private volatile Thread thread;

    public KvEventIngest(BlockIndex index, NanoClock clock, IngestConfig config, HostResolver resolver,
                         Executor resolverExecutor) {
        this.index = index;
        this.clock = clock;
        this.config = config;
        this.resolver = resolver;
        if (resolverExecutor == null) {
            ThreadPoolExecutor ex = new ThreadPoolExecutor(1, 1, 0, TimeUnit.MILLISECONDS,
                new ArrayBlockingQueue<>(index.config().maxEndpoints() * 8), r -> {
                    Thread t = new Thread(r, "kvgate-ingest-resolver");
                    t.setDaemon(true);
                    return t;
                });
            this.ownedResolverExecutor = ex;
            this.resolverExecutor = ex;
        } else {
            this.ownedResolverExecutor = null;
            this.resolverExecutor = resolverExecutor;
        }
        this.ctx = newContext();
        this.learned = new LearnedKeyMap(config.learnedKeyCapacity());
        this.sink = new IndexEventSink(index, config.hasher(), learned);
        this.decoder = new KvEventDecoder(sink);
        this.http = new HttpKvPoller(index, clock, config, sink, resolver, this.resolverExecutor,
            HttpKvPoller.DEFAULT_REQUEST_TIMEOUT_NS);
        // The SUB's MAXMSGSIZE makes a larger frame impossible; the buffers hold the largest allowed frame.
        this.frameBuf = new byte[][] {new byte[config.maxFrameBytes()], new byte[config.maxFrameBytes()]};
        try {
            this.wakePipe = Pipe.open();
            wakePipe.source().configureBlocking(false);
            wakePipe.sink().configureBlocking(false);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot open the ingest agent's wake-up pipe", e);
        }
    }

    public KvEventIngest(BlockIndex index, NanoClock clock, IngestConfig config) {
        this(index, clock, config, HostResolver.SYSTEM, null);
    }

    public KvEventIngest(BlockIndex index, NanoClock clock) {
        this(index, clock, IngestConfig.defaults());
    }

    /**
     * A context whose threads report here instead of failing silently: an exception JeroMQ caught in its loop is
     * counted and logged; a thread that died (its uncaught handler) also marks this context for a rebuild.
     */
    private ZContext newContext() {
        ZContext c = new ZContext(1);
        c.setNotificationExceptionHandler((t, e) -> onIoThreadError(t, e, false));
        c.setUncaughtExceptionHandler((t, e) -> {
            onIoThreadError(t, e, true);
            contextDied = e;
            wake();
        });
        return c;
    }

    private void onIoThreadError(Thread t, Throwable e, boolean died) {
        long n = ioThreadErrors.incrementAndGet();
        lastAgentError = "zmq " + t.getName() + ": " + RankSubscriber.describe(e);
        logSome(n, "ZeroMQ thread " + t.getName() + (died ? " died (the ingest reopens every subscription on a new"
            + " context)" : " reported an error") + ": " + RankSubscriber.describe(e) + " (" + n + " so far)");
    }

    /** Logs the 1st, 2nd, 4th, 8th, ... occurrence of a kind of event: one repeated by a peer cannot flood the log. */
    private static void logSome(long occurrence, String message) {
        if (Long.bitCount(occurrence) == 1) {
            Log.warn("ingest: " + message);
        }
    }

    /**
     * Starts the ingest agent on a thread of its own (daemon, named {@code kvgate-ingest}): an Agrona
     * {@link AgentRunner} with no idle strategy, since the duty cycle's own poll is the wait (it returns at once for a
     * message, a command or {@link #wake()}).
     */
    public synchronized void start() {
        if (runner != null) {
            throw new IllegalStateException("ingest already started");
        }
        running = true;
        runner = new AgentRunner(NoOpIdleStrategy.INSTANCE, this::onRunnerError, null, new IngestAgent());
        AgentRunner.startOnThread(runner, r -> {
            thread = new Thread(r, IngestAgent.ROLE);
            thread.setDaemon(true);
            return thread;
        });
    }

    /**
     * The duty cycle as an Agrona agent: {@link #doWork(long)} with the poll timeout its idle streak allows, until
     * {@link #stop} clears {@link #running}; on the way out it closes every socket on its own thread.
     */
    private final class IngestAgent implements Agent {
        static final String ROLE = "kvgate-ingest";
        private int idleCycles;

        @Override
        public int doWork() {
            if (!running) {
                throw new AgentTerminationException("stopped");
            }
            int work = KvEventIngest.this.doWork(pollTimeoutMs(idleCycles));
            idleCycles = work == 0 ? idleCycles + 1 : 0;
            return work;
        }

        @Override
        public void onClose() {
            closeAll();
        }

        @Override
        public String roleName() {
            return ROLE;
        }
    }

    /**
     * What the runner catches from a duty cycle (on the agent's thread). Every step inside is guarded per subscriber;
     * this is the last line: count, pause (a failure on every cycle must not spin a core), go on.
     */
    private void onRunnerError(Throwable t) {
        if (t instanceof AgentTerminationException) {
            return; // the way stop() ends the agent
        }
        onAgentError(t);
        LockSupport.parkNanos(1_000_000);
    }

    /** The ingest thread's poll timeout after {@code idleCycles} duty cycles in a row that did no work. */
    long pollTimeoutMs(int idleCycles) {
        return idleCycles >= IDLE_CYCLES_BEFORE_BACKOFF && nothingDueOnClock() ? IDLE_POLL_MS : ACTIVE_POLL_MS;
    }

    /**
     * Whether no step of the duty cycle waits for a time to pass: then only a socket, a command or a peer event
     * ({@link #wake()}) can give it work, and the poll may wait long.
     */
    private boolean nothingDueOnClock() {
        if (!pending.isEmpty() || !http.isEmpty() || pollerDirty) {
            return false;
        }
        for (RankSubscriber s : subscribers) {
            if (!s.isOpen() || s.replaying || s.resolving != null || s.disconnectUnanswered()) {
                return false;
            }
        }
        return true;
    }

    /** Makes a waiting duty cycle return now (any thread; a wake-up already pending is not repeated). */
    void wake() {
        if (wakePending.compareAndSet(false, true)) {
            try {
                synchronized (wakeByte) {
                    wakeByte.clear();
                    wakePipe.sink().write(wakeByte);
                }
            } catch (IOException e) {
                wakePending.set(false); // closed: the agent has stopped
            }
        }
    }

    private int drainWakeups() {
        wakePending.set(false); // before reading: a wake-up from now on writes a new byte
        try {
            int n = 0;
            wakeDrain.clear();
            while (wakePipe.source().read(wakeDrain) > 0) {
                n++;
                wakeDrain.clear();
            }
            return n;
        } catch (IOException e) {
            return 0;
        }
    }

    private void onAgentError(Throwable t) {
        agentErrors.incrementAndGet();
        lastAgentError = RankSubscriber.describe(t);
        pollerDirty = true;
    }

    /** Subscribes to every DP rank of an endpoint (replacing an existing subscription with the same id). */
    public void addEndpoint(KvEventSource source) {
        if (source.endpointId() >= index.config().maxEndpoints()) {
            throw new IllegalArgumentException("endpointId=" + source.endpointId() + " must be in 0.."
                + (index.config().maxEndpoints() - 1));
        }
        pending.compute(source.endpointId(), (id, old) -> new Change(source, null, old != null && old.clearFirst()));
        wake();
    }

    /**
     * Polls an endpoint's draining HTTP event endpoint (TensorRT-LLM {@code /kv_cache_events}), replacing any
     * subscription or poll with the same id; see {@link HttpKvPoller}.
     */
    public void addHttpEndpoint(HttpKvEventSource source) {
        if (source.endpointId() >= index.config().maxEndpoints()) {
            throw new IllegalArgumentException("endpointId=" + source.endpointId() + " must be in 0.."
                + (index.config().maxEndpoints() - 1));
        }
        pending.compute(source.endpointId(), (id, old) -> new Change(null, source, old != null && old.clearFirst()));
        wake();
    }

    /** Unsubscribes and forgets every block the endpoint held. */
    public void removeEndpoint(int endpointId) {
        pending.put(endpointId, new Change(null, null, true));
        wake();
    }

    /** Changes recorded and not yet applied by the agent (at most one per endpoint). */
    public int pendingChanges() {
        return pending.size();
    }

    private int applyChanges() {
        if (pending.isEmpty()) {
            return 0;
        }
        int work = 0;
        for (Integer id : pending.keySet()) {
            Change c = pending.remove(id);
            if (c == null) {
                continue;
            }
            work++;
            try {
                dropEndpoint(id);
                http.remove(id);
                if (c.clearFirst()) {
                    index.removeEndpoint(id);
                }
                if (c.http() != null) {
                    http.add(c.http());
                }
                if (c.source() != null) {
                    KvEventSource src = c.source();
                    PeerAllowList allow = src.bind() ? new PeerAllowList(src.allow()) : null;
                    for (int r = 0; r < src.dpRanks(); r++) {
                        RankSubscriber s = new RankSubscriber(src, r, this::wake);
                        subscribers.add(s);
                        if (allow != null) {
                            allowByDomain.put(s.zapDomain, allow);
                        }
                    }
                }
            } catch (RuntimeException e) {
                onAgentError(e);
            }
            publish();
        }
        return work;
    }

    private void dropEndpoint(int endpointId) {
        for (int i = subscribers.size() - 1; i >= 0; i--) {
            RankSubscriber s = subscribers.get(i);
            if (s.source.endpointId() == endpointId) {
                allowByDomain.remove(s.zapDomain);
                s.close();
                if (s.resolving != null) {
                    s.resolving.cancel(false);
                }
                subscribers.remove(i);
            }
        }
    }

    private void publish() {
        published = subscribers.toArray(new RankSubscriber[0]);
        pollerDirty = true;
    }

    /** Per (endpoint, rank) state and counters; safe from any thread. */
    public List<SubscriberStatus> status() {
        RankSubscriber[] subs = published;
        List<SubscriberStatus> out = new ArrayList<>(subs.length);
        for (RankSubscriber s : subs) {
            out.add(s.status());
        }
        out.addAll(http.status());
        return out;
    }

    /** Live batches skipped because a replay already applied them. */
    public long duplicates() {
        return duplicates.get();
    }

    /** Live messages with fewer than 3 frames or a seq frame that is not 8 bytes. */
    public long shortMessages() {
        return shortMessages.get();
    }

    /** Exceptions that escaped a whole duty cycle or a reconcile step (not attributed to one subscriber). */
    public long agentErrors() {
        return agentErrors.get();
    }

    /** Exceptions JeroMQ's I/O thread reported (see {@link #lastAgentError()}). */
    public long ioThreadErrors() {
        return ioThreadErrors.get();
    }

    public String lastAgentError() {
        return lastAgentError;
    }

    /** The current ZeroMQ context; tests use it to break its I/O thread (only while they pump the agent themselves). */
    ZContext zmqContext() {
        return ctx;
    }

    /** Times a ZeroMQ context was replaced because one of its threads died. */
    public long contextRebuilds() {
        return contextRebuilds.get();
    }

    /** Frame headers refused by {@link FrameSizeGuard} (a negative or oversized declared size), all subscriptions. */
    public long refusedFrames() {
        return refusedFrames.get();
    }

    /** Connecting subscriptions reopened because ZeroMQ ended their connection for good (review B-2). */
    public long sessionsEnded() {
        return sessionsEnded.get();
    }

    /** Bind-mode peers admitted / refused by the ZAP handler. */
    public long zapAllowed() {
        return zapAllowed.get();
    }

    public long zapDenied() {
        return zapDenied.get();
    }

    public long learnedUnknownParents() {
        return sink.learnedUnknownParents;
    }

    /** Blocks of {@code locality: REMOTE} storage events, not indexed (see {@link IndexEventSink}). */
    public long remoteBlocks() {
        return sink.remoteBlocks;
    }

    public long learnedUnmappedRemovals() {
        return sink.learnedUnmappedRemovals;
    }

    /**
     * One duty cycle: apply pending endpoint changes, open or retry due subscriptions, wait up to
     * {@code pollTimeoutMs} for socket activity, drain ready sockets (bounded per socket), expire replays. Each step
     * is guarded per subscriber. Returns the amount of work done (0 = idle).
     */
    public int doWork(long pollTimeoutMs) {
        int work = 0;
        if (contextDied != null) {
            work += rebuildContext();
        }
        work += applyChanges();
        work += supervise(clock.nanoTime());
        work += http.doWork();
        if (pollerDirty) {
            rebuildPoller();
        }
        // Idle: reclaim dead words of cleared holders (one segment) instead of waiting, and poll without waiting.
        int reclaimed = work == 0 ? index.reclaimStep() : 0;
        int ready = poller.poll(reclaimed > 0 ? 0 : pollTimeoutMs);
        if (ready > 0) {
            for (int i = 0; i < itemKind.length; i++) {
                if (!poller.pollin(i)) {
                    continue;
                }
                RankSubscriber s = itemSub[i];
                if (s != null && !s.isOpen()) {
                    continue; // failed earlier in this cycle
                }
                try {
                    switch (itemKind[i]) {
                        case KIND_SUB -> work += drainLive(s);
                        case KIND_DEALER -> work += drainReplay(s);
                        case KIND_WAKE -> work += drainWakeups();
                        default -> work += serveZap();
                    }
                } catch (RuntimeException e) {
                    if (s == null) {
                        onAgentError(e);
                    } else {
                        s.failed(RankSubscriber.CAUSE_INTERNAL, RankSubscriber.describe(e), clock.nanoTime(), config);
                        pollerDirty = true;
                    }
                }
            }
        }
        long now = clock.nanoTime();
        for (RankSubscriber s : subscribers) {
            work += s.pollPeerEvents();
            work += superviseConnection(s, now);
            if (s.replaying && now - s.replayDeadlineNs >= 0) {
                try {
                    replayFailed(s, now);
                } catch (RuntimeException e) {
                    s.failed(RankSubscriber.CAUSE_INTERNAL, RankSubscriber.describe(e), now, config);
                    pollerDirty = true;
                }
                work++;
            }
        }
        return work;
    }

    /**
     * Acts on what the open subscription's sockets saw: refused frame sizes ({@link FrameSizeGuard}) and a connection
     * ZeroMQ ended without reconnecting ({@link RankSubscriber#sessionEnded}). Returns the work done.
     */
    private int superviseConnection(RankSubscriber s, long now) {
        if (!s.isOpen()) {
            return 0;
        }
        long refused = s.takeRefusedFrames(refusedSize);
        if (refused > 0) {
            long n = refusedFrames.addAndGet(refused);
            String what = "a peer of " + s.liveUri + " declared a ZeroMQ frame of " + refusedSize[0]
                + " bytes (as JeroMQ truncates it; negative or over ingest.max_frame_bytes=" + config.maxFrameBytes()
                + "): frame refused";
            logSome(n, what + " (" + n + " so far)");
            if (s.source.bind()) {
                // Any peer can reach a bound port, even one ZAP will refuse: the guard's refusal drops a peer still in
                // its handshake, and nothing it sends can reopen or clear the socket the allowed peers share.
                s.noteError(RankSubscriber.CAUSE_PROTOCOL, what);
            } else {
                feedLost(s, what + "; the stream is out of step, reopening", now);
            }
            return 1;
        }
        if (s.sessionEnded(now)) {
            long n = sessionsEnded.incrementAndGet();
            String what = "the connection to " + s.liveUri + " ended and ZeroMQ does not reconnect it (a protocol"
                + " error, e.g. a frame over ingest.max_frame_bytes=" + config.maxFrameBytes() + ")";
            logSome(n, what + "; reopening (" + n + " so far)");
            feedLost(s, what, now);
            return 1;
        }
        return 0;
    }

    /**
     * The rank's feed is lost: its blocks are cleared (an engine whose events no longer arrive must not keep
     * attracting requests with blocks it may have evicted), the sequence forgotten (the first batch after the
     * reopening starts it again: replayed from the engine's buffer where there is one), the sockets closed and
     * reopened after the retry backoff.
     */
    private void feedLost(RankSubscriber s, String message, long now) {
        clear(s);
        s.seq.reset();
        s.failed(RankSubscriber.CAUSE_PROTOCOL, message, now, config);
        pollerDirty = true;
    }

    /**
     * A thread of the context died, so none of its sockets will move again: closes every socket on the ingest
     * thread (that only enqueues commands), terminates the old context on a daemon thread (termination waits for
     * the dead thread and may never finish), and lets every subscription reopen on a new context after the retry
     * backoff, its rank cleared as for any lost feed.
     */
    private int rebuildContext() {
        Throwable cause = contextDied;
        contextDied = null;
        long now = clock.nanoTime();
        String message = "ZeroMQ thread died: " + RankSubscriber.describe(cause) + "; reopening on a new context";
        for (RankSubscriber s : subscribers) {
            if (s.isOpen()) {
                clear(s);
                s.seq.reset();
                s.failed(RankSubscriber.CAUSE_INTERNAL, message, now, config);
            }
        }
        if (poller != null) {
            poller.close();
            poller = null;
        }
        if (zap != null) {
            zap.close();
            zap = null;
        }
        ZContext dead = ctx;
        ctx = newContext();
        Thread reaper = new Thread(dead::close, "kvgate-ingest-dead-zmq-context");
        reaper.setDaemon(true);
        reaper.start();
        contextRebuilds.incrementAndGet();
        pollerDirty = true;
        return 1;
    }

    /** Opens subscriptions that are new or whose retry is due; collects finished host resolutions. */
    private int supervise(long now) {
        int work = 0;
        for (RankSubscriber s : subscribers) {
            RankSubscriber.State st = s.state();
            if (s.isOpen() || (st == RankSubscriber.State.RETRYING && now - s.nextAttemptNs < 0)) {
                continue;
            }
            try {
                if (s.resolving == null) {
                    work++;
                    startResolving(s);
                }
                if (s.resolving != null && s.resolving.isDone()) {
                    work++;
                    CompletableFuture<String[]> f = s.resolving;
                    s.resolving = null;
                    String[] addr;
                    try {
                        addr = f.join();
                    } catch (CompletionException | java.util.concurrent.CancellationException e) {
                        Throwable c = e.getCause() == null ? e : e.getCause();
                        s.failed(RankSubscriber.CAUSE_RESOLVE, RankSubscriber.describe(c), now, config);
                        continue;
                    }
                    if (s.source.bind()) {
                        ensureZapHandler();
                    }
                    s.open(ctx, config, addr[0], addr[1]);
                    pollerDirty = true;
                }
            } catch (RankSubscriber.OpenFailure e) {
                s.failed(e.cause, e.getMessage(), now, config);
            } catch (RuntimeException e) {
                s.failed(RankSubscriber.CAUSE_INTERNAL, RankSubscriber.describe(e), now, config);
            }
        }
        return work;
    }

    private void startResolving(RankSubscriber s) {
        String liveHost = hostOf(s.liveUri);
        String replayHost = s.replayUri == null ? null : hostOf(s.replayUri);
        boolean liveLiteral = liveHost == null || "*".equals(liveHost) || PeerAllowList.literal(liveHost) != null;
        boolean replayLiteral = replayHost == null || PeerAllowList.literal(replayHost) != null;
        if (liveLiteral && replayLiteral) {
            s.resolving = CompletableFuture.completedFuture(new String[] {s.liveUri, s.replayUri});
            return;
        }
        s.resolvingStarted();
        String live = s.liveUri;
        String replay = s.replayUri;
        try {
            s.resolving = CompletableFuture.supplyAsync(() -> new String[] {
                liveLiteral ? live : withHost(live, resolveOrThrow(liveHost)),
                replay == null || replayLiteral ? replay : withHost(replay, resolveOrThrow(replayHost))},
                resolverExecutor);
        } catch (RejectedExecutionException e) {
            s.resolving = CompletableFuture.failedFuture(new IllegalStateException("resolver queue full"));
        }
    }

    private String resolveOrThrow(String host) {
        try {
            String ip = resolver.resolve(host);
            if (PeerAllowList.literal(ip) == null) {
                throw new IllegalStateException("resolver returned '" + ip + "' for " + host + ", not an IP literal");
            }
            return ip;
        } catch (java.net.UnknownHostException e) {
            throw new CompletionException(new java.net.UnknownHostException(host + " does not resolve ("
                + e.getMessage() + ")"));
        }
    }

    /** The host of {@code tcp://host:port} ({@code [v6]} brackets removed), null for other transports. */
    static String hostOf(String uri) {
        if (!uri.startsWith("tcp://")) {
            return null;
        }
        String hp = uri.substring("tcp://".length());
        String host = hp.substring(0, hp.lastIndexOf(':'));
        return host.startsWith("[") && host.endsWith("]") ? host.substring(1, host.length() - 1) : host;
    }

    static String withHost(String uri, String ip) {
        String port = uri.substring(uri.lastIndexOf(':'));
        return "tcp://" + (ip.indexOf(':') >= 0 ? "[" + ip + "]" : ip) + port;
    }

    private void ensureZapHandler() {
        if (zap == null) {
            ZMQ.Socket z = ctx.createSocket(SocketType.REP);
            z.setLinger(0);
            z.bind(ZAP_ENDPOINT);
            zap = z;
            pollerDirty = true;
        }
    }

    /**
     * Answers ZAP requests (RFC 27: version, request id, domain, address, identity, mechanism, credentials...): a
     * peer is admitted when the endpoint's allow-list contains its address. Runs on the ingest thread, between
     * batches; JeroMQ holds the peer's handshake until the answer.
     */
    private int serveZap() {
        int n = 0;
        for (int m = 0; m < 64; m++) {
            byte[] version = zap.recv(ZMQ.DONTWAIT);
            if (version == null) {
                break;
            }
            List<byte[]> frames = new ArrayList<>(8);
            frames.add(version);
            while (zap.hasReceiveMore()) {
                frames.add(zap.recv());
            }
            n++;
            byte[] requestId = frames.size() > 1 ? frames.get(1) : new byte[0];
            String domain = frames.size() > 2 ? new String(frames.get(2), java.nio.charset.StandardCharsets.UTF_8) : "";
            String address = frames.size() > 3 ? new String(frames.get(3), java.nio.charset.StandardCharsets.UTF_8) : "";
            PeerAllowList allow = allowByDomain.get(domain);
            boolean ok = frames.size() >= 6 && allow != null && allow.allows(address);
            // The peer asking is one of the socket's live connections already (counted when it was accepted).
            boolean full = ok && peersOfDomain(domain) > config.maxPeersPerBindSocket();
            if (ok && !full) {
                zapAllowed.incrementAndGet();
            } else {
                zapDenied.incrementAndGet();
                for (RankSubscriber s : subscribers) {
                    if (s.zapDomain.equals(domain)) {
                        if (full) {
                            s.noteError(RankSubscriber.CAUSE_DENIED, "peer " + address + " refused: the socket has "
                                + config.maxPeersPerBindSocket() + " peers (ingest.max_peers_per_bind_socket)");
                        } else {
                            s.denied(address);
                        }
                    }
                }
            }
            zap.sendMore("1.0");
            zap.sendMore(requestId);
            zap.sendMore(ok && !full ? "200" : "400");
            zap.sendMore(ok && !full ? "OK" : full ? "too many peers" : "address not in kv_events_allow");
            zap.sendMore("");
            zap.send("");
        }
        return n;
    }

    /** Live connections of the bound socket a ZAP domain names (one domain per rank's socket). */
    private int peersOfDomain(String domain) {
        for (RankSubscriber s : subscribers) {
            if (s.zapDomain.equals(domain)) {
                return s.liveConnections();
            }
        }
        return 0;
    }

    private void rebuildPoller() {
        if (poller != null) {
            poller.close();
        }
        int n = zap == null ? 1 : 2;
        for (RankSubscriber s : subscribers) {
            if (s.isOpen()) {
                n++;
            }
        }
        poller = ctx.createPoller(n);
        itemSub = new RankSubscriber[n];
        itemKind = new int[n];
        itemKind[0] = KIND_WAKE;
        poller.register(wakePipe.source(), ZMQ.Poller.POLLIN);
        int i = 1;
        if (zap != null) {
            itemKind[i] = KIND_ZAP;
            poller.register(zap, ZMQ.Poller.POLLIN);
            i++;
        }
        for (RankSubscriber s : subscribers) {
            if (!s.isOpen()) {
                continue;
            }
            // A replaying rank's SUB is left unread: live batches queue in ZMQ until the replay is done.
            itemSub[i] = s;
            if (s.replaying) {
                itemKind[i] = KIND_DEALER;
                poller.register(s.dealer, ZMQ.Poller.POLLIN);
            } else {
                itemKind[i] = KIND_SUB;
                poller.register(s.sub, ZMQ.Poller.POLLIN);
            }
            i++;
        }
        pollerDirty = false;
    }

    /**
     * Reads one multipart message into the two alternating buffers. Returns the frame count (0 = nothing to read);
     * afterwards {@link #lastFrame} indexes the buffer holding the last frame, the other one holds the frame
     * before it. Frames never exceed the buffers: the sockets' MAXMSGSIZE equals their size.
     */
    private int readMessage(ZMQ.Socket socket, byte[] topicOrNull, boolean[] topicOk) {
        int b = 0;
        int n = socket.recv(frameBuf[b], 0, frameBuf[b].length, ZMQ.DONTWAIT);
        if (n < 0) {
            return 0;
        }
        if (topicOrNull != null) {
            topicOk[0] = startsWith(frameBuf[b], Math.min(n, frameBuf[b].length), topicOrNull);
        }
        frameLen[b] = n;
        int frames = 1;
        while (socket.hasReceiveMore()) {
            b ^= 1;
            frameLen[b] = socket.recv(frameBuf[b], 0, frameBuf[b].length, 0);
            frames++;
        }
        lastFrame = b;
        return frames;
    }

    private static boolean startsWith(byte[] buf, int len, byte[] prefix) {
        if (len < prefix.length) {
            return false;
        }
        for (int i = 0; i < prefix.length; i++) {
            if (buf[i] != prefix[i]) {
                return false;
            }
        }
        return true;
    }

    private long seqOfSecondLast() {
        byte[] s = frameBuf[lastFrame ^ 1];
        long v = 0;
        for (int i = 0; i < 8; i++) {
            v = (v << 8) | (s[i] & 0xFF);
        }
        return v;
    }

    private int drainLive(RankSubscriber s) {
        int work = 0;
        for (int m = 0; m < config.maxMessagesPerPoll() && !s.replaying && s.isOpen(); m++) {
            int frames = readMessage(s.sub, s.topic, topicOk);
            if (frames == 0) {
                break;
            }
            work++;
            if (frames < 3 || frameLen[lastFrame ^ 1] != 8) {
                shortMessages.incrementAndGet();
                s.add(RankSubscriber.C_DECODE_ERRORS, 1);
                continue;
            }
            if (!topicOk[0]) {
                continue; // SUBSCRIBE already filters by prefix; this is a second line only
            }
            onLive(s, seqOfSecondLast());
        }
        return work;
    }

    private void onLive(RankSubscriber s, long seq) {
        long now = clock.nanoTime();
        switch (s.seq.onLive(seq)) {
            case SequenceTracker.APPLY -> apply(s, seq);
            case SequenceTracker.DUPLICATE -> duplicates.incrementAndGet();
            case SequenceTracker.RESTART -> {
                s.add(RankSubscriber.C_RESTARTS, 1);
                clear(s);
                apply(s, seq);
            }
            case SequenceTracker.FIRST_MIDSTREAM -> {
                if (s.replayAvailable(now) && s.requestReplay(0, now, config.replayTimeoutNs())) {
                    pollerDirty = true; // this batch is in the engine's buffer: the replay will bring it
                } else {
                    s.seq.rebase(seq);
                    apply(s, seq);
                }
            }
            default -> { // GAP
                s.add(RankSubscriber.C_GAPS, 1);
                if (s.replayAvailable(now) && s.requestReplay(s.seq.expected(), now, config.replayTimeoutNs())) {
                    pollerDirty = true;
                } else {
                    clear(s);
                    s.seq.rebase(seq);
                    apply(s, seq);
                }
            }
        }
    }

    private int drainReplay(RankSubscriber s) {
        int work = 0;
        for (int m = 0; m < config.maxMessagesPerPoll() && s.replaying; m++) {
            int frames = readMessage(s.dealer, null, topicOk);
            if (frames == 0) {
                break;
            }
            work++;
            // Rule for every replay dialect ([.., seq, payload], with or without delimiter and topic):
            // last frame = payload, the one before = seq; seq -1 or an empty payload ends the replay.
            if (frames < 2 || frameLen[lastFrame ^ 1] != 8) {
                s.add(RankSubscriber.C_DECODE_ERRORS, 1);
                replayFailed(s, clock.nanoTime());
                break;
            }
            long seq = seqOfSecondLast();
            if (seq == -1 || frameLen[lastFrame] == 0) {
                s.seq.replayFinished(s.replayStartSeq);
                s.replaying = false;
                pollerDirty = true;
                break;
            }
            switch (s.seq.onReplayed(seq)) {
                case SequenceTracker.APPLY -> apply(s, seq);
                case SequenceTracker.DUPLICATE -> duplicates.incrementAndGet();
                default -> { // the engine's buffer no longer holds what we missed
                    s.add(RankSubscriber.C_REPLAY_FAILURES, 1);
                    clear(s);
                    s.seq.rebase(seq);
                    apply(s, seq);
                }
            }
        }
        return work;
    }

    private void replayFailed(RankSubscriber s, long now) {
        s.add(RankSubscriber.C_REPLAY_FAILURES, 1);
        s.replaying = false;
        s.replayBackoff = true;
        s.replayBackoffUntilNs = now + config.replayBackoffNs();
        clear(s);
        s.seq.reset();
        pollerDirty = true;
        try {
            s.resetDealer(ctx, config);
        } catch (RankSubscriber.OpenFailure e) {
            s.failed(e.cause, e.getMessage(), now, config);
        }
    }

    private void clear(RankSubscriber s) {
        index.clearRank(s.source.endpointId(), s.rank);
        s.add(RankSubscriber.C_CLEARS, 1);
    }

    private void apply(RankSubscriber s, long seq) {
        s.fed();
        int len = frameLen[lastFrame];
        s.set(RankSubscriber.C_LAST_SEQ, seq);
        if (len > frameBuf[lastFrame].length) { // cannot happen with MAXMSGSIZE = buffer size; kept as a guard
            s.add(RankSubscriber.C_DECODE_ERRORS, 1);
            clear(s);
            return;
        }
        sink.target(s.source.endpointId(), s.rank, s.source.keyMode());
        long tooManyBlocks = decoder.droppedTooManyBlocks();
        long tooManyTokens = decoder.droppedTooManyTokens();
        int r = decoder.decode(frameBuf[lastFrame], 0, len);
        s.add(RankSubscriber.C_BATCHES, 1);
        s.add(RankSubscriber.C_EVENTS, decoder.lastEventCount());
        s.add(RankSubscriber.C_BLOCK_OPS, sink.blockOps());
        if (decoder.droppedTooManyBlocks() != tooManyBlocks) {
            s.add(RankSubscriber.C_DROPPED, decoder.droppedTooManyBlocks() - tooManyBlocks);
        }
        if (decoder.droppedTooManyTokens() != tooManyTokens) {
            s.add(RankSubscriber.C_DROPPED + 1, decoder.droppedTooManyTokens() - tooManyTokens);
        }
        if (sink.clears() > 0) {
            s.add(RankSubscriber.C_CLEARS, sink.clears());
        }
        if (r == KvEventDecoder.MALFORMED) {
            s.add(RankSubscriber.C_DECODE_ERRORS, 1);
            clear(s);
        }
    }

    /** Tests: feeds one live message (seq, payload) to subscriber {@code s} as if its SUB had received it. */
    void injectLive(RankSubscriber s, long seq, byte[] payload) {
        System.arraycopy(payload, 0, frameBuf[0], 0, payload.length);
        frameLen[0] = payload.length;
        lastFrame = 0;
        onLive(s, seq);
    }

    /**
     * Stops the ingest thread and waits until it has closed its sockets and will never write to the index again;
     * without a thread, closes the sockets on the caller's thread. Returns false (and leaves the thread running)
     * only if it did not stop within {@code timeoutMs}: the caller must then NOT close the index (review L12).
     */
    public boolean stop(long timeoutMs) {
        Thread t;
        synchronized (this) {
            t = thread;
            running = false;
        }
        wake();
        boolean stopped = true;
        if (t != null) {
            try {
                t.join(timeoutMs);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            stopped = !t.isAlive();
        } else {
            closeAll();
        }
        if (stopped && ownedResolverExecutor != null) {
            ownedResolverExecutor.shutdownNow();
        }
        return stopped;
    }

    /** {@link #stop(long)} with 10 s; see there. */
    @Override
    public void close() {
        if (!stop(10_000)) {
            Log.warn("ingest thread did not stop within 10 s; the block index is left open");
        }
    }

    /** Whether the ingest thread (if one was started) has finished. */
    public boolean stopped() {
        Thread t = thread;
        return t == null ? !running : !t.isAlive();
    }

    private void closeAll() {
        for (RankSubscriber s : subscribers) {
            s.close();
            if (s.resolving != null) {
                s.resolving.cancel(false);
            }
        }
        subscribers.clear();
        published = new RankSubscriber[0];
        http.close();
        if (poller != null) {
            poller.close();
            poller = null;
        }
        if (zap != null) {
            zap.close();
            zap = null;
        }
        ctx.close();
        try {
            wakePipe.sink().close();
            wakePipe.source().close();
        } catch (IOException e) {
            // stopping: nothing waits on the pipe any more
        }
    }

    /** The block sizes the endpoints' stored events carry, checked against their rules' (ZeroMQ and HTTP sources). */
    public EventBlockSizes blockSizes() {
        return sink.blockSizes;
    }

    /** The KV-cache groups the endpoints' events name (hybrid models), and the blocks of groups not indexed. */
    public KvCacheGroups cacheGroups() {
        return sink.groups;
    }
}
