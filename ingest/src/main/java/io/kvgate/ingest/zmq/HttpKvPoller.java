package io.kvgate.ingest.zmq;

import io.kvgate.control.log.Log;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicLongArray;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.ingest.codec.TrtllmEventDecoder;

/**
 * Drains TensorRT-LLM's {@code POST /kv_cache_events} of every HTTP-sourced endpoint, on the ingest thread: one NIO
 * {@link Selector} serves all of them without blocking (no thread per endpoint), stepped by
 * {@link KvEventIngest#doWork}, so the ingest thread stays the index's single writer.
 *
 * <p><b>One poll</b>: connect (or reuse the kept-alive connection), send the POST, read the response (Content-Length,
 * chunked, or until close) into a buffer bounded by {@code ingest.max_frame_bytes}, decode it with
 * {@link TrtllmEventDecoder} and apply it in learned-key mode (TensorRT-LLM's block hashes are internal: blocks are
 * keyed by the gateway's own chained hash of the events' tokens; engine hashes map to own keys for removals). The
 * next poll starts {@code kv_poll_ms} after the end of this one.
 *
 * <p><b>Losing events clears</b>: the endpoint drains on read, so a poll that fails after sending (refused,
 * timed out, a non-200 status, a body over the bound, malformed JSON) may have lost events, removals among them —
 * every rank of the endpoint is cleared (O(1) in the index) and its event-id tracking restarts. Per rank, event ids
 * must be consecutive: a jump forward (the engine's {@code event_buffer_max_size} overflowed) clears the rank like a
 * ZeroMQ gap, a jump back (a new engine process) clears it like a restart; a {@code created} event (pools announced
 * at start) clears it too. A failed poll is retried with the ingest's capped exponential backoff
 * ({@code ingest.retry_initial_ms}/{@code retry_max_ms}). One exception: EOF before any response byte on a
 * kept-alive connection (the server closed it while idle) re-sends once on a new connection without counting a
 * failure (had the server drained before closing, the next poll's id jump clears).
 *
 * <p><b>Another consumer</b>: TensorRT-LLM's handler removes what each POST returns ({@code openai_server.py}
 * {@code get_kv_cache_events} loops over {@code get_kv_cache_events_async} until IndexError; V2's
 * {@code get_latest_events} clears {@code _events}), and other clients drain the same route: TensorRT-LLM's own
 * {@code KvCacheAwareRouter} ({@code serve/router.py} {@code poll_events}: {@code session.post(server +
 * "/kv_cache_events")}), Dynamo's legacy poller, another kvgate replica. Each consumer then misses what the others
 * took, so (nearly) every poll that returns events starts with an id jump and clears the rank. An engine overflowing
 * its buffer jumps now and then; a second drainer jumps on most polls: at least {@link #OTHER_DRAINER_MIN_JUMPS} of
 * the last {@link #OTHER_DRAINER_WINDOW} polls that returned events starts an episode (counted, logged once, shown
 * in the status), and at most one jump in that window ends it.
 *
 * <p><b>Status</b>: one {@link SubscriberStatus} per (endpoint, DP rank), states {@code resolving},
 * {@code connecting} (no poll answered yet), {@code up} (the last poll answered) and {@code retrying}; errors by
 * cause {@link #CAUSES}.
 *
 * <p><b>Threading contract:</b> everything but {@link #status()} runs on the ingest thread.
 */
final class HttpKvPoller implements AutoCloseable {
    /** Failure causes (label {@code cause} of {@code kvgate_kv_subscriber_errors_total}). */
    static final String[] CAUSES = {"resolve", "connect", "http", "timeout", "too_large", "internal"};
    static final int CAUSE_RESOLVE = 0;
    static final int CAUSE_CONNECT = 1;
    static final int CAUSE_HTTP = 2;
    static final int CAUSE_TIMEOUT = 3;
    static final int CAUSE_TOO_LARGE = 4;
    static final int CAUSE_INTERNAL = 5;

    /** A poll (connect, send, whole response) not done by then fails as {@code timeout}. */
    static final long DEFAULT_REQUEST_TIMEOUT_NS = 5_000_000_000L;
    /** Polls that returned events, judged together for the other-drainer pattern (fits an int bit ring). */
    static final int OTHER_DRAINER_WINDOW = 8;
    /** Polls of that window that began with an id jump for the pattern to start (an overflowing buffer rarely does). */
    static final int OTHER_DRAINER_MIN_JUMPS = 6;

    /** Status line and headers of a response may not exceed this. */
    static final int MAX_HEADER_BYTES = 16 * 1024;

    private static final int C_LAST_SEQ = 0;
    private static final int C_GAPS = 1;
    private static final int C_RESTARTS = 2;
    private static final int C_DECODE_ERRORS = 3;
    private static final int C_CLEARS = 4;
    private static final int C_BATCHES = 5;
    private static final int C_EVENTS = 6;
    private static final int C_BLOCK_OPS = 7;
    private static final int C_RECONNECTS = 8;
    private static final int C_ERRORS = 9;
    private static final int COUNTERS = C_ERRORS + CAUSES.length;

    private enum Phase { RESOLVE, IDLE, CONNECT, WRITE, READ }

    private final BlockIndex index;
    private final NanoClock clock;
    private final IngestConfig config;
    private final IndexEventSink sink;
    private final HostResolver resolver;
    private final Executor resolverExecutor;
    private final long requestTimeoutNs;
    private final TrtllmEventDecoder decoder;
    private final List<Endpoint> endpoints = new ArrayList<>();
    private volatile Endpoint[] published = new Endpoint[0];
    private Selector selector;

    /** The endpoint whose body is being decoded, and the rank its last event was aimed at (-1: none yet). */
    private Endpoint current;
    private int currentRank = -1;
    private int ranksSeen;
    /** The body being applied had a forward event-id jump on some rank. */
    private boolean jumpedThisPoll;

    HttpKvPoller(BlockIndex index, NanoClock clock, IngestConfig config, IndexEventSink sink, HostResolver resolver,
                 Executor resolverExecutor, long requestTimeoutNs) {
        this.index = index;
        this.clock = clock;
        this.config = config;
        this.sink = sink;
        this.resolver = resolver;
        this.resolverExecutor = resolverExecutor;
        this.requestTimeoutNs = requestTimeoutNs;
        this.decoder = new TrtllmEventDecoder(sink, this::onEvent);
    }

    /** One polled endpoint: its connection, the poll in flight, per-rank sequence state and counters. */
    static final class Endpoint {
        final HttpKvEventSource source;
        final String host;
        final byte[] request;
        final AtomicLongArray[] counters;
        final long[] expected;
        final boolean[] dirty;
        volatile String state = "resolving";
        volatile String lastError = "";
        /** One bit per recent poll that returned events, newest lowest: 1 when it began with a forward id jump. */
        int jumpHistory;
        int pollsJudged;
        volatile boolean otherDrainer;
        volatile long otherDrainerEpisodes;
        Phase phase = Phase.RESOLVE;
        CompletableFuture<String> resolving;
        InetSocketAddress address;
        SocketChannel channel;
        SelectionKey key;
        boolean reused;
        boolean answered;
        int failures;
        long nextPollNs;
        long deadlineNs;
        ByteBuffer out;
        // Response parsing.
        byte[] in = new byte[64 * 1024];
        int inLen;
        int headerEnd = -1;
        int status;
        long contentLength = -1;
        boolean chunked;
        boolean closeAfter;
        int chunkPos;
        int bodyEnd;
        boolean chunksDone;

        Endpoint(HttpKvEventSource source) {
            this.source = source;
            this.host = source.host();
            String hostHeader = (host.indexOf(':') >= 0 ? "[" + host + "]" : host) + ":" + source.port();
            this.request = ("POST " + source.target() + " HTTP/1.1\r\nHost: " + hostHeader
                + "\r\nContent-Length: 0\r\nAccept: application/json\r\nUser-Agent: kvgate-ingest\r\n\r\n")
                .getBytes(StandardCharsets.US_ASCII);
            this.counters = new AtomicLongArray[source.dpRanks()];
            this.expected = new long[source.dpRanks()];
            this.dirty = new boolean[source.dpRanks()];
            for (int r = 0; r < counters.length; r++) {
                counters[r] = new AtomicLongArray(COUNTERS);
                counters[r].set(C_LAST_SEQ, -1);
                expected[r] = -1;
            }
        }

        void add(int rank, int counter, long delta) {
            counters[rank].setRelease(counter, counters[rank].getPlain(counter) + delta);
        }

        void resetResponse() {
            inLen = 0;
            headerEnd = -1;
            status = 0;
            contentLength = -1;
            chunked = false;
            closeAfter = false;
            chunkPos = 0;
            bodyEnd = 0;
            chunksDone = false;
        }
    }

    void add(HttpKvEventSource source) {
        remove(source.endpointId());
        Endpoint e = new Endpoint(source);
        e.nextPollNs = clock.nanoTime();
        endpoints.add(e);
        published = endpoints.toArray(new Endpoint[0]);
    }

    /** Stops polling the endpoint (its blocks are the caller's to drop). */
    void remove(int endpointId) {
        for (int i = endpoints.size() - 1; i >= 0; i--) {
            Endpoint e = endpoints.get(i);
            if (e.source.endpointId() == endpointId) {
                closeChannel(e);
                if (e.resolving != null) {
                    e.resolving.cancel(false);
                }
                endpoints.remove(i);
            }
        }
        published = endpoints.toArray(new Endpoint[0]);
    }

    boolean isEmpty() {
        return endpoints.isEmpty();
    }

    /** Non-blocking step: I/O that is ready, polls that are due, deadlines that passed. Returns the work done. */
    int doWork() {
        if (endpoints.isEmpty()) {
            return 0;
        }
        int work = 0;
        long now = clock.nanoTime();
        if (selector != null) {
            try {
                if (selector.selectNow() > 0) {
                    Iterator<SelectionKey> it = selector.selectedKeys().iterator();
                    while (it.hasNext()) {
                        SelectionKey k = it.next();
                        it.remove();
                        Endpoint e = (Endpoint) k.attachment();
                        work++;
                        try {
                            onReady(e, k, now);
                        } catch (IOException ex) {
                            fail(e, e.phase == Phase.CONNECT ? CAUSE_CONNECT : CAUSE_HTTP, RankSubscriber.describe(ex), now);
                        } catch (RuntimeException ex) {
                            fail(e, CAUSE_INTERNAL, RankSubscriber.describe(ex), now);
                        }
                    }
                }
            } catch (IOException ex) {
                throw new IllegalStateException("selector failed", ex);
            }
        }
        for (int i = 0; i < endpoints.size(); i++) {
            Endpoint e = endpoints.get(i);
            try {
                work += step(e, now);
            } catch (RuntimeException ex) {
                fail(e, CAUSE_INTERNAL, RankSubscriber.describe(ex), now);
            }
        }
        return work;
    }

    private int step(Endpoint e, long now) {
        switch (e.phase) {
            case RESOLVE -> {
                if (now - e.nextPollNs < 0) {
                    return 0;
                }
                if (e.resolving == null) {
                    startResolving(e);
                }
                if (!e.resolving.isDone()) {
                    return 0;
                }
                try {
                    e.address = new InetSocketAddress(InetAddress.getByName(e.resolving.join()), e.source.port());
                    e.resolving = null;
                    e.phase = Phase.IDLE;
                    if (!e.answered && !"retrying".equals(e.state)) {
                        e.state = "connecting";
                    }
                } catch (RuntimeException | java.net.UnknownHostException ex) {
                    e.resolving = null;
                    fail(e, CAUSE_RESOLVE, RankSubscriber.describe(ex), now);
                }
                return 1;
            }
            case IDLE -> {
                if (now - e.nextPollNs < 0) {
                    return 0;
                }
                startPoll(e, now);
                return 1;
            }
            default -> {
                if (now - e.deadlineNs >= 0) {
                    fail(e, CAUSE_TIMEOUT, "no complete answer within " + requestTimeoutNs / 1_000_000 + " ms ("
                        + e.phase.name().toLowerCase(java.util.Locale.ROOT) + ")", now);
                    return 1;
                }
                return 0;
            }
        }
    }

    private void startResolving(Endpoint e) {
        String host = e.host;
        if (PeerAllowList.literal(host) != null) {
            e.resolving = CompletableFuture.completedFuture(host);
            return;
        }
        e.state = "resolving";
        try {
            e.resolving = CompletableFuture.supplyAsync(() -> {
                try {
                    String ip = resolver.resolve(host);
                    if (PeerAllowList.literal(ip) == null) {
                        throw new IllegalStateException("resolver returned '" + ip + "' for " + host + ", not an IP literal");
                    }
                    return ip;
                } catch (java.net.UnknownHostException ex) {
                    throw new IllegalStateException(host + " does not resolve (" + ex.getMessage() + ")");
                }
            }, resolverExecutor);
        } catch (RejectedExecutionException ex) {
            e.resolving = CompletableFuture.failedFuture(new IllegalStateException("resolver queue full"));
        }
    }

    private void startPoll(Endpoint e, long now) {
        e.deadlineNs = now + requestTimeoutNs;
        e.out = ByteBuffer.wrap(e.request);
        e.resetResponse();
        try {
            if (e.channel != null && e.channel.isOpen()) {
                e.reused = true;
                e.phase = Phase.WRITE;
                e.key.interestOps(SelectionKey.OP_WRITE);
                return;
            }
            openChannel(e);
        } catch (IOException ex) {
            fail(e, CAUSE_CONNECT, RankSubscriber.describe(ex), now);
        }
    }

    private void openChannel(Endpoint e) throws IOException {
        if (selector == null) {
            selector = Selector.open();
        }
        e.reused = false;
        SocketChannel ch = SocketChannel.open();
        e.channel = ch;
        ch.configureBlocking(false);
        ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
        boolean connected = ch.connect(e.address);
        e.phase = connected ? Phase.WRITE : Phase.CONNECT;
        e.key = ch.register(selector, connected ? SelectionKey.OP_WRITE : SelectionKey.OP_CONNECT, e);
    }

    private void onReady(Endpoint e, SelectionKey k, long now) throws IOException {
        if (!k.isValid() || e.key != k) {
            return;
        }
        switch (e.phase) {
            case CONNECT -> {
                if (k.isConnectable() && e.channel.finishConnect()) {
                    e.phase = Phase.WRITE;
                    k.interestOps(SelectionKey.OP_WRITE);
                }
            }
            case WRITE -> {
                if (k.isWritable()) {
                    e.channel.write(e.out);
                    if (!e.out.hasRemaining()) {
                        e.phase = Phase.READ;
                        k.interestOps(SelectionKey.OP_READ);
                    }
                }
            }
            case READ -> {
                if (k.isReadable()) {
                    read(e, now);
                }
            }
            default -> {
            }
        }
    }

    /** Largest buffer a response may need: the body bound plus its status line and headers. */
    private int bufferCap() {
        return config.maxFrameBytes() + MAX_HEADER_BYTES;
    }

    private void read(Endpoint e, long now) throws IOException {
        while (true) {
            if (e.inLen == e.in.length) {
                if (e.in.length >= bufferCap()) {
                    fail(e, CAUSE_TOO_LARGE, "response over ingest.max_frame_bytes=" + config.maxFrameBytes(), now);
                    return;
                }
                e.in = java.util.Arrays.copyOf(e.in, (int) Math.min(bufferCap(), 2L * e.in.length));
            }
            int n = e.channel.read(ByteBuffer.wrap(e.in, e.inLen, e.in.length - e.inLen));
            if (n == 0) {
                return;
            }
            if (n < 0) {
                onEof(e, now);
                return;
            }
            e.inLen += n;
            int r = parse(e);
            if (r < 0) {
                return; // failed inside
            }
            if (r == 1) {
                complete(e, now);
                return;
            }
        }
    }

    private void onEof(Endpoint e, long now) throws IOException {
        if (e.inLen == 0 && e.reused) {
            // The server closed the idle kept-alive connection: send again on a new one (not a failure).
            closeChannel(e);
            e.out = ByteBuffer.wrap(e.request);
            openChannel(e);
            return;
        }
        if (e.headerEnd >= 0 && !e.chunked && e.contentLength < 0) {
            e.bodyEnd = e.inLen; // body delimited by the close
            e.closeAfter = true;
            complete(e, now);
            return;
        }
        fail(e, CAUSE_HTTP, "connection closed before the response was complete (" + e.inLen + " bytes read)", now);
    }

    /** Advances response parsing: 1 = complete, 0 = needs more bytes, -1 = failed (already recorded). */
    private int parse(Endpoint e) {
        long now = clock.nanoTime();
        if (e.headerEnd < 0) {
            int end = indexOf(e.in, 0, Math.min(e.inLen, MAX_HEADER_BYTES), "\r\n\r\n");
            if (end < 0) {
                if (e.inLen >= MAX_HEADER_BYTES) {
                    fail(e, CAUSE_HTTP, "response headers over " + MAX_HEADER_BYTES + " bytes", now);
                    return -1;
                }
                return 0;
            }
            e.headerEnd = end + 4;
            if (!parseHead(e, new String(e.in, 0, end, StandardCharsets.ISO_8859_1))) {
                fail(e, CAUSE_HTTP, "malformed response head: "
                    + new String(e.in, 0, Math.min(end, 80), StandardCharsets.ISO_8859_1), now);
                return -1;
            }
            if (e.contentLength > config.maxFrameBytes()) {
                fail(e, CAUSE_TOO_LARGE, "Content-Length " + e.contentLength + " over ingest.max_frame_bytes="
                    + config.maxFrameBytes(), now);
                return -1;
            }
            e.chunkPos = e.headerEnd;
            e.bodyEnd = e.headerEnd;
        }
        if (e.chunked) {
            return parseChunks(e, now);
        }
        if (e.contentLength >= 0) {
            if (e.inLen - e.headerEnd >= e.contentLength) {
                e.bodyEnd = (int) (e.headerEnd + e.contentLength);
                return 1;
            }
            return 0;
        }
        if (e.inLen - e.headerEnd > config.maxFrameBytes()) {
            fail(e, CAUSE_TOO_LARGE, "response over ingest.max_frame_bytes=" + config.maxFrameBytes(), now);
            return -1;
        }
        return 0; // until close
    }

    private static boolean parseHead(Endpoint e, String head) {
        String[] lines = head.split("\r\n");
        String[] status = lines[0].split(" ", 3);
        if (status.length < 2 || !status[0].startsWith("HTTP/1.")) {
            return false;
        }
        try {
            e.status = Integer.parseInt(status[1]);
        } catch (NumberFormatException ex) {
            return false;
        }
        boolean http10 = status[0].equals("HTTP/1.0");
        boolean keepAlive = false;
        for (int i = 1; i < lines.length; i++) {
            int colon = lines[i].indexOf(':');
            if (colon <= 0) {
                return false;
            }
            String name = lines[i].substring(0, colon).trim().toLowerCase(java.util.Locale.ROOT);
            String value = lines[i].substring(colon + 1).trim().toLowerCase(java.util.Locale.ROOT);
            switch (name) {
                case "content-length" -> {
                    try {
                        e.contentLength = Long.parseLong(value);
                    } catch (NumberFormatException ex) {
                        return false;
                    }
                    if (e.contentLength < 0) {
                        return false;
                    }
                }
                case "transfer-encoding" -> e.chunked = value.contains("chunked");
                case "connection" -> {
                    e.closeAfter |= value.contains("close");
                    keepAlive = value.contains("keep-alive");
                }
                default -> {
                }
            }
        }
        if (http10 && !keepAlive) {
            e.closeAfter = true;
        }
        return true;
    }

    /**
     * Decodes complete chunks in place: each chunk's data is moved down to {@code bodyEnd} and the unread rest
     * compacted behind it, so the buffer holds the body so far plus at most one partial chunk.
     */
    private int parseChunks(Endpoint e, long now) {
        while (!e.chunksDone) {
            int lineEnd = indexOf(e.in, e.chunkPos, e.inLen, "\r\n");
            if (lineEnd < 0) {
                if (e.inLen - e.chunkPos > 1024) {
                    fail(e, CAUSE_HTTP, "chunk size line over 1024 bytes", now);
                    return -1;
                }
                break;
            }
            String line = new String(e.in, e.chunkPos, lineEnd - e.chunkPos, StandardCharsets.ISO_8859_1);
            int semi = line.indexOf(';');
            long size;
            try {
                size = Long.parseLong((semi >= 0 ? line.substring(0, semi) : line).trim(), 16);
            } catch (NumberFormatException ex) {
                fail(e, CAUSE_HTTP, "bad chunk size line '" + line + "'", now);
                return -1;
            }
            if (size < 0 || e.bodyEnd - e.headerEnd + size > config.maxFrameBytes()) {
                fail(e, CAUSE_TOO_LARGE, "chunked body over ingest.max_frame_bytes=" + config.maxFrameBytes(), now);
                return -1;
            }
            int dataStart = lineEnd + 2;
            if (size == 0) {
                // Last chunk: skip trailer lines up to the empty line.
                int p = dataStart;
                while (true) {
                    int le = indexOf(e.in, p, e.inLen, "\r\n");
                    if (le < 0) {
                        return 0;
                    }
                    if (le == p) {
                        e.chunksDone = true;
                        break;
                    }
                    p = le + 2;
                }
                break;
            }
            if (e.inLen < dataStart + size + 2) {
                break;
            }
            int dataEnd = (int) (dataStart + size);
            if (e.in[dataEnd] != '\r' || e.in[dataEnd + 1] != '\n') {
                fail(e, CAUSE_HTTP, "chunk not followed by CRLF", now);
                return -1;
            }
            System.arraycopy(e.in, dataStart, e.in, e.bodyEnd, (int) size);
            e.bodyEnd += (int) size;
            e.chunkPos = dataEnd + 2;
        }
        if (e.chunksDone) {
            return 1;
        }
        // Compact the unread rest down behind the decoded body.
        if (e.chunkPos > e.bodyEnd) {
            int rest = e.inLen - e.chunkPos;
            System.arraycopy(e.in, e.chunkPos, e.in, e.bodyEnd, rest);
            e.inLen = e.bodyEnd + rest;
            e.chunkPos = e.bodyEnd;
        }
        return 0;
    }

    private static int indexOf(byte[] b, int from, int to, String s) {
        outer:
        for (int i = from; i <= to - s.length(); i++) {
            for (int j = 0; j < s.length(); j++) {
                if (b[i + j] != s.charAt(j)) {
                    continue outer;
                }
            }
            return i;
        }
        return -1;
    }

    /** A whole response is in: apply a 200's events, fail anything else. */
    private void complete(Endpoint e, long now) {
        if (e.status != 200) {
            String body = new String(e.in, e.headerEnd, Math.min(200, Math.max(0, e.bodyEnd - e.headerEnd)),
                StandardCharsets.UTF_8);
            fail(e, CAUSE_HTTP, "HTTP " + e.status + (body.isBlank() ? "" : ": " + body.strip()), now);
            return;
        }
        apply(e, e.in, e.headerEnd, e.bodyEnd - e.headerEnd);
        if (e.closeAfter) {
            closeChannel(e);
        } else {
            e.key.interestOps(0);
        }
        if (e.answered && "retrying".equals(e.state)) {
            for (int r = 0; r < e.counters.length; r++) {
                e.add(r, C_RECONNECTS, 1);
            }
        }
        e.answered = true;
        e.failures = 0;
        e.state = "up";
        e.phase = Phase.IDLE;
        e.nextPollNs = now + e.source.pollNs();
        if (e.in.length > 1 << 20 && e.bodyEnd - e.headerEnd < 1 << 18) {
            e.in = new byte[64 * 1024]; // a burst grew the buffer: do not keep it for small polls
        }
    }

    /** Decodes and applies one drained body (also the tests' entry point). */
    void apply(Endpoint e, byte[] body, int off, int len) {
        current = e;
        currentRank = -1;
        ranksSeen = 0;
        long badBefore = decoder.badEvents();
        jumpedThisPoll = false;
        int r = decoder.decode(body, off, len);
        flushRank();
        if (ranksSeen != 0) {
            judgeOtherDrainer(e, jumpedThisPoll);
        }
        if (decoder.badEvents() > badBefore) {
            // Each such event cost itself alone (TrtllmEventDecoder): said here, without clearing anything more.
            e.lastError = (decoder.badEvents() - badBefore) + " event(s) with an unusable value skipped in the last body";
        }
        for (int rank = 0; rank < e.counters.length; rank++) {
            if ((ranksSeen & (1 << rank)) != 0) {
                e.add(rank, C_BATCHES, 1);
            }
        }
        if (r == TrtllmEventDecoder.MALFORMED) {
            for (int rank = 0; rank < e.counters.length; rank++) {
                e.add(rank, C_DECODE_ERRORS, 1);
            }
            e.lastError = "malformed /kv_cache_events body (" + decoder.lastEventCount() + " events applied before it)";
            clearAll(e);
        }
        current = null;
    }

    /** Before each event: rank bounds and per-rank event-id continuity; aims the sink. */
    private boolean onEvent(long eventId, int rank, long windowSize) {
        Endpoint e = current;
        flushRank();
        if (rank >= e.counters.length) {
            e.add(0, C_DECODE_ERRORS, 1);
            e.lastError = "event " + eventId + " names attention_dp_rank " + rank + " but dp_ranks is "
                + e.counters.length;
            return false;
        }
        long exp = e.expected[rank];
        if (exp >= 0 && eventId != exp) {
            e.add(rank, eventId > exp ? C_GAPS : C_RESTARTS, 1);
            jumpedThisPoll |= eventId > exp;
            clear(e, rank);
        }
        e.expected[rank] = eventId + 1;
        e.counters[rank].setRelease(C_LAST_SEQ, eventId);
        e.add(rank, C_EVENTS, 1);
        e.dirty[rank] = true;
        ranksSeen |= 1 << rank;
        sink.target(e.source.endpointId(), rank, e.source.mode());
        currentRank = rank;
        return true;
    }

    /** Adds one poll that returned events to the endpoint's window; starts or ends an other-drainer episode. */
    private static void judgeOtherDrainer(Endpoint e, boolean jumped) {
        int mask = (1 << OTHER_DRAINER_WINDOW) - 1;
        e.jumpHistory = ((e.jumpHistory << 1) | (jumped ? 1 : 0)) & mask;
        e.pollsJudged = Math.min(e.pollsJudged + 1, OTHER_DRAINER_WINDOW);
        int jumps = Integer.bitCount(e.jumpHistory);
        if (!e.otherDrainer && jumps >= OTHER_DRAINER_MIN_JUMPS) {
            e.otherDrainer = true;
            e.otherDrainerEpisodes++;
            Log.warn("ingest: another consumer drains " + e.source.url() + ": " + jumps + " of the last "
                + e.pollsJudged + " polls began with an event-id jump (each clears the rank); one consumer may drain a"
                + " TensorRT-LLM engine; use its ZeroMQ publisher or a single ingest replica");
        } else if (e.otherDrainer && e.pollsJudged == OTHER_DRAINER_WINDOW && jumps <= 1) {
            e.otherDrainer = false;
        }
    }

    /** Books the sink's work for the rank it was aimed at. */
    private void flushRank() {
        if (currentRank < 0) {
            return;
        }
        current.add(currentRank, C_BLOCK_OPS, sink.blockOps());
        if (sink.clears() > 0) {
            current.add(currentRank, C_CLEARS, sink.clears());
        }
        sink.target(current.source.endpointId(), currentRank, current.source.mode()); // zero its per-target counts
        currentRank = -1;
    }

    private void clear(Endpoint e, int rank) {
        index.clearRank(e.source.endpointId(), rank);
        e.add(rank, C_CLEARS, 1);
        e.dirty[rank] = false;
    }

    /** Everything the endpoint held may be stale: clear each rank that holds anything, restart id tracking. */
    private void clearAll(Endpoint e) {
        for (int r = 0; r < e.counters.length; r++) {
            if (e.dirty[r]) {
                clear(e, r);
            }
            e.expected[r] = -1;
        }
    }

    private void fail(Endpoint e, int cause, String message, long now) {
        closeChannel(e);
        e.failures++;
        for (int r = 0; r < e.counters.length; r++) {
            e.add(r, C_ERRORS + cause, 1);
        }
        e.lastError = CAUSES[cause] + ": " + message;
        e.state = "retrying";
        clearAll(e);
        e.phase = cause == CAUSE_RESOLVE ? Phase.RESOLVE : Phase.IDLE;
        e.nextPollNs = now + config.retryDelayNs(e.failures);
    }

    private static void closeChannel(Endpoint e) {
        if (e.key != null) {
            e.key.cancel();
            e.key = null;
        }
        if (e.channel != null) {
            try {
                e.channel.close();
            } catch (IOException ignored) {
                // closing: nothing to recover
            }
            e.channel = null;
        }
    }

    /** Per (endpoint, rank) state and counters; safe from any thread. */
    List<SubscriberStatus> status() {
        Endpoint[] eps = published;
        List<SubscriberStatus> out = new ArrayList<>();
        for (Endpoint e : eps) {
            String state = e.state;
            for (int r = 0; r < e.counters.length; r++) {
                AtomicLongArray c = e.counters[r];
                Map<String, Long> errors = new LinkedHashMap<>();
                for (int k = 0; k < CAUSES.length; k++) {
                    long v = c.getAcquire(C_ERRORS + k);
                    if (v != 0) {
                        errors.put(CAUSES[k], v);
                    }
                }
                out.add(new SubscriberStatus(e.source.endpointId(), r, e.source.url(), e.source.label(), state,
                    e.lastError, errors, "up".equals(state), c.getAcquire(C_LAST_SEQ), c.getAcquire(C_GAPS), 0, 0,
                    c.getAcquire(C_RESTARTS), c.getAcquire(C_RECONNECTS), c.getAcquire(C_DECODE_ERRORS),
                    c.getAcquire(C_CLEARS), c.getAcquire(C_BATCHES), c.getAcquire(C_EVENTS), c.getAcquire(C_BLOCK_OPS),
                    Map.of(), e.otherDrainer, e.otherDrainerEpisodes));
            }
        }
        return out;
    }

    /** Tests: the endpoint polled for {@code endpointId}, or null. */
    Endpoint endpoint(int endpointId) {
        for (Endpoint e : endpoints) {
            if (e.source.endpointId() == endpointId) {
                return e;
            }
        }
        return null;
    }

    @Override
    public void close() {
        for (Endpoint e : endpoints) {
            closeChannel(e);
            if (e.resolving != null) {
                e.resolving.cancel(false);
            }
        }
        endpoints.clear();
        published = new Endpoint[0];
        if (selector != null) {
            try {
                selector.close();
            } catch (IOException ignored) {
                // closing
            }
            selector = null;
        }
    }
}
