package io.kvgate.tools.sim;

import io.kvgate.ingest.zmq.ZmqConnect;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * Publishes KV event batches like the engine's ZMQ publisher (engine-contracts §2.1/§2.3): one PUB socket per DP
 * rank (endpoint port + rank) sending 3-frame messages {@code [topic, seq 8-byte BE, payload]}, and optionally
 * one ROUTER replay socket per rank (replay port + rank) that answers a client's 8-byte start seq with
 * {@code [seq, payload]} frames for every buffered batch from that seq, ended by seq −1 and an empty payload.
 *
 * <p>Threading: the engine loop calls {@link #offer} and {@link #reset} (non-blocking, bounded queue: a full queue
 * drops the batch, like the publisher's send high-water mark — the gap shows in seq). One publisher thread owns
 * every ZMQ socket (JeroMQ sockets are not thread-safe) and the replay buffers.
 */
final class KvEventPublisher implements AutoCloseable {
    private record Batch(int rank, long seq, byte[] payload) {}

    private record Reset(int rank) {}

    private final ZContext zmq = new ZContext(1);
    private final ZMQ.Socket[] pubs;
    private final ZMQ.Socket[] routers;
    private final ArrayDeque<Batch>[] replay;
    private final int replaySteps;
    private final byte[] topic;
    private final ArrayBlockingQueue<Object> queue;
    private final Thread thread;
    private final SimStats stats;
    private volatile boolean running = true;
    volatile String lastError;

    @SuppressWarnings("unchecked")
    KvEventPublisher(SimulatorConfig c, SimStats stats, boolean bindPub) {
        this.stats = stats;
        this.topic = c.kvTopic.getBytes(StandardCharsets.UTF_8);
        this.queue = new ArrayBlockingQueue<>(c.eventQueueDepth);
        this.replaySteps = c.replayBufferSteps;
        SimulatorConfig.Endpoint pubEp = SimulatorConfig.Endpoint.parse(c.kvEventsEndpoint);
        SimulatorConfig.Endpoint replayEp = c.kvReplayEndpoint == null ? null
            : SimulatorConfig.Endpoint.parse(c.kvReplayEndpoint);
        pubs = new ZMQ.Socket[c.dpRanks];
        routers = replayEp == null ? new ZMQ.Socket[0] : new ZMQ.Socket[c.dpRanks];
        replay = (ArrayDeque<Batch>[]) new ArrayDeque<?>[c.dpRanks];
        try {
            for (int r = 0; r < c.dpRanks; r++) {
                pubs[r] = zmq.createSocket(SocketType.PUB);
                pubs[r].setSndHWM(100_000);
                pubs[r].setLinger(0);
                if (bindPub) {
                    pubs[r].bind(pubEp.withPortOffset(r));
                } else {
                    ZmqConnect.connect(pubs[r], pubEp.withPortOffset(r));
                }
                replay[r] = new ArrayDeque<>();
                if (replayEp != null) {
                    routers[r] = zmq.createSocket(SocketType.ROUTER);
                    routers[r].setLinger(0);
                    routers[r].bind(replayEp.withPortOffset(r));
                }
            }
        } catch (RuntimeException e) {
            zmq.close();
            throw new IllegalStateException("kv events: cannot open " + c.kvEventsEndpoint
                + (replayEp != null ? " / " + c.kvReplayEndpoint : "") + ": " + e, e);
        }
        thread = new Thread(this::run, "sim-kv-publisher");
        thread.setDaemon(true);
        thread.start();
    }

    /** Engine loop: queue a batch; false (and counted) when the queue is full. */
    boolean offer(int rank, long seq, byte[] payload) {
        if (queue.offer(new Batch(rank, seq, payload))) {
            stats.inc("event_batches_published");
            return true;
        }
        stats.inc("event_batches_dropped");
        return false;
    }

    /** Engine loop: the engine restarted; forget the rank's replay buffer (ordered with the batches). */
    void reset(int rank) {
        while (!queue.offer(new Reset(rank))) {
            queue.poll();
            stats.inc("event_batches_dropped");
        }
    }

    private void run() {
        ZMQ.Poller poller = routers.length == 0 ? null : zmq.createPoller(routers.length);
        if (poller != null) {
            for (ZMQ.Socket r : routers) {
                poller.register(r, ZMQ.Poller.POLLIN);
            }
        }
        try {
            while (running) {
                try {
                    Object item = poller == null ? queue.poll(20, TimeUnit.MILLISECONDS) : queue.poll();
                    while (item != null) {
                        handle(item);
                        item = queue.poll();
                    }
                    if (poller != null && poller.poll(2) > 0) {
                        for (int r = 0; r < routers.length; r++) {
                            if (poller.pollin(r)) {
                                serveReplay(r);
                            }
                        }
                    }
                } catch (RuntimeException e) {
                    // A socket error must not end publishing: count it and carry on (bad input is data).
                    if (running) {
                        stats.inc("event_publisher_errors");
                        lastError = e.toString();
                    }
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            if (poller != null) {
                poller.close();
            }
        }
    }

    private void handle(Object item) {
        if (item instanceof Batch b) {
            ZMQ.Socket pub = pubs[b.rank()];
            pub.sendMore(topic);
            pub.sendMore(seqBytes(b.seq()));
            pub.send(b.payload(), ZMQ.DONTWAIT);
            ArrayDeque<Batch> buf = replay[b.rank()];
            if (buf.size() == replaySteps) {
                buf.removeFirst();
            }
            buf.addLast(b);
        } else if (item instanceof Reset r) {
            replay[r.rank()].clear();
        }
    }

    private void serveReplay(int rank) {
        ZMQ.Socket router = routers[rank];
        byte[] identity = router.recv(ZMQ.DONTWAIT);
        if (identity == null) {
            return;
        }
        java.util.List<byte[]> rest = new java.util.ArrayList<>();
        while (router.hasReceiveMore() && rest.size() < 8) {
            rest.add(router.recv());
        }
        while (router.hasReceiveMore()) {
            router.recv();
        }
        // REQ clients put an empty delimiter before the body; answer in the same envelope.
        boolean delimited = rest.size() >= 2 && rest.get(0).length == 0;
        byte[] body = rest.isEmpty() ? new byte[0] : rest.get(rest.size() - 1);
        stats.inc("replay_requests");
        if (body.length != 8) {
            stats.inc("replay_malformed");
            reply(router, identity, delimited, seqBytes(-1), new byte[0]);
            return;
        }
        long start = ByteBuffer.wrap(body).getLong();
        for (Batch b : replay[rank]) {
            if (b.seq() >= start) {
                reply(router, identity, delimited, seqBytes(b.seq()), b.payload());
            }
        }
        reply(router, identity, delimited, seqBytes(-1), new byte[0]);
    }

    private static void reply(ZMQ.Socket router, byte[] identity, boolean delimited, byte[] seq, byte[] payload) {
        router.sendMore(identity);
        if (delimited) {
            router.sendMore(new byte[0]);
        }
        router.sendMore(seq);
        router.send(payload);
    }

    static byte[] seqBytes(long seq) {
        return ByteBuffer.allocate(8).putLong(seq).array();
    }

    @Override
    public void close() {
        running = false;
        try {
            thread.join(2_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        zmq.close();
    }
}
