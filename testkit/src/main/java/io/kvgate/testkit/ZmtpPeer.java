package io.kvgate.testkit;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * Bytes a raw TCP peer sends to speak ZMTP 3.0 to a ZeroMQ socket without a ZeroMQ library, for tests that play a
 * hostile publisher against the gateway's KV ingest (a bind socket takes any peer that connects).
 */
public final class ZmtpPeer {
    /** The size a negative declared frame length takes in the review's B-1 reproduction (sign bit set). */
    public static final long NEGATIVE_FRAME_SIZE = 0x80000000F1C7A00FL;

    private ZmtpPeer() {}

    /**
     * A ZMTP 3.0 greeting (NULL mechanism, as client) + READY(Socket-Type=PUB) + the 9-byte header of a long message
     * frame declaring {@code size} bytes; the body is never sent, so what the receiver does with the declared size
     * alone is what is tested.
     */
    public static byte[] pubHandshakeThenFrameHeader(long size) {
        byte[] name = "Socket-Type".getBytes(StandardCharsets.US_ASCII);
        byte[] value = "PUB".getBytes(StandardCharsets.US_ASCII);
        int readyBody = 1 + 5 + 1 + name.length + 4 + value.length;
        ByteBuffer b = ByteBuffer.allocate(64 + 2 + readyBody + 9);
        b.put((byte) 0xFF).put(new byte[8]).put((byte) 0x7F).put((byte) 3).put((byte) 0);
        byte[] mechanism = new byte[20];
        System.arraycopy("NULL".getBytes(StandardCharsets.US_ASCII), 0, mechanism, 0, 4);
        b.put(mechanism).put((byte) 0).put(new byte[31]);
        b.put((byte) 0x04).put((byte) readyBody).put((byte) 5).put("READY".getBytes(StandardCharsets.US_ASCII));
        b.put((byte) name.length).put(name).putInt(value.length).put(value);
        b.put((byte) 0x02).putLong(size);
        return b.array();
    }
}
