package io.kvgate.dataplane.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.regex.Pattern;

import io.kvgate.testkit.fuzz.ByteMutations;
import io.kvgate.testkit.fuzz.FuzzCorpus;
import io.netty.buffer.Unpooled;
import io.netty.channel.embedded.EmbeddedChannel;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.Tag;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;
import org.junit.jupiter.api.Test;

/**
 * Issue #43 fuzzing of the front door's head and body stages over arbitrary client bytes, through the real pipeline
 * on an {@link EmbeddedChannel} ({@link FrontDoorHarness}): mutants of the requests in
 * {@code fuzz/http-requests.corpus} and soups of HTTP tokens, split into chunks at random places. Nothing escapes the
 * pipeline, whatever the channel writes is a sequence of HTTP responses, and what it writes and which requests it
 * starts do not depend on how the bytes were split.
 */
class FrontDoorFuzzTest {
    static final int MAX_REQUEST_BYTES = 6144;
    static final List<FuzzCorpus.Entry> CORPUS = FuzzCorpus.load("/fuzz/http-requests.corpus");
    static final List<byte[]> HTTP_TOKENS = FuzzCorpus.tokens("\r\n", "\n", "\r\n\r\n", ": ", " ", "\t", "POST ",
        "GET ", "HTTP/1.1", "HTTP/1.0", "Content-Length: ", "Transfer-Encoding: chunked\r\n", "Connection: close\r\n",
        "Expect: 100-continue\r\n", "Authorization: Bearer k1\r\n", "0\r\n\r\n", "ffffffff\r\n", "-1", "99999999999",
        "/v1/chat/completions", "/v1/completions", "{\"model\":\"m\",\"prompt\":\"p\"}", "\u0000", "\u00ff");
    /** A status line at the start of each response the channel wrote. */
    static final Pattern STATUS_LINE = Pattern.compile("HTTP/1\\.[01] [1-5][0-9][0-9] ");

    static final Pattern REQUEST_ID = Pattern.compile("x-request-id: [0-9a-f]+");
    static final Pattern CREATED = Pattern.compile("\"created\":[0-9]+");

    private static FrontDoorHarness harness;

    @BeforeContainer
    static void openHarness() throws Exception {
        harness = new FrontDoorHarness();
    }

    @AfterContainer
    static void closeHarness() {
        harness.close();
    }

    /** What the client saw and what reached the exchange layer. */
    record Outcome(String written, List<String> startedBodies) {
    }

    @Test
    void corpusGetsTheSameAnswerWhereverItIsSplit() throws Exception {
        openHarness();
        try {
            for (FuzzCorpus.Entry e : CORPUS) {
                byte[] r = e.bytes();
                Outcome whole = assertAnswered(r, List.of());
                for (int cut = 0; cut <= r.length; cut += Math.max(1, r.length / 40)) {
                    assertEquals(whole, assertAnswered(r, List.of(cut * 65536 / (r.length + 1))), e.name() + " cut at " + cut);
                }
            }
        } finally {
            closeHarness();
        }
    }

    @Property(tries = 150, seed = "4361")
    void anyBytesGetTheSameAnswerHoweverTheyArrive(@ForAll("requests") byte[] request,
        @ForAll("cuts") List<Integer> cuts) {
        assertEquals(assertAnswered(request, List.of()), assertAnswered(request, cuts),
            () -> "split at " + cuts + ": " + show(request));
    }

    @Property
    @Tag("fuzz")
    void fuzzAnyBytesGetTheSameAnswerHoweverTheyArrive(@ForAll("requests") byte[] request,
        @ForAll("cuts") List<Integer> cuts) {
        anyBytesGetTheSameAnswerHoweverTheyArrive(request, cuts);
    }

    @Provide
    Arbitrary<byte[]> requests() {
        return Arbitraries.oneOf(
            ByteMutations.mutants(FuzzCorpus.bytes(CORPUS), HTTP_TOKENS, 5, MAX_REQUEST_BYTES),
            ByteMutations.mutants(FuzzCorpus.bytes(CORPUS), HTTP_TOKENS, 5, MAX_REQUEST_BYTES),
            ByteMutations.tokenSoup(HTTP_TOKENS, 40));
    }

    @Provide
    Arbitrary<List<Integer>> cuts() {
        return ByteMutations.cuts(8);
    }

    /** Feeds {@code request} in chunks to a fresh channel: nothing may escape, and every write is HTTP responses. */
    static Outcome assertAnswered(byte[] request, List<Integer> cuts) {
        harness.started.clear();
        harness.bodies.clear();
        harness.owners.clear();
        harness.contexts.clear();
        harness.bodyArrays.clear();
        EmbeddedChannel ch = harness.channel();
        try {
            for (byte[] chunk : ByteMutations.split(request, cuts)) {
                if (ch.isOpen()) {
                    ch.writeInbound(Unpooled.wrappedBuffer(chunk)); // rethrows whatever reached the pipeline's end
                }
            }
            ch.checkException();
            String written = FrontDoorHarness.output(ch);
            if (!written.isEmpty()) {
                assertTrue(STATUS_LINE.matcher(written).lookingAt(), () -> "not an HTTP response: "
                    + written.substring(0, Math.min(200, written.length())) + " for " + show(request));
            }
            // Request ids are random and the model list's "created" is the clock's: neither depends on the split.
            String comparable = REQUEST_ID.matcher(written).replaceAll("x-request-id: *");
            return new Outcome(CREATED.matcher(comparable).replaceAll("\"created\":*"), List.copyOf(harness.bodies));
        } finally {
            ch.finishAndReleaseAll();
        }
    }

    static String show(byte[] b) {
        String s = new String(b, StandardCharsets.ISO_8859_1).replace("\r", "\\r").replace("\n", "\\n");
        return s.length() > 500 ? s.substring(0, 500) + "...(" + b.length + " bytes)" : s;
    }
}
