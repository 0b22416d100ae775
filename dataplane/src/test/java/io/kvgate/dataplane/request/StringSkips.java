package io.kvgate.dataplane.request;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Runs a lexer test on one of {@link JsonLexer}'s string skips, on this thread's lexer (the one the extractor uses):
 * {@code vector} ({@link VectorScan}, what {@code deploy/jvm.options} runs) or {@code swar} (what runs without
 * {@code jdk.incubator.vector}). The vector one must really be there: a JVM without the module would otherwise run
 * the SWAR path twice and call it both.
 */
final class StringSkips {
    private StringSkips() {
    }

    static void use(String path) {
        JsonLexer lexer = JsonLexer.forThisThread();
        switch (path) {
            case "vector" -> {
                assertTrue(JsonLexer.VECTOR_BYTES >= 16, "the vector string skip is off in this JVM ("
                    + JsonLexer.stringScan() + "): is --add-modules=jdk.incubator.vector in deploy/jvm.options?");
                assertTrue(JsonLexer.readsDirectBuffersInPlace(), "the vector skip makes a segment per body: are "
                    + "--enable-native-access=ALL-UNNAMED and --sun-misc-unsafe-memory-access=allow in deploy/jvm.options?");
                lexer.vectors(true);
                assertTrue(lexer.vectors());
            }
            case "swar" -> lexer.vectors(false);
            default -> throw new IllegalArgumentException(path);
        }
    }

    /** Back to this JVM's default (the vector skip where it is available). */
    static void reset() {
        JsonLexer.forThisThread().vectors(true);
    }
}
