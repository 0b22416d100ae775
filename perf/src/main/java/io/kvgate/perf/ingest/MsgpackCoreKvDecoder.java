package io.kvgate.perf.ingest;

import java.io.IOException;

import org.msgpack.core.MessageFormat;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.core.buffer.ArrayBufferInput;

/**
 * Baseline: the same array-form decode written the usual way on msgpack-core's {@link MessageUnpacker} (reused
 * unpacker and input, tags read with {@code unpackString}); it hands keys/tokens to the same kind of callback.
 * Handles the array forms of the benchmark payloads only.
 */
public final class MsgpackCoreKvDecoder {
    public interface Sink {
        void stored(long[] keys, int n, int[] tokens, int tokenCount, int blockSize);

        void removed(long[] keys, int n);
    }

    private final ArrayBufferInput input = new ArrayBufferInput(new byte[0]);
    private final MessageUnpacker unpacker = MessagePack.newDefaultUnpacker(input);
    private final long[] keys = new long[1 << 16];
    private final int[] tokens = new int[1 << 19];

    public int decode(byte[] payload, Sink sink) throws IOException {
        input.reset(payload);
        unpacker.reset(input);
        int n = unpacker.unpackArrayHeader();
        unpacker.unpackDouble();
        int events = unpacker.unpackArrayHeader();
        for (int e = 0; e < events; e++) {
            int fields = unpacker.unpackArrayHeader();
            String tag = unpacker.unpackString();
            if ("BlockStored".equals(tag)) {
                int k = unpacker.unpackArrayHeader();
                for (int i = 0; i < k; i++) {
                    keys[i] = unpackKey();
                }
                if (!unpacker.tryUnpackNil()) {
                    unpackKey();
                }
                int t = unpacker.unpackArrayHeader();
                for (int i = 0; i < t; i++) {
                    tokens[i] = unpacker.unpackInt();
                }
                int bs = unpacker.unpackInt();
                for (int i = 5; i < fields; i++) {
                    unpacker.skipValue();
                }
                sink.stored(keys, k, tokens, t, bs);
            } else if ("BlockRemoved".equals(tag)) {
                int k = unpacker.unpackArrayHeader();
                for (int i = 0; i < k; i++) {
                    keys[i] = unpackKey();
                }
                for (int i = 2; i < fields; i++) {
                    unpacker.skipValue();
                }
                sink.removed(keys, k);
            } else {
                for (int i = 1; i < fields; i++) {
                    unpacker.skipValue();
                }
            }
        }
        for (int i = 2; i < n; i++) {
            unpacker.skipValue();
        }
        return events;
    }

    private long unpackKey() throws IOException {
        if (unpacker.getNextFormat() == MessageFormat.UINT64) {
            return unpacker.unpackBigInteger().longValue();
        }
        return unpacker.unpackLong();
    }
}
