package io.kvgate.dataplane.request;

import io.kvgate.dataplane.engine.EngineProfile;
import io.kvgate.dataplane.request.RequestFields.Member;
import io.netty.buffer.ByteBuf;
import java.nio.charset.StandardCharsets;

/**
 * The request edits that make one request mean the same on every engine (issue #13, review rows 5, 11 and 13), as the
 * rule's {@link EngineProfile} states them, recorded in {@link RequestEdits} and spliced with the answer rewrite's in
 * one pass:
 * <ul>
 *   <li><b>temperature floor</b> (row 5): vLLM raises a temperature in (0, 0.01) to 0.01 (with a warning), SGLang
 *       samples at it as sent and treats anything below 1e-6 as greedy. SGLang rules are sent 0.01, so {@code n > 1}
 *       at {@code temperature: 5e-6} samples n different choices on both (greedy is an exact 0 on both).</li>
 *   <li><b>keeping the stop string</b> (row 11): vLLM reads {@code include_stop_str_in_output}, SGLang
 *       {@code no_stop_trim}, the same switch with the same polarity. A client may use either spelling on any rule:
 *       the name is respelled in the rule's engine's dialect (the value kept byte for byte). When the body has both,
 *       the engine reads its own; the validator refuses them when they disagree.</li>
 *   <li><b>empty {@code logit_bias}</b> (row 13): SGLang builds its dense batch x vocabulary bias matrix as soon as
 *       one request has a non-null {@code logit_bias}, even {@code {}}; an empty one is sent as {@code null} (the
 *       same meaning).</li>
 * </ul>
 * Stateless.
 */
public final class EngineDialect {
    /** vLLM's floor ({@code _MAX_TEMP} in sampling_params.py): a temperature in (0, 0.01) is raised to it. */
    public static final double MIN_TEMPERATURE = 0.01;
    private static final byte[] MIN_TEMPERATURE_JSON = "0.01".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] NULL = "null".getBytes(StandardCharsets.US_ASCII);

    private EngineDialect() {}

    /**
     * Records in {@code edits} what {@code f}'s body needs for the rule's engine; returns whether it recorded any.
     * When it does and {@code body} changed since it was parsed, {@code f} is read again first
     * ({@link RequestEdits#refreshIfEdited}), as for the answer rewrite's edits.
     */
    public static boolean plan(RequestFields f, EngineProfile engine, ByteBuf body, RequestEdits edits) {
        String stopMember = engine.stopStringMember(); // null: the engine has neither spelling
        boolean raise = engine.needsTemperatureFloor() && f.temperature > 0 && f.temperature < MIN_TEMPERATURE;
        boolean toNoStopTrim = Member.NO_STOP_TRIM.jsonName.equals(stopMember)
            && f.has(Member.INCLUDE_STOP_STR_IN_OUTPUT) && !f.has(Member.NO_STOP_TRIM);
        boolean toInclude = Member.INCLUDE_STOP_STR_IN_OUTPUT.jsonName.equals(stopMember)
            && f.has(Member.NO_STOP_TRIM) && !f.has(Member.INCLUDE_STOP_STR_IN_OUTPUT);
        boolean nullBias = engine.nullsEmptyLogitBias() && f.hasLogitBias && f.logitBiasEntries == 0 && f.logitBiasFault == null;
        if (!raise && !toNoStopTrim && !toInclude && !nullBias) {
            return false;
        }
        RequestEdits.refreshIfEdited(body, f); // the ranges the edits splice at must be this body's
        if (raise) {
            edits.set(Member.TEMPERATURE, MIN_TEMPERATURE_JSON);
        }
        if (toNoStopTrim) {
            edits.rename(Member.INCLUDE_STOP_STR_IN_OUTPUT, Member.NO_STOP_TRIM.jsonName);
        }
        if (toInclude) {
            edits.rename(Member.NO_STOP_TRIM, Member.INCLUDE_STOP_STR_IN_OUTPUT.jsonName);
        }
        if (nullBias) {
            edits.set(Member.LOGIT_BIAS, NULL);
        }
        return true;
    }
}
