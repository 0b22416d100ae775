package io.kvgate.ingest.zmq;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * A loopback stand-in for one engine DP rank's publisher: a real JeroMQ PUB for live batches and a ROUTER serving
 * replay from its buffer, both pumped by the test thread (no threads of its own).
 */
final class TestEngine implements AutoCloseable {
    final ZContext ctx = new ZContext(1);
    final ZMQ.Socket pub;
    final ZMQ.Socket router;
    final byte[] topic;
    final boolean fiveFrameReplay;
    final List<byte[]> sent = new ArrayList<>(); // index = seq
    int replayRequests;
    long bufferStartSeq; // replay buffer holds seqs >= this

    /** @param connectTo null to bind the PUB at pubUri, else connect the PUB there (gateway binds) */
    TestEngine(String pubUri, boolean pubConnects, String replayUri, String topic, boolean fiveFrameReplay) {
        this.topic = topic.getBytes(StandardCharsets.UTF_8);
        this.fiveFrameReplay = fiveFrameReplay;
        pub = ctx.createSocket(SocketType.PUB);
        pub.setLinger(0);
        pub.setSndHWM(100_000);
        if (pubConnects) {
            ZmqConnect.connect(pub, pubUri);
        } else {
            pub.bind(pubUri);
        }
        if (replayUri != null) {
            router = ctx.createSocket(SocketType.ROUTER);
            router.setLinger(0);
            router.bind(replayUri);
        } else {
            router = null;
        }
    }

    /** Encodes the next batch (seq = number already sent) and publishes it unless {@code drop}. */
    long publish(byte[] payload, boolean drop) {
        long seq = sent.size();
        sent.add(payload);
        if (!drop) {
            sendLive(seq, payload);
        }
        return seq;
    }

    void sendLive(long seq, byte[] payload) {
        pub.sendMore(topic);
        pub.sendMore(be(seq));
        pub.send(payload);
    }

    /** Restart: the next batch is seq 0 again and the replay buffer is empty. */
    void restart() {
        sent.clear();
        bufferStartSeq = 0;
    }

    /** Answers pending replay requests (vLLM protocol): [id, "", seq] in; [id, "", (topic,) seq, payload]* out. */
    void pumpReplay() {
        if (router == null) {
            return;
        }
        while (true) {
            byte[] id = router.recv(ZMQ.DONTWAIT);
            if (id == null) {
                return;
            }
            List<byte[]> rest = new ArrayList<>();
            while (router.hasReceiveMore()) {
                rest.add(router.recv());
            }
            if (rest.size() != 2 || rest.get(0).length != 0 || rest.get(1).length != 8) {
                continue; // vLLM ignores anything but [identity, "", seq]
            }
            replayRequests++;
            long start = java.nio.ByteBuffer.wrap(rest.get(1)).getLong();
            for (long s = Math.max(start, bufferStartSeq); s < sent.size(); s++) {
                router.sendMore(id);
                router.sendMore(new byte[0]);
                if (fiveFrameReplay) {
                    router.sendMore(topic);
                }
                router.sendMore(be(s));
                router.send(sent.get((int) s));
            }
            router.sendMore(id);
            router.sendMore(new byte[0]);
            router.sendMore(be(-1));
            router.send(new byte[0]);
        }
    }

    static byte[] be(long v) {
        return java.nio.ByteBuffer.allocate(8).putLong(v).array();
    }

    @Override
    public void close() {
        ctx.close();
    }

    // ------------------------------------------------------------------ payload builders (msgpack-core encoder)

    static byte[] batch(Object... events) {
        try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
            p.packArrayHeader(3).packDouble(1.0).packArrayHeader(events.length);
            for (Object e : events) {
                ((Ev) e).write(p);
            }
            p.packNil();
            return p.toByteArray();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    interface Ev {
        void write(MessageBufferPacker p) throws IOException;
    }

    static Ev stored(long parentOrMin, int blockSize, int[] tokens, long... keys) {
        return p -> {
            p.packArrayHeader(7).packString("BlockStored").packArrayHeader(keys.length);
            for (long k : keys) {
                p.packLong(k);
            }
            if (parentOrMin == Long.MIN_VALUE) {
                p.packNil();
            } else {
                p.packLong(parentOrMin);
            }
            p.packArrayHeader(tokens.length);
            for (int t : tokens) {
                p.packInt(t);
            }
            p.packInt(blockSize).packNil().packString("GPU");
        };
    }

    static Ev stored(long... keys) {
        return stored(Long.MIN_VALUE, 1, new int[keys.length], keys);
    }

    static Ev removed(long... keys) {
        return p -> {
            p.packArrayHeader(3).packString("BlockRemoved").packArrayHeader(keys.length);
            for (long k : keys) {
                p.packLong(k);
            }
            p.packString("GPU");
        };
    }

    static Ev cleared() {
        return p -> p.packArrayHeader(1).packString("AllBlocksCleared");
    }
}
