package io.kvgate.ingest.zmq;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.LearnedKeyMap;
import io.kvgate.ingest.codec.KvEventDecoder;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * KV-event ingest: one JeroMQ SUB per (endpoint, DP rank), all polled by ONE ingest thread that decodes the
 * msgpack payloads and is the single writer of the {@link BlockIndex}. Ingest never blocks the data plane: the
 * routing thread only reads the index.
 *
 * <p><b>Sequence handling per rank</b> (engine-contracts §2.3): batches in order are applied; a forward jump is
 * filled by replay when a replay endpoint is configured (a DEALER sends the 8-byte big-endian start seq to the
 * engine's ROUTER; replies {@code [.., seq, payload]} end with seq -1 or an empty payload; while a replay runs the
 * rank's SUB is not read, so live batches wait in its bounded queue and those the replay already covered are
 * skipped). A gap replay cannot fill (the engine's buffer moved on, or the replay timed out) clears the rank, as
 * do a seq going backwards (engine restart), an AllBlocksCleared, and a malformed payload (its lost part may have
 * held removals: a phantom block is a correctness bug, a cold window only costs performance). An engine that is
 * not up yet, or restarts, is retried by ZMQ itself; the socket monitor tracks connected state.
 *
 * <p><b>Threading contract:</b> {@link #addEndpoint}, {@link #removeEndpoint}, {@link #status} and
 * {@link #close} are thread-safe: changes are commands executed by the ingest thread. {@link #start()} runs the
 * duty cycle on a thread of its own; tests may instead call {@link #doWork(long)} from one thread.
 */
public final class KvEventIngest implements AutoCloseable {
    private static final int KIND_SUB = 0;
    private static final int KIND_DEALER = 1;
    private static final int KIND_MONITOR = 2;

    private final BlockIndex index;
    private final NanoClock clock;
    private final IngestConfig config;
    private final ZContext ctx = new ZContext(1);
    private final KvEventDecoder decoder;
    private final IndexEventSink sink;
    private final LearnedKeyMap learned;
    private final ConcurrentLinkedQueue<Runnable> commands = new ConcurrentLinkedQueue<>();

    private final List<RankSubscriber> subscribers = new ArrayList<>();
    private volatile RankSubscriber[] published = new RankSubscriber[0];
    private ZMQ.Poller poller;
    private RankSubscriber[] itemSub = new RankSubscriber[0];
    private int[] itemKind = new int[0];
    private boolean pollerDirty = true;
    private int nextMonitorId;

    // Frames of the message being read: alternate between two buffers so the last two frames (seq, payload) survive.
    private final byte[][] frameBuf;
    private final int[] frameLen = new int[2];
    private int lastFrame;

    private final AtomicLong duplicates = new AtomicLong();
    private final AtomicLong shortMessages = new AtomicLong();
    private volatile boolean running;
    private Thread thread;

    public KvEventIngest(BlockIndex index, NanoClock clock, IngestConfig config) {
        this.index = index;
        this.clock = clock;
        this.config = config;
        this.learned = new LearnedKeyMap(config.learnedKeyCapacity());
        this.sink = new IndexEventSink(index, config.hasher(), learned);
        this.decoder = new KvEventDecoder(sink);
        this.frameBuf = new byte[][] {new byte[config.maxFrameBytes()], new byte[config.maxFrameBytes()]};
    }

    public KvEventIngest(BlockIndex index, NanoClock clock) {
        this(index, clock, IngestConfig.defaults());
    }

    /** Starts the ingest thread (daemon, named {@code kvgate-ingest}). */
    public synchronized void start() {
        if (thread != null) {
            throw new IllegalStateException("ingest already started");
        }
        running = true;
        thread = new Thread(this::run, "kvgate-ingest");
        thread.setDaemon(true);
        thread.start();
    }

    private void run() {
        try {
            while (running) {
                doWork(10);
            }
        } finally {
            closeAll();
        }
    }

    /** Subscribes to every DP rank of an endpoint (replacing an existing subscription with the same id). */
    public void addEndpoint(KvEventSource source) {
        if (source.endpointId() >= index.config().maxEndpoints()) {
            throw new IllegalArgumentException("endpointId=" + source.endpointId() + " must be in 0.."
                + (index.config().maxEndpoints() - 1));
        }
        commands.add(() -> {
            dropEndpoint(source.endpointId());
            for (int r = 0; r < source.dpRanks(); r++) {
                RankSubscriber s = new RankSubscriber(source, r, nextMonitorId++);
                s.open(ctx, config.receiveHighWaterMark());
                subscribers.add(s);
            }
            publish();
        });
    }

    /** Unsubscribes and forgets every block the endpoint held. */
    public void removeEndpoint(int endpointId) {
        commands.add(() -> {
            dropEndpoint(endpointId);
            index.removeEndpoint(endpointId);
            publish();
        });
    }

    private void dropEndpoint(int endpointId) {
        for (int i = subscribers.size() - 1; i >= 0; i--) {
            RankSubscriber s = subscribers.get(i);
            if (s.source.endpointId() == endpointId) {
                s.close(ctx);
                subscribers.remove(i);
            }
        }
    }

    private void publish() {
        published = subscribers.toArray(new RankSubscriber[0]);
        pollerDirty = true;
    }

    /** Per (endpoint, rank) counters; safe from any thread. */
    public List<SubscriberStatus> status() {
        RankSubscriber[] subs = published;
        List<SubscriberStatus> out = new ArrayList<>(subs.length);
        for (RankSubscriber s : subs) {
            out.add(s.status());
        }
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

    public long learnedUnknownParents() {
        return sink.learnedUnknownParents;
    }

    public long learnedUnmappedRemovals() {
        return sink.learnedUnmappedRemovals;
    }

    /**
     * One duty cycle: run pending commands, wait up to {@code pollTimeoutMs} for socket activity, drain ready
     * sockets (bounded per socket), expire replays. Returns the amount of work done (0 = idle).
     */
    public int doWork(long pollTimeoutMs) {
        int work = 0;
        Runnable cmd;
        while ((cmd = commands.poll()) != null) {
            cmd.run();
            work++;
        }
        if (pollerDirty) {
            rebuildPoller();
        }
        if (itemKind.length == 0) {
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(pollTimeoutMs));
            return work;
        }
        int ready = poller.poll(pollTimeoutMs);
        if (ready > 0) {
            for (int i = 0; i < itemKind.length; i++) {
                if (!poller.pollin(i)) {
                    continue;
                }
                RankSubscriber s = itemSub[i];
                switch (itemKind[i]) {
                    case KIND_SUB -> work += drainLive(s);
                    case KIND_DEALER -> work += drainReplay(s);
                    default -> work += s.pollMonitor();
                }
            }
        }
        long now = clock.nanoTime();
        for (RankSubscriber s : subscribers) {
            if (s.replaying && now - s.replayDeadlineNs >= 0) {
                replayFailed(s, now);
                work++;
            }
        }
        return work;
    }

    private void rebuildPoller() {
        if (poller != null) {
            poller.close();
        }
        int n = 0;
        for (RankSubscriber s : subscribers) {
            n += 2 + (s.replaying ? 1 : 0);
        }
        poller = ctx.createPoller(Math.max(1, n));
        itemSub = new RankSubscriber[n];
        itemKind = new int[n];
        int i = 0;
        for (RankSubscriber s : subscribers) {
            // A replaying rank's SUB is left unread: live batches queue in ZMQ until the replay is done.
            if (s.replaying) {
                itemSub[i] = s;
                itemKind[i] = KIND_DEALER;
                poller.register(s.dealer, ZMQ.Poller.POLLIN);
                i++;
            } else {
                itemSub[i] = s;
                itemKind[i] = KIND_SUB;
                poller.register(s.sub, ZMQ.Poller.POLLIN);
                i++;
            }
            itemSub[i] = s;
            itemKind[i] = KIND_MONITOR;
            poller.register(s.monitor, ZMQ.Poller.POLLIN);
            i++;
        }
        if (i < n) {
            itemSub = java.util.Arrays.copyOf(itemSub, i);
            itemKind = java.util.Arrays.copyOf(itemKind, i);
        }
        pollerDirty = false;
    }

    /**
     * Reads one multipart message into the two alternating buffers. Returns the frame count (0 = nothing to read);
     * afterwards {@link #lastFrame} indexes the buffer holding the last frame, the other one holds the frame
     * before it. Frame lengths beyond the buffer are kept (callers treat them as oversize).
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

    private final boolean[] topicOk = new boolean[1];

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
        for (int m = 0; m < config.maxMessagesPerPoll() && !s.replaying; m++) {
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
        s.resetDealer(ctx);
        clear(s);
        s.seq.reset();
        pollerDirty = true;
    }

    private void clear(RankSubscriber s) {
        index.clearRank(s.source.endpointId(), s.rank);
        s.add(RankSubscriber.C_CLEARS, 1);
    }

    private void apply(RankSubscriber s, long seq) {
        int len = frameLen[lastFrame];
        s.set(RankSubscriber.C_LAST_SEQ, seq);
        if (len > frameBuf[lastFrame].length) {
            s.add(RankSubscriber.C_DECODE_ERRORS, 1);
            clear(s);
            return;
        }
        sink.target(s.source.endpointId(), s.rank, s.source.keyMode());
        int r = decoder.decode(frameBuf[lastFrame], 0, len);
        s.add(RankSubscriber.C_BATCHES, 1);
        s.add(RankSubscriber.C_EVENTS, decoder.lastEventCount());
        s.add(RankSubscriber.C_BLOCK_OPS, sink.blockOps());
        if (sink.clears() > 0) {
            s.add(RankSubscriber.C_CLEARS, sink.clears());
        }
        if (r == KvEventDecoder.MALFORMED) {
            s.add(RankSubscriber.C_DECODE_ERRORS, 1);
            clear(s);
        }
    }

    /** Stops the ingest thread (or, without one, closes the sockets on the caller's thread) and waits. */
    @Override
    public void close() {
        Thread t;
        synchronized (this) {
            t = thread;
            running = false;
        }
        if (t != null) {
            try {
                t.join(5_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        } else {
            closeAll();
        }
    }

    private void closeAll() {
        for (RankSubscriber s : subscribers) {
            s.close(ctx);
        }
        subscribers.clear();
        published = new RankSubscriber[0];
        if (poller != null) {
            poller.close();
            poller = null;
        }
        ctx.close();
    }
}
