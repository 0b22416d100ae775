package io.kvgate.dataplane.pd;

import io.kvgate.dataplane.engine.EngineProfile;
import io.kvgate.dataplane.route.EndpointState;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;

/**
 * What differs between the P/D dialects ({@code ../shared/docs/engine-contracts.md} §4), as values: the bodies the
 * legs get, whether decode is routed with prefill or after its answer, whether that answer is gathered, and what the
 * answer means ({@link AfterPrefill}). {@link PdExchange} owns everything they share and decides what to do with
 * those values (routing, the two legs, failures, the client's answer): a dialect never acts on the exchange.
 * Stateless; event-loop only.
 */
sealed interface PdDialect permits SequentialDialect, SglangDialect {
    /**
     * The dialect of a rule's engine: the code of the protocol its profile names (configuration refuses {@code pd} on
     * engines without one: llama.cpp).
     */
    static PdDialect of(EngineProfile engine) {
        return switch (engine.pdProtocol()) {
            case BOOTSTRAP_ROOM -> SglangDialect.INSTANCE;
            case DISAGGREGATED_PARAMS -> TrtllmDialect.INSTANCE;
            case KV_TRANSFER_PARAMS -> VllmDialect.INSTANCE;
            case NONE -> throw new IllegalArgumentException(engine.name() + " has no prefill/decode disaggregation");
        };
    }

    /**
     * Whether the legs run at the same time and are coupled (SGLang): both endpoints are chosen before either leg
     * starts (decode is routed right after prefill), and a prefill failure before decode produced output aborts
     * decode. Otherwise decode is routed only once the prefill answered.
     */
    boolean concurrent();

    /** Whether a successful prefill answer is gathered (it carries what decode needs) rather than drained. */
    boolean gathersPrefillAnswer();

    /**
     * The prefill leg's body (a new buffer the caller owns); for a concurrent dialect the one body both legs get.
     * {@code prefill}: the chosen prefill endpoint.
     */
    ByteBuf prefillBody(PdBodies client, long transferId, EndpointState prefill, ByteBufAllocator alloc);

    /**
     * Conditional P/D, the local path: the decode leg's body when the decode endpoint serves the request alone (the
     * client's request without transfer parameters: the decode server computes the prompt). Only sequential
     * dialects have one ({@link io.kvgate.control.config.RuleConfig.PdConfig#conditional}).
     */
    ByteBuf localBody(PdBodies client);

    /**
     * What the prefill's answer means: {@code status} and, when {@link #gathersPrefillAnswer} or on an error, its
     * body ({@code answer}; empty when drained). {@code transferId}: the one {@link #prefillBody} got.
     */
    AfterPrefill afterPrefill(PdBodies client, long transferId, int status, String answer, ByteBufAllocator alloc);

    /** What comes after the prefill answered. */
    sealed interface AfterPrefill {
        /** The prefill's success was drained (concurrent): decode's answer is the client's. */
        record Drained() implements AfterPrefill {}

        /**
         * Route the decode leg and send it {@code body} (the caller owns it). {@code paramsFound}: the answer carried
         * transfer parameters (without them decode computes the prompt itself).
         */
        record Decode(ByteBuf body, boolean paramsFound) implements AfterPrefill {}

        /**
         * The prefill's answer is the whole answer (the request ended at its first token): no decode leg. {@code json}
         * is the client's answer, without the dialect's transfer members.
         */
        record Finished(String json) implements AfterPrefill {}

        /** The engine refused or failed the prefill: its error goes to the client. */
        record EngineError(int status, String text) implements AfterPrefill {}

        /** The answer is not what the dialect's engine sends: a 502 naming the prefill leg. */
        record Invalid(String why) implements AfterPrefill {}

        AfterPrefill DRAINED = new Drained();
    }
}
