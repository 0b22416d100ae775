package io.kvgate.dataplane.pd;

import io.kvgate.dataplane.engine.EngineProfile;

/**
 * What differs between the P/D dialects ({@code ../shared/docs/engine-contracts.md} §4); {@link PdExchange} owns
 * everything they share (routing, the two legs, failures, the client's answer). Stateless; event-loop only.
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
     * starts, and a prefill failure before decode produced output aborts decode.
     */
    boolean concurrent();

    /** The prefill endpoint was chosen: start what comes next. */
    void onPrefillChosen(PdExchange x);

    /** The decode endpoint was chosen (concurrent dialects only; a sequential decode routes itself). */
    void onDecodeChosen(PdExchange x);

    /** Whether a successful prefill answer is gathered (it carries what decode needs) rather than drained. */
    boolean gathersPrefillAnswer();

    /**
     * Conditional P/D, the local path: the decode leg's body when the decode endpoint serves the request alone (the
     * client's request without transfer parameters: the decode server computes the prompt). Only sequential
     * dialects have one ({@link io.kvgate.control.config.RuleConfig.PdConfig#conditional}).
     */
    io.netty.buffer.ByteBuf localBody(PdExchange x);

    /** The prefill answered ({@code text}: the gathered body, or empty when drained). */
    void onPrefillAnswered(PdExchange x, int status, String text);
}
