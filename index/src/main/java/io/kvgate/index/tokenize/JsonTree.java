package io.kvgate.index.tokenize;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;

import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Reads a JSON document into plain {@code Map<String,Object>} / {@code List<Object>} / String / Number / Boolean /
 * null values with jackson-core's streaming parser (the index module deliberately does not depend on databind).
 *
 * <p>Load-time only; stateless and thread-safe.
 */
final class JsonTree {
    /** tokenizer.json files hold single strings (chat templates) of tens of KB and documents of tens of MB. */
    private static final JsonFactory FACTORY = JsonFactory.builder()
            .streamReadConstraints(StreamReadConstraints.builder()
                    .maxStringLength(64 * 1024 * 1024)
                    .maxNestingDepth(256)
                    .maxNumberLength(400)
                    .build())
            .build();

    private JsonTree() {
    }

    static Object parse(InputStream in) throws IOException {
        try (JsonParser p = FACTORY.createParser(in)) {
            JsonToken t = p.nextToken();
            if (t == null) {
                throw new IOException("empty JSON document");
            }
            return read(p, t);
        }
    }

    private static Object read(JsonParser p, JsonToken t) throws IOException {
        switch (t) {
            case START_OBJECT: {
                Map<String, Object> m = new LinkedHashMap<>();
                for (JsonToken k = p.nextToken(); k != JsonToken.END_OBJECT; k = p.nextToken()) {
                    String name = p.currentName();
                    m.put(name, read(p, p.nextToken()));
                }
                return m;
            }
            case START_ARRAY: {
                List<Object> l = new ArrayList<>();
                for (JsonToken v = p.nextToken(); v != JsonToken.END_ARRAY; v = p.nextToken()) {
                    l.add(read(p, v));
                }
                return l;
            }
            case VALUE_STRING:
                return p.getText();
            case VALUE_NUMBER_INT:
            case VALUE_NUMBER_FLOAT:
                return p.getNumberValue();
            case VALUE_TRUE:
                return Boolean.TRUE;
            case VALUE_FALSE:
                return Boolean.FALSE;
            case VALUE_NULL:
                return null;
            default:
                throw new IOException("unexpected JSON token " + t + " at " + p.currentLocation());
        }
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> object(Object o, String what) throws IOException {
        if (o instanceof Map<?, ?> m) {
            return (Map<String, Object>) m;
        }
        throw new IOException(what + ": expected a JSON object, got " + describe(o));
    }

    @SuppressWarnings("unchecked")
    static List<Object> array(Object o, String what) throws IOException {
        if (o instanceof List<?> l) {
            return (List<Object>) l;
        }
        throw new IOException(what + ": expected a JSON array, got " + describe(o));
    }

    static String string(Object o, String what) throws IOException {
        if (o instanceof String s) {
            return s;
        }
        throw new IOException(what + ": expected a JSON string, got " + describe(o));
    }

    static boolean bool(Object o, boolean dflt) {
        return o instanceof Boolean b ? b : dflt;
    }

    static String describe(Object o) {
        if (o == null) {
            return "null";
        }
        String s = String.valueOf(o);
        return o.getClass().getSimpleName() + " " + (s.length() > 80 ? s.substring(0, 80) + "..." : s);
    }
}
