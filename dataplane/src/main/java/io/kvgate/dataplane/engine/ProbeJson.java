package io.kvgate.dataplane.engine;

import com.fasterxml.jackson.databind.JsonNode;

/** Reading the engines' probe answers (the profiles' and ready.ContextDiscovery's model cards). */
public final class ProbeJson {
    private ProbeJson() {}

    /** {@code v} as a positive int, 0 when it is absent, null, not an integer, or not positive. */
    public static int positive(JsonNode v) {
        return v != null && v.canConvertToInt() && v.isIntegralNumber() && v.intValue() > 0 ? v.intValue() : 0;
    }
}
