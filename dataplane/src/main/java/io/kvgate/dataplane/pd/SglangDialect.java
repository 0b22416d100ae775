package io.kvgate.dataplane.pd;

import io.kvgate.dataplane.route.EndpointState;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import java.util.concurrent.ThreadLocalRandom;

/**
 * SGLang (bootstrap rendezvous), concurrent: prefill and decode are chosen first, then one body with the
 * bootstrap triple goes to both at once (the prefill answers only after its decode joined the room: a sequential
 * proxy would deadlock). The prefill's success is drained; its error is relayed (the exchange aborts decode first
 * when decode produced nothing yet).
 */
final class SglangDialect implements PdDialect {
    static final SglangDialect INSTANCE = new SglangDialect();

    private SglangDialect() {}

    /** Uniform in [0, 2^63 − 1]. */
    static long room() {
        return ThreadLocalRandom.current().nextLong() & Long.MAX_VALUE;
    }

    @Override
    public boolean concurrent() {
        return true;
    }

    @Override
    public boolean gathersPrefillAnswer() {
        return false;
    }

    @Override
    public ByteBuf prefillBody(PdBodies client, long transferId, EndpointState prefill, ByteBufAllocator alloc) {
        return client.sglang(PdBodies.sequences(client.fields()), prefill.config().host(), prefill.config().bootstrapPort(),
            SglangDialect::room, alloc);
    }

    @Override
    public ByteBuf localBody(PdBodies client) {
        // Configuration refuses pd.min_uncached_tokens > 0 for SGLang and PdConfig.conditional excludes it.
        throw new IllegalStateException("an SGLang decode server cannot serve a request without its prefill's bootstrap");
    }

    @Override
    public AfterPrefill afterPrefill(PdBodies client, long transferId, int status, String answer, ByteBufAllocator alloc) {
        return status >= 400 ? new AfterPrefill.EngineError(status, answer) : AfterPrefill.DRAINED;
    }
}
