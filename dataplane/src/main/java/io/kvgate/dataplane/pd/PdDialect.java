package io.kvgate.dataplane.pd;

/**
 * What differs between the P/D dialects ({@code ../shared/docs/engine-contracts.md} §4); {@link PdExchange} owns
 * everything they share (routing, the two legs, failures, the client's answer). Stateless; event-loop only.
 */
sealed interface PdDialect permits VllmDialect, SglangDialect {
    /** The dialect of a rule's engine. */
    static PdDialect of(boolean sglang) {
        return sglang ? SglangDialect.INSTANCE : VllmDialect.INSTANCE;
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

    /** The prefill answered ({@code text}: the gathered body, or empty when drained). */
    void onPrefillAnswered(PdExchange x, int status, String text);
}
