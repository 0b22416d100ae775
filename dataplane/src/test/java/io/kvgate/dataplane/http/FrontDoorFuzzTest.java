package io.kvgate.dataplane.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

import io.kvgate.testkit.fuzz.ByteMutations;
import io.kvgate.testkit.fuzz.FuzzCorpus;
import io.kvgate.testkit.fuzz.PropertyRunner;
import io.netty.buffer.Unpooled;
import io.netty.channel.embedded.EmbeddedChannel;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

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

    @BeforeAll
    static void openHarness() throws Exception {
        harness = new FrontDoorHarness();
    }

    @AfterAll
    static void closeHarness() {
        harness.close();
    }

    /** What the client saw and what reached the exchange layer. */
    record Outcome(String written, List<String> startedBodies) {
    }

    @Test
    void corpusGetsTheSameAnswerWhereverItIsSplit() {
        for (FuzzCorpus.Entry e : CORPUS) {
            byte[] r = e.bytes();
            Outcome whole = assertAnswered(r, List.of());
            for (int cut = 0; cut <= r.length; cut += Math.max(1, r.length / 40)) {
                assertEquals(whole, assertAnswered(r, List.of(cut * 65536 / (r.length + 1))), e.name() + " cut at " + cut);
            }
        }
    }

    static final List<byte[]> SEEDS = FuzzCorpus.bytes(CORPUS);
    /** Two thirds mutants of the corpus requests, one third soups of HTTP tokens; each split at up to 8 places. */
    static final PropertyRunner.Generator<SplitRequest> SPLIT_REQUESTS = random -> new SplitRequest(
        random.nextInt(3) < 2
            ? ByteMutations.mutant(random, SEEDS, HTTP_TOKENS, 5, MAX_REQUEST_BYTES)
            : ByteMutations.tokenSoup(random, HTTP_TOKENS, 40),
        ByteMutations.cuts(random, 8));

    record SplitRequest(byte[] request, List<Integer> cuts) {
    }

    @Test
    void anyBytesGetTheSameAnswerHoweverTheyArrive() {
        PropertyRunner.check("anyBytesGetTheSameAnswerHoweverTheyArrive", 4361, 150, SPLIT_REQUESTS,
            FrontDoorFuzzTest::assertSameAnswerHoweverSplit);
    }

    @Test
    @Tag("fuzz")
    @Timeout(value = 60, unit = TimeUnit.MINUTES)
    void fuzzAnyBytesGetTheSameAnswerHoweverTheyArrive() {
        PropertyRunner.fuzz("fuzzAnyBytesGetTheSameAnswerHoweverTheyArrive", SPLIT_REQUESTS,
            FrontDoorFuzzTest::assertSameAnswerHoweverSplit);
    }

    static void assertSameAnswerHoweverSplit(SplitRequest r) {
        assertEquals(assertAnswered(r.request(), List.of()), assertAnswered(r.request(), r.cuts()),
            () -> "split at " + r.cuts() + ": " + show(r.request()));
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
