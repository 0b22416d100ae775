package io.kvgate.index.prompt;

import com.fasterxml.jackson.databind.JsonNode;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * JSON to template values, as Python's {@code json.loads} produces them: objects keep key order (dicts are ordered and
 * {@code tojson} must reproduce it), integers stay integers ({@link Long}), decimals become {@link Double}.
 *
 * <p>Threading contract: stateless, thread-safe.
 */
public final class JsonValues {
    private JsonValues() {
    }

    public static Object toJava(JsonNode n) {
        if (n == null || n.isNull() || n.isMissingNode()) {
            return null;
        }
        if (n.isTextual()) {
            return n.textValue();
        }
        if (n.isBoolean()) {
            return n.booleanValue();
        }
        if (n.isIntegralNumber()) {
            return n.canConvertToLong() ? (Object) n.longValue() : (Object) n.bigIntegerValue();
        }
        if (n.isNumber()) {
            return n.doubleValue();
        }
        if (n.isArray()) {
            List<Object> out = new ArrayList<>(n.size());
            for (JsonNode c : n) {
                out.add(toJava(c));
            }
            return out;
        }
        if (n.isObject()) {
            Map<String, Object> out = new LinkedHashMap<>();
            for (Map.Entry<String, JsonNode> e : n.properties()) {
                out.put(e.getKey(), toJava(e.getValue()));
            }
            return out;
        }
        return n.asText();
    }
}
