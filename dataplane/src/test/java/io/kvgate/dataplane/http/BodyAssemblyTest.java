package io.kvgate.dataplane.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.dataplane.exchange.RequestContext;
import io.kvgate.dataplane.request.Refusal;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.handler.codec.DecoderResult;
import io.netty.handler.codec.http.DefaultHttpContent;
import io.netty.handler.codec.http.DefaultLastHttpContent;
import io.netty.handler.codec.http.HttpContent;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The body stage alone, without a channel: borrowed or grown, bounded by the limit captured at the head. */
class BodyAssemblyTest {
    private StageFixture f;
    private RequestContext rc;

    @BeforeEach
    void setUp() throws Exception {
        f = new StageFixture();
        rc = f.begin(StageFixture.chatHead("{}"));
        assertNull(f.pipeline.head(rc));
    }

    @AfterEach
    void tearDown() {
        rc.end();
        f.close();
    }

    private Refusal append(HttpContent piece) {
        try {
            return f.pipeline.body(rc, piece, f.alloc);
        } finally {
            piece.release();
        }
    }

    private static ByteBuf ascii(String s) {
        return Unpooled.copiedBuffer(s, StandardCharsets.UTF_8);
    }

    @Test
    void aBodyWholeInOneReadIsTheDecodersSliceNotACopy() {
        ByteBuf read = Unpooled.wrappedBuffer("{\"model\":\"m\"}".getBytes(StandardCharsets.UTF_8));
        ByteBuf slice = read.retainedSlice();
        read.release();
        assertNull(append(new DefaultLastHttpContent(slice)));
        assertSame(slice.unwrap(), rc.body().unwrap(), "kept as the decoder's buffer");
        assertEquals("{\"model\":\"m\"}", StageFixture.body(rc));
    }

    @Test
    void aSmallBodyInALargeReadBufferIsCopied() {
        ByteBuf read = Unpooled.buffer(1024).writeBytes("{\"model\":\"m\"}".getBytes(StandardCharsets.UTF_8));
        ByteBuf slice = read.retainedSlice(0, 13);
        read.release();
        assertNull(append(new DefaultLastHttpContent(slice)));
        assertNotSame(read, rc.body().unwrap(), "a long request must not pin a read buffer many times its size");
        assertEquals("{\"model\":\"m\"}", StageFixture.body(rc));
    }

    @Test
    void piecesAreAppendedAndCounted() {
        assertNull(append(new DefaultHttpContent(ascii("{\"model\""))));
        assertNull(append(new DefaultLastHttpContent(ascii(":\"m\"}"))));
        assertEquals("{\"model\":\"m\"}", StageFixture.body(rc));
        assertEquals(13, rc.access().bytesIn);
    }

    @Test
    void aBodyOverTheLimitIs413AndCloses() {
        assertNull(append(new DefaultHttpContent(Unpooled.wrappedBuffer(new byte[4000]))));
        Refusal r = append(new DefaultLastHttpContent(Unpooled.wrappedBuffer(new byte[97])));
        assertEquals(413, r.status().code());
        assertTrue(r.closes());
        assertEquals("The request body exceeds the limit of 4096 bytes.", r.message());
    }

    @Test
    void aPieceTheDecoderGaveUpOnIs400AndCloses() {
        HttpContent bad = new DefaultHttpContent(Unpooled.EMPTY_BUFFER);
        bad.setDecoderResult(DecoderResult.failure(new IllegalStateException("bad chunk size")));
        Refusal r = append(bad);
        assertEquals(400, r.status().code());
        assertEquals("malformed_http", r.reason());
        assertTrue(r.closes());
    }
}
