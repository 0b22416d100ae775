package io.kvgate.perf.ingest;

import java.io.IOException;
import java.util.SplittableRandom;

import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/** vLLM-shaped KV-event payloads encoded with msgpack-core (the independent encoder). */
public final class Payloads {
    private Payloads() {
    }

    /**
     * {@code events} BlockStored events of {@code blocksPerEvent} blocks at block size {@code blockSize}, with
     * token ids, 12 fields each (the 2026 vLLM array form), keys taken from {@code keys} in order.
     */
    public static byte[] stored(long[] keys, int events, int blocksPerEvent, int blockSize, SplittableRandom rnd) {
        try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
            p.packArrayHeader(3).packDouble(1.7e9).packArrayHeader(events);
            int k = 0;
            for (int e = 0; e < events; e++) {
                p.packArrayHeader(12).packString("BlockStored").packArrayHeader(blocksPerEvent);
                long parent = k == 0 ? Long.MIN_VALUE : keys[k - 1];
                for (int b = 0; b < blocksPerEvent; b++) {
                    packUnsigned(p, keys[k++]);
                }
                if (parent == Long.MIN_VALUE) {
                    p.packNil();
                } else {
                    packUnsigned(p, parent);
                }
                p.packArrayHeader(blocksPerEvent * blockSize);
                for (int t = 0; t < blocksPerEvent * blockSize; t++) {
                    p.packInt(rnd.nextInt(151_936));
                }
                p.packInt(blockSize).packNil().packString("GPU").packNil().packNil().packInt(0).packNil().packNil();
            }
            p.packInt(0);
            return p.toByteArray();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    /** One BlockRemoved event with every key. */
    public static byte[] removed(long[] keys, int count) {
        try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
            p.packArrayHeader(3).packDouble(1.7e9).packArrayHeader(1);
            p.packArrayHeader(4).packString("BlockRemoved").packArrayHeader(count);
            for (int i = 0; i < count; i++) {
                packUnsigned(p, keys[i]);
            }
            p.packString("GPU").packInt(0);
            p.packInt(0);
            return p.toByteArray();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    /** vLLM sends its unsigned 64-bit keys as uint64 (0xcf) when >= 2^63. */
    static void packUnsigned(MessageBufferPacker p, long key) throws IOException {
        if (key < 0) {
            p.packBigInteger(new java.math.BigInteger(Long.toUnsignedString(key)));
        } else {
            p.packLong(key);
        }
    }
}
