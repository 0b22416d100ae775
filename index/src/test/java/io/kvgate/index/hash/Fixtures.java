package io.kvgate.index.hash;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.HexFormat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/** Loads the golden-vector JSON fixtures from the test classpath (copies of /work/shared/fixtures in the repo). */
final class Fixtures {
    private static final ObjectMapper JSON = new ObjectMapper();
    static final HexFormat HEX = HexFormat.of();

    private Fixtures() {}

    static JsonNode load(String name) {
        try (InputStream in = Fixtures.class.getResourceAsStream("/fixtures/" + name)) {
            if (in == null) {
                throw new IllegalStateException("missing test resource /fixtures/" + name);
            }
            return JSON.readTree(in);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Token ids are u32 in JSON; an int keeps their bit pattern. */
    static int[] tokens(JsonNode array) {
        int[] out = new int[array.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = (int) array.get(i).asLong();
        }
        return out;
    }

    /** A JSON integer (unsigned up to 2^64-1 or signed) as its 64-bit pattern. */
    static long key(JsonNode n) {
        return n.bigIntegerValue().longValue();
    }

    static String textOrNull(JsonNode n) {
        return n == null || n.isNull() ? null : n.asText();
    }
}
