package io.kvgate.ingest.codec;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import io.kvgate.testkit.fuzz.ByteMutations;
import io.kvgate.testkit.fuzz.FuzzCorpus;
import io.kvgate.testkit.fuzz.PropertyRunner;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Issue #43 fuzzing of {@link TrtllmEventDecoder} (TensorRT-LLM's JSON event bodies). Round trip: generated valid
 * bodies of every event type (key order shuffled, hashes over the whole unsigned 64-bit range, events and blocks
 * past the decoder's initial buffer sizes) deliver exactly the events they hold. On mutants of the fixture and the
 * hostile corpus in {@code fuzz/trtllm.corpus}: a body is accepted only if it is valid JSON, delivered events are
 * well formed, and the bytes around the body in its buffer change nothing. (The decoder turns any exception into
 * MALFORMED, so the round trip is what catches a decoder bug there.)
 */
class TrtllmEventDecoderFuzzTest {
    static final int MAX_BODY_BYTES = 8192;
    static final List<byte[]> JSON_TOKENS = FuzzCorpus.tokens("{", "}", "[", "]", ",", ":", "\"", "null", "0", "1",
        "-1", "18446744073709551615", "18446744073709551616", "-9223372036854775808", "1.5", "\"event_id\"",
        "\"data\"", "\"type\"", "\"stored\"", "\"removed\"", "\"updated\"", "\"created\"", "\"blocks\"",
        "\"block_hash\"", "\"block_hashes\"", "\"parent_hash\"", "\"tokens\"", "\"token_id\"", "\"token_extra_id\"",
        "\"cache_level\"", "\"new_value\"", "\"old_value\"", "\"attention_dp_rank\"", "\"window_size\"", " ");

    static List<byte[]> seeds() {
        List<byte[]> seeds = new ArrayList<>(FuzzCorpus.bytes(FuzzCorpus.load("/fuzz/trtllm.corpus")));
        try (InputStream in = TrtllmEventDecoderFuzzTest.class.getResourceAsStream("/trtllm/kv_cache_events.json")) {
            seeds.add(in.readAllBytes());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return seeds;
    }

    static final List<byte[]> SEEDS = seeds();

    /** A body and how many bytes precede it in its buffer (0..16). */
    record PaddedBody(byte[] body, int pad) {
    }

    /** Half mutants of the fixture and corpus, half soups of JSON tokens and the format's keys, each padded. */
    static final PropertyRunner.Generator<PaddedBody> PADDED_MUTANTS = random -> new PaddedBody(random.nextBoolean()
        ? ByteMutations.mutant(random, SEEDS, JSON_TOKENS, 5, MAX_BODY_BYTES)
        : ByteMutations.tokenSoup(random, JSON_TOKENS, 50), random.nextInt(17));

    /** The fuzz tier's try: a valid body's shape seed and a padded mutant. */
    record FuzzCase(long shapeSeed, PaddedBody mutant) {
    }

    @Test
    void corpusDecodesWithinContract() {
        for (byte[] body : seeds()) {
            assertWithinContract(body, 3);
        }
    }

    @Test
    void validBodiesDeliverExactlyTheirEvents() {
        PropertyRunner.check("validBodiesDeliverExactlyTheirEvents", 4341, 300, random -> random.nextLong(),
            TrtllmEventDecoderFuzzTest::assertRoundTrip);
    }

    @Test
    void mutantsDecodeWithinContract() {
        PropertyRunner.check("mutantsDecodeWithinContract", 4342, 400, PADDED_MUTANTS,
            m -> assertWithinContract(m.body(), m.pad()));
    }

    @Test
    @Tag("fuzz")
    @Timeout(value = 60, unit = TimeUnit.MINUTES)
    void fuzzValidBodiesAndMutants() {
        PropertyRunner.fuzz("fuzzValidBodiesAndMutants",
            random -> new FuzzCase(random.nextLong(), PADDED_MUTANTS.next(random)), c -> {
                assertRoundTrip(c.shapeSeed());
                assertWithinContract(c.mutant().body(), c.mutant().pad());
            });
    }

    /** Records the listener's and the handler's calls in one list, in order. */
    static final class Recorder implements KvEventHandler, TrtllmEventDecoder.EventListener {
        final List<String> calls = new ArrayList<>();

        @Override
        public boolean onEvent(long eventId, int dpRank, long windowSize) {
            calls.add("E " + eventId + " " + dpRank + " " + windowSize);
            return true;
        }

        @Override
        public void onBlockStored(BlockStoredEvent e) {
            assertEquals(1, e.blockCount(), "one stored block per call");
            assertEquals(e.tokenInts(), e.blockSize(), "block size is the block's token count");
            calls.add("S " + Long.toUnsignedString(e.blockKeys()[0]) + " parent="
                + (e.hasParent() ? Long.toUnsignedString(e.parentKey()) : "-") + " tokens="
                + Arrays.toString(Arrays.copyOf(e.tokens(), e.tokenInts())) + " " + Medium.name(e.medium()));
        }

        @Override
        public void onBlockRemoved(BlockRemovedEvent e) {
            long[] keys = Arrays.copyOf(e.blockKeys(), e.blockCount());
            StringBuilder sb = new StringBuilder("R");
            for (long k : keys) {
                sb.append(' ').append(Long.toUnsignedString(k));
            }
            calls.add(sb.toString());
        }

        @Override
        public void onAllBlocksCleared() {
            calls.add("C");
        }

        @Override
        public void onBlockMoved(long blockKey, int fromMedium, int toMedium) {
            calls.add("M " + Long.toUnsignedString(blockKey) + " " + Medium.name(fromMedium) + "->"
                + Medium.name(toMedium));
        }
    }

    /** A valid body from {@code shapeSeed} and the calls it must produce; decoded, it produces exactly those. */
    static void assertRoundTrip(long shapeSeed) {
        Random r = new Random(shapeSeed);
        List<String> expected = new ArrayList<>();
        StringBuilder body = new StringBuilder("[");
        int events = r.nextInt(8);
        for (int i = 0; i < events; i++) {
            if (i > 0) {
                body.append(",").append(r.nextBoolean() ? " " : "\n");
            }
            body.append(event(r, expected));
        }
        body.append("]");
        byte[] bytes = body.toString().getBytes(StandardCharsets.UTF_8);
        Recorder rec = new Recorder();
        TrtllmEventDecoder d = new TrtllmEventDecoder(rec, rec);
        int n = d.decode(bytes, 0, bytes.length);
        assertEquals(events, n, () -> "refused a valid body: " + body);
        assertEquals(expected, rec.calls, () -> body.toString());
    }

    private static String event(Random r, List<String> expected) {
        long id = r.nextLong() >>> r.nextInt(64);
        int rank = r.nextInt(3) == 0 ? r.nextInt(8) : 0;
        long window = r.nextBoolean() ? 1L << r.nextInt(16) : -1;
        List<String> members = new ArrayList<>();
        members.add("\"event_id\": " + id);
        if (window >= 0) {
            members.add("\"window_size\": " + window);
        }
        if (rank > 0 || r.nextBoolean()) {
            members.add("\"attention_dp_rank\": " + rank);
        }
        if (r.nextInt(4) == 0) {
            members.add("\"unknown\": {\"x\": [1, \"y\", null]}");
        }
        List<String> calls = new ArrayList<>();
        calls.add("E " + id + " " + rank + " " + window);
        String data;
        switch (r.nextInt(5)) {
            case 0 -> {
                data = "{\"type\": \"created\", \"num_blocks_per_cache_level\": [16384, 0]}";
                calls.add("C");
            }
            case 1 -> {
                long parent = hash(r);
                boolean hasParent = r.nextBoolean();
                int blocks = 1 + r.nextInt(r.nextInt(5) == 0 ? 40 : 4);
                List<String> blockJson = new ArrayList<>();
                String parentText = hasParent ? Long.toUnsignedString(parent) : "-";
                for (int b = 0; b < blocks; b++) {
                    long h = hash(r);
                    int level = r.nextInt(3);
                    int[] tokens = new int[1 + r.nextInt(r.nextInt(5) == 0 ? 300 : 16)];
                    StringBuilder t = new StringBuilder("[");
                    for (int k = 0; k < tokens.length; k++) {
                        tokens[k] = r.nextInt(200_000);
                        t.append(k > 0 ? ", " : "").append("{\"type\": \"unique_token\", \"token_id\": ").append(tokens[k])
                            .append(r.nextBoolean() ? ", \"token_extra_id\": 0}" : "}");
                    }
                    blockJson.add("{\"type\": \"stored_block\", \"block_hash\": " + Long.toUnsignedString(h)
                        + ", \"tokens\": " + t.append("]") + ", \"cache_level\": " + level + ", \"priority\": 35}");
                    calls.add("S " + Long.toUnsignedString(h) + " parent=" + parentText + " tokens="
                        + Arrays.toString(tokens) + " " + Medium.name(TrtllmEventDecoder.mediumOfCacheLevel(level)));
                    parentText = Long.toUnsignedString(h);
                }
                data = "{\"type\": \"stored\", \"parent_hash\": " + (hasParent ? Long.toUnsignedString(parent) : "null")
                    + ", \"blocks\": [" + String.join(", ", blockJson) + "]}";
            }
            case 2 -> {
                int count = 1 + r.nextInt(r.nextInt(5) == 0 ? 100 : 5);
                StringBuilder keys = new StringBuilder("R");
                List<String> json = new ArrayList<>();
                for (int k = 0; k < count; k++) {
                    long h = hash(r);
                    keys.append(' ').append(Long.toUnsignedString(h));
                    json.add(Long.toUnsignedString(h));
                }
                data = "{\"type\": \"removed\", \"block_hashes\": [" + String.join(", ", json) + "]}";
                calls.add(keys.toString());
            }
            case 3 -> {
                long h = hash(r);
                int from = r.nextInt(2);
                int to = r.nextInt(2);
                data = "{\"type\": \"updated\", \"block_hash\": " + Long.toUnsignedString(h)
                    + ", \"cache_level\": {\"type\": \"event_diff\", \"new_value\": " + to + ", \"old_value\": " + from
                    + "}, \"priority\": {\"type\": \"event_diff\", \"new_value\": 35, \"old_value\": 35}}";
                if (from != to) {
                    calls.add("M " + Long.toUnsignedString(h) + " " + Medium.name(TrtllmEventDecoder.mediumOfCacheLevel(from))
                        + "->" + Medium.name(TrtllmEventDecoder.mediumOfCacheLevel(to)));
                }
            }
            default -> {
                data = "{\"type\": \"some_future_event\", \"block_hash\": 1}";
                // An unknown type is announced with its id and nothing else: its id keeps the rank's sequence, so
                // the next event is not taken for a gap (#36).
            }
        }
        members.add("\"data\": " + data);
        Collections.shuffle(members, r);
        expected.addAll(calls);
        return "{" + String.join(", ", members) + "}";
    }

    private static long hash(Random r) {
        return switch (r.nextInt(4)) {
            case 0 -> r.nextInt(1000);
            case 1 -> -1L - r.nextInt(3); // above 2^63 as unsigned
            default -> r.nextLong();
        };
    }

    static void assertWithinContract(byte[] body, int pad) {
        Recorder tight = new Recorder();
        TrtllmEventDecoder d = new TrtllmEventDecoder(tight, tight);
        int n = d.decode(body, 0, body.length);
        assertTrue(n == TrtllmEventDecoder.MALFORMED || n >= 0, "result " + n);
        if (n >= 0) {
            assertTrue(isOneJsonValue(body), () -> "accepted what is not JSON: " + new String(body, StandardCharsets.UTF_8));
        }
        byte[] padded = new byte[pad + body.length + 8];
        Arrays.fill(padded, (byte) '[');
        System.arraycopy(body, 0, padded, pad, body.length);
        Recorder inside = new Recorder();
        int m = new TrtllmEventDecoder(inside, inside).decode(padded, pad, body.length);
        assertEquals(n, m, () -> "the bytes around the body changed its result: " + new String(body, StandardCharsets.UTF_8));
        assertEquals(tight.calls, inside.calls);
    }

    private static final JsonFactory JSON = new JsonFactory();

    static boolean isOneJsonValue(byte[] body) {
        try (JsonParser p = JSON.createParser(body)) {
            if (p.nextToken() == null) {
                return false;
            }
            p.skipChildren();
            return p.nextToken() == null;
        } catch (IOException e) {
            return false;
        }
    }
}
