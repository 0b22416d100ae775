package io.kvgate.dataplane.pd;

import io.netty.buffer.ByteBuf;
import java.util.concurrent.ThreadLocalRandom;

/**
 * SGLang (bootstrap rendezvous), concurrent: prefill and decode are chosen first, then one body with the
 * bootstrap triple goes to both at once (the prefill answers only after its decode joined the room: a sequential
 * proxy would deadlock). The prefill's success is drained; its error, before decode produced output, is relayed.
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

    /** Never: SGLang's prefill comes with its decode in one pair decision ({@link #onDecodeChosen}). */
    @Override
    public void onPrefillChosen(PdExchange x) {
        throw new IllegalStateException("an SGLang prefill is chosen with its decode in one pair decision");
    }

    @Override
    public void onDecodeChosen(PdExchange x) {
        ByteBuf both = PdBodies.sglang(x.clientBody(), PdBodies.sequences(x.clientBody()), x.prefillEndpoint().config().host(),
            x.prefillEndpoint().config().bootstrapPort(), SglangDialect::room, x.alloc());
        x.startPrefillLeg(both.retain()); // each leg holds a reference and sends duplicates: one buffer serves both
        x.startDecodeLeg(both, true);
    }

    @Override
    public ByteBuf localBody(PdExchange x) {
        // Configuration refuses pd.min_uncached_tokens > 0 for SGLang and PdConfig.conditional excludes it.
        throw new IllegalStateException("an SGLang decode server cannot serve a request without its prefill's bootstrap");
    }

    @Override
    public boolean gathersPrefillAnswer() {
        return false;
    }

    @Override
    public void onPrefillAnswered(PdExchange x, int status, String text) {
        if (status >= 400 && !x.decodeStarted()) {
            x.abortDecode();
            x.relayPrefillError(status, text);
        }
        // 2xx: drained. An error after decode started is decode's business now.
    }
}
