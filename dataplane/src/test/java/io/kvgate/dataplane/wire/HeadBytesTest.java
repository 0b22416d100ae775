package io.kvgate.dataplane.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.UnpooledByteBufAllocator;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class HeadBytesTest {
    private static String text(HeadBytes h, int spare) {
        ByteBuf b = h.toBuffer(UnpooledByteBufAllocator.DEFAULT, spare);
        try {
            assertEquals(h.length() + spare, b.capacity(), "exactly the head plus the spare room");
            return b.toString(StandardCharsets.ISO_8859_1);
        } finally {
            b.release();
        }
    }

    @Test
    void decimalsAreWrittenInFull() {
        for (int v : new int[] {0, 7, 10, 99, 100, 65_536, 999_999_999, Integer.MAX_VALUE}) {
            assertEquals(Integer.toString(v), text(HeadBytes.start().decimal(v), 0));
        }
        assertThrows(IllegalArgumentException.class, () -> HeadBytes.start().decimal(-1));
    }

    @Test
    void fieldValuesCannotBreakTheirLine() {
        assertEquals("a??x-evil: 1??", text(HeadBytes.start().fieldValue("a\r\nx-evil: 1\t\u00e9"), 0));
        assertEquals("id-1 ok~", text(HeadBytes.start().fieldValue("id-1 ok~"), 0));
        assertEquals("?", text(HeadBytes.start().fieldValue("\u007f"), 0));
    }

    @Test
    void latin1IsByteForByteAndStartEmptiesTheScratch() {
        assertEquals("caf\u00e9: x\r\n", text(HeadBytes.start().latin1("caf\u00e9").colonSpace().latin1("x").crlf(), 4));
        assertEquals("", text(HeadBytes.start(), 0), "start() hands the thread's scratch out empty");
    }

    @Test
    void aHeadLargerThanTheScratchGrowsIt() {
        String big = "v".repeat(5_000);
        HeadBytes h = HeadBytes.start().bytes("x: ".getBytes(StandardCharsets.US_ASCII)).latin1(big).crlf();
        assertEquals("x: " + big + "\r\n", text(h, 0));
        ByteBuf src = UnpooledByteBufAllocator.DEFAULT.heapBuffer().writeBytes("0123456789".getBytes(StandardCharsets.US_ASCII));
        assertEquals("345", text(HeadBytes.start().bytes(src, 3, 3), 0));
        assertEquals(0, src.readerIndex(), "the source's indices are untouched");
        src.release();
    }
}
