package io.kvgate.dataplane.http;

import io.kvgate.dataplane.exchange.RequestContext;
import io.kvgate.dataplane.request.Refusal;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.LastHttpContent;

/**
 * The body stage: assembles the request body as its pieces arrive. The buffer starts empty and grows with the bytes
 * received (never sized from Content-Length); a body that arrives whole in one read is kept as the decoder's slice of
 * it instead ({@link #borrowable}): no copy. The last piece hands the whole body to the field extractor, which scans
 * it once, in place, when the validate stage runs. Event-loop only; no channel needed.
 */
final class BodyStage {
    /** Smallest body buffer allocated when the first body bytes arrive (it then grows with the body). */
    private static final int MIN_BODY_BUFFER = 256;

    private BodyStage() {}

    /**
     * Adds one piece of the body. {@code piece} stays the caller's (released by it); a kept slice is retained.
     *
     * @return the refusal that ends the request (malformed, over {@code limits.max_body_bytes}), or null
     */
    static Refusal append(RequestContext rc, HttpContent piece, ByteBufAllocator alloc) {
        if (piece.decoderResult().isFailure()) {
            return Refusal.closing(HttpResponseStatus.BAD_REQUEST, "malformed_http",
                "Malformed HTTP body: " + piece.decoderResult().cause().getMessage());
        }
        ByteBuf b = piece.content();
        ByteBuf body = rc.body();
        if (b.isReadable()) {
            rc.access().bytesIn += b.readableBytes();
            int max = rc.config().limits().maxBodyBytes();
            int have = body == null ? 0 : body.readableBytes();
            if ((long) have + b.readableBytes() > max) {
                return Refusal.closing(HttpResponseStatus.REQUEST_ENTITY_TOO_LARGE, "body_too_large",
                    "The request body exceeds the limit of " + max + " bytes.");
            }
            if (body == null && piece instanceof LastHttpContent && borrowable(b)) {
                rc.body(b.retain()); // the whole body came in one read: keep the decoder's slice of it, no copy
            } else {
                if (body == null) {
                    // Sized by what arrived, never by what the client declared: memory follows bytes actually received.
                    body = alloc.buffer(Math.min(max, Math.max(MIN_BODY_BUFFER, b.readableBytes())), max);
                    rc.body(body);
                }
                body.writeBytes(b);
            }
        }
        if (piece instanceof LastHttpContent && rc.extractor() != null && rc.body() != null) {
            rc.extractor().body(rc.body()); // scanned whole, in place, when the body is validated
        }
        return null;
    }

    /**
     * Whether a body that arrived whole in one chunk may be kept as the decoder's slice of the read buffer instead of
     * a copy: when it fills at least half of that buffer. A small body in a large read buffer is copied, so a request
     * held for a long stream never pins more than twice its size (as a buffer grown by doubling could).
     */
    static boolean borrowable(ByteBuf chunk) {
        ByteBuf under = chunk.unwrap();
        return under == null || (long) chunk.readableBytes() * 2 >= under.capacity();
    }
}
