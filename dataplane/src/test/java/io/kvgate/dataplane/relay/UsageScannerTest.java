package io.kvgate.dataplane.relay;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.buffer.PooledByteBufAllocator;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * Token usage read from answer bytes as they are relayed, whatever the chunk boundaries (split at every byte) and
 * whichever way the bytes arrive (heap buffer, pooled direct buffer, array): always what the byte state machine reads
 * when it visits every byte, which is the scanner's definition.
 */
class UsageScannerTest {
    /**
     * What a scanner read: "[prompt, completion, cached]" ({@code cached} "-" when the usage object did not report
     * it, which accounting must tell from a reported 0), or null when it saw no complete usage object.
     */
    private static String read(UsageScanner s) {
        return s.usageSeen() ? "[" + s.promptTokens() + ", " + s.completionTokens() + ", "
            + (s.cachedReported() ? String.valueOf(s.cachedTokens()) : "-") + "]" : null;
    }

    /** The reference: every byte through the state machine, one at a time (what the scanner did before it jumped). */
    private static String everyByte(byte[] b) {
        UsageScanner s = new UsageScanner();
        for (byte x : b) {
            s.process(x);
        }
        return read(s);
    }

    /** How a piece reaches the scanner: as a heap buffer (scanned in its array), a pooled direct buffer (copied out), or an array. */
    private enum Entry { HEAP, DIRECT, ARRAY }

    private static void feed(UsageScanner s, byte[] b, int from, int to, Entry entry) {
        switch (entry) {
            case ARRAY -> s.scanUsage(b, from, to - from);
            case HEAP -> {
                ByteBuf buf = Unpooled.wrappedBuffer(b, from, to - from);
                s.scanUsage(buf);
                assertEquals(0, buf.readerIndex(), "the scanner does not consume the relayed bytes");
            }
            case DIRECT -> {
                ByteBuf buf = PooledByteBufAllocator.DEFAULT.directBuffer(to - from + 3);
                try {
                    buf.writerIndex(3).readerIndex(3).writeBytes(b, from, to - from); // not at the buffer's start
                    s.scanUsage(buf);
                    assertEquals(3, buf.readerIndex(), "the scanner does not consume the relayed bytes");
                } finally {
                    buf.release();
                }
            }
            default -> throw new IllegalStateException();
        }
    }

    /** What {@code text} reads as when fed in pieces that end at {@code cuts} (ascending), through {@code entry}. */
    private static String scanned(byte[] b, Entry entry, int... cuts) {
        UsageScanner s = new UsageScanner();
        int from = 0;
        for (int cut : cuts) {
            feed(s, b, from, cut, entry);
            from = cut;
        }
        feed(s, b, from, b.length, entry);
        return read(s);
    }

    /**
     * What {@code text} reads as, after asserting that every way of feeding it reads the same as the reference: in two
     * pieces split at every byte position and one byte at a time, through each entry point.
     */
    private static String everySplit(String text) {
        byte[] b = text.getBytes(StandardCharsets.UTF_8);
        String expected = everyByte(b);
        int[] bytewise = new int[Math.max(0, b.length - 1)];
        for (int i = 0; i < bytewise.length; i++) {
            bytewise[i] = i + 1;
        }
        for (Entry entry : Entry.values()) {
            for (int i = 0; i <= b.length; i++) {
                assertEquals(expected, scanned(b, entry, i), entry + " split at " + i);
            }
            assertEquals(expected, scanned(b, entry, bytewise), entry + " one byte at a time");
        }
        return expected;
    }

    @Test
    void aJsonAnswersUsageIsReadWhereverItIsSplit() {
        String vllm = "{\"id\":\"cmpl-1\",\"choices\":[{\"index\":0,\"text\":\" usage: 7\"}],\"usage\":{\"prompt_tokens\":12,"
            + "\"total_tokens\":17,\"completion_tokens\":5,\"prompt_tokens_details\":{\"cached_tokens\":8}},\"kv_transfer_params\":null}";
        assertEquals("[12, 5, 8]", everySplit(vllm));
        String spaced = "{ \"usage\" : { \"completion_tokens\" : 3 , \"prompt_tokens\" :\n40, \"prompt_tokens_details\": null } }";
        assertEquals("[40, 3, -]", everySplit(spaced), "no details: no cached tokens");
    }

    @Test
    void aStreamsLastUsageChunkWinsAndNullUsagesAreSkipped() {
        String sglang = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}],\"usage\":null}\n\n"
            + "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2,\"total_tokens\":11,"
            + "\"prompt_tokens_details\":{\"cached_tokens\":4},\"reasoning_tokens\":0}}\n\ndata: [DONE]\n\n";
        assertEquals("[9, 2, 4]", everySplit(sglang));
        String continuous = "data: {\"choices\":[{\"index\":0}],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":1}}\n\n"
            + "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":6}}\n\n";
        assertEquals("[9, 6, -]", everySplit(continuous), "the final, cumulative one");
    }

    /** Routing-quality accounting counts only answers that said what the engine served from its cache. */
    @Test
    void aReportedZeroIsToldFromAnAbsentCachedCount() {
        assertEquals("[12, 5, 0]", everySplit("{\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":5,"
            + "\"prompt_tokens_details\":{\"cached_tokens\":0}}}"), "vLLM with --enable-prompt-tokens-details, a miss");
        assertEquals("[12, 5, -]", everySplit("{\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":5,"
            + "\"prompt_tokens_details\":{\"cached_tokens\":null}}}"), "null is no count");
        assertEquals("[12, 5, -]", everySplit("{\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":5,"
            + "\"prompt_tokens_details\":null}}"), "vLLM without the flag");
        String reportedThenNot = "data: {\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":1,"
            + "\"prompt_tokens_details\":{\"cached_tokens\":8}}}\n\n"
            + "data: {\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2}}\n\n";
        assertEquals("[9, 2, -]", everySplit(reportedThenNot), "the last usage object decides, its count with it");
    }

    @Test
    void textThatMentionsUsageIsNotUsage() {
        assertEquals(null, everySplit("{\"choices\":[{\"text\":\"\\\"usage\\\": {\\\"prompt_tokens\\\": 5}\"}]}"),
            "inside a string every quote is escaped");
        assertEquals(null, everySplit("{\"content\":\"usage\",\"usage\":\"none\",\"x\":{\"usage\":[1]}}"));
        assertFalse(new UsageScanner().usageSeen());
    }

    @Test
    void nestedValuesItDoesNotCountAreSkipped() {
        String odd = "{\"usage\":{\"extra\":{\"prompt_tokens\":999,\"s\":\"}\\\"{\"},\"list\":[{\"completion_tokens\":1}],"
            + "\"prompt_tokens\":3,\"completion_tokens\":4,\"flag\":true,\"f\":1.5,\"neg\":-2,"
            + "\"prompt_tokens_details\":{\"audio_tokens\":{\"cached_tokens\":77},\"cached_tokens\":2}}}";
        assertEquals("[3, 4, 2]", everySplit(odd));
        String badNumbers = "{\"usage\":{\"prompt_tokens\":-3,\"completion_tokens\":2.5}}";
        assertEquals("[0, 0, -]", (everySplit(badNumbers)), "not counts: not counted");
    }

    @Test
    void countsOver2To40AreNotBelieved() {
        assertEquals("[1099511627776, 0, -]", everySplit("{\"usage\":{\"prompt_tokens\":1099511627776,"
            + "\"completion_tokens\":1099511627777}}"), "2^40 is the largest count believed");
        assertEquals("[0, 7, -]", everySplit("{\"usage\":{\"prompt_tokens\":123456789012345678901234567890,"
            + "\"completion_tokens\":7}}"), "thirty digits neither overflow nor count");
    }

    @Test
    void brokenUsageIsAbandonedAndTheNextOneRead() {
        String s = "{\"usage\":{\"prompt_tokens\" 5}} {\"usage\":{\"prompt_tokens\":6,\"completion_tokens\":1}}";
        assertEquals("[6, 1, -]", everySplit(s));
        assertTrue(everySplit("{\"usage\":{}}") != null, "an empty usage object is a usage of nothing");
    }

    /** The front-door benchmark's engine answer: ~50 quotes before the needle, the usage object last. */
    static final String CHAT_COMPLETION = "{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion\",\"created\":1764460800,"
        + "\"model\":\"bench\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"ok\"},"
        + "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,\"total_tokens\":2}}";

    @Test
    void anAnswerOfManyQuotesIsReadWhereverItIsSplit() {
        assertEquals("[1, 1, -]", everySplit(CHAT_COMPLETION));
        String manyQuotes = "{\"a\":\"\",\"b\":[\"\",\"\",\"u\",\"us\",\"usag\",\"usagee\",\"Usage\",\"\\\"\"],"
            + "\"usag\":{\"prompt_tokens\":9},\"_usage\":{\"prompt_tokens\":8},\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}";
        assertEquals("[3, 4, -]", everySplit(manyQuotes), "near-needles are not the needle");
    }

    @Test
    void theNeedleIsFoundWhereverAPieceBoundaryCutsIt() {
        // the needle's first byte at every position relative to the cut, with a word's worth of bytes on both sides
        String before = "{\"id\":\"x\",\"choices\":[],";
        String usage = "\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2}}";
        for (int pad = 0; pad < 9; pad++) {
            byte[] b = (before + " ".repeat(pad) + usage).getBytes(StandardCharsets.UTF_8);
            int at = before.length() + pad;
            for (int k = -9; k <= 9; k++) {
                for (Entry entry : Entry.values()) {
                    assertEquals("[7, 2, -]", scanned(b, entry, at + k), entry + " pad " + pad + " cut at needle " + k);
                    assertEquals("[7, 2, -]", scanned(b, entry, at + k - 3, at + k), entry + " pad " + pad + " short piece " + k);
                }
            }
        }
    }

    @Test
    void aDirectBufferLargerThanTheScratchIsReadAcrossItsPieces() {
        // the scratch copies a direct buffer out in pieces of SCRATCH_BYTES: every offset of the needle across that seam
        String usage = "\"usage\":{\"prompt_tokens\":11,\"completion_tokens\":5,\"prompt_tokens_details\":{\"cached_tokens\":4}}}";
        for (int k = -12; k <= 12; k++) {
            int fill = UsageScanner.SCRATCH_BYTES + k - "{\"content\":\"".length() - "\",".length();
            String text = "{\"content\":\"" + "a\\\"b ".repeat(fill / 5) + "x".repeat(fill % 5) + "\"," + usage;
            byte[] b = text.getBytes(StandardCharsets.UTF_8);
            assertEquals("[11, 5, 4]", everyByte(b), "seam at needle " + k);
            assertEquals("[11, 5, 4]", scanned(b, Entry.DIRECT), "seam at needle " + k);
            assertEquals("[11, 5, 4]", scanned(b, Entry.HEAP), "seam at needle " + k);
        }
        String twoPieces = "{\"usage\":{\"prompt_tokens\":" + " ".repeat(UsageScanner.SCRATCH_BYTES) + "12,\"completion_tokens\":1}}";
        assertEquals("[12, 1, -]", scanned(twoPieces.getBytes(StandardCharsets.UTF_8), Entry.DIRECT), "a usage object across the seam");
    }

    @Test
    void aNeedleInsideAStringValueIsTextNotUsage() {
        // in a string value the needle's quotes are escaped: \"usage\" never matches "usage", so the content is skipped
        String content = "{\"choices\":[{\"message\":{\"content\":\"\\\"usage\\\": {\\\"prompt_tokens\\\": 5, "
            + "\\\"completion_tokens\\\": 6}\"}}]";
        assertNull(everySplit(content + "}"));
        assertEquals("[1, 2, -]", everySplit(content + ",\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}"));
        // a string value that is exactly usage is the needle, but a ',' or '}' follows it, not ':'
        assertEquals("[3, 1, -]", everySplit("{\"content\":\"usage\",\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}"));
        // what the scanner does not judge: a value "usage" followed by ':' is not JSON, and it reads it as a member
        assertEquals("[2, 0, -]", everySplit("[\"usage\":{\"prompt_tokens\":2}]"));
    }

    @Test
    void aStreamOfNullUsagesThenAFinalUsageChunk() {
        StringBuilder sse = new StringBuilder();
        for (int i = 0; i < 20; i++) {
            sse.append("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,"
                + "\"delta\":{\"content\":\"tok").append(i).append("\"},\"finish_reason\":null}],\"usage\":null}\n\n");
        }
        sse.append("data: {\"id\":\"chatcmpl-1\",\"choices\":[],\"usage\":{\"prompt_tokens\":30,\"completion_tokens\":20,"
            + "\"total_tokens\":50,\"prompt_tokens_details\":{\"cached_tokens\":16}}}\n\ndata: [DONE]\n\n");
        assertEquals("[30, 20, 16]", everySplit(sse.toString()));
    }

    /**
     * The scan jumps from needle to needle while nothing of it is matched; the reference visits every byte. Over
     * answers made of the pieces that matter (quotes, escapes, digits, braces, the needle, its prefixes and suffixes,
     * the keys, what the word test may mistake for a quote or a u) in random order, fed in random pieces through
     * each entry point, both read the same usage.
     */
    @Test
    void jumpingToTheNextNeedleReadsWhatVisitingEveryByteReads() {
        Random random = new Random(20261203);
        String[] pieces = {"\"", "\\", "usage", "\"usage\"", "\"u", "\"usag", "sage\"", "e\"", "\\\"usage\\\"", ":", " ",
            "{", "}", "[", "]", ",", "12", "1099511627777", "-", ".5", "x", "prompt_", "tokens\"", "\"prompt_tokens_details\":{", "\"prompt_tokens\":", "\"completion_tokens\":", "\"prompt_tokens_details\":",
            "\"cached_tokens\":", "null", "\"usage\":null,", "\"#", "ut", "\"ut", "\"u\"u", "\u00e9"};
        int seen = 0;
        for (int round = 0; round < 20_000; round++) {
            StringBuilder text = new StringBuilder();
            if (random.nextInt(3) == 0) {
                text.append("{\"usage\":{\"prompt_tokens\":").append(random.nextInt(100)).append(',');
            }
            for (int n = random.nextInt(30); n > 0; n--) {
                text.append(pieces[random.nextInt(pieces.length)]);
            }
            byte[] b = text.toString().getBytes(StandardCharsets.UTF_8);
            String expected = everyByte(b);
            int[] cuts = new int[b.length == 0 ? 0 : random.nextInt(4)];
            for (int c = 0; c < cuts.length; c++) {
                cuts[c] = random.nextInt(b.length + 1);
            }
            Arrays.sort(cuts);
            Entry entry = Entry.values()[round % Entry.values().length];
            assertEquals(expected, scanned(b, entry, cuts), () -> entry + " " + text + " cut at " + Arrays.toString(cuts));
            seen += expected != null ? 1 : 0;
        }
        assertTrue(seen > 200, "the generated answers include complete usage objects: " + seen);
    }
    private static final String[] KEYS = {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details",
        "cached_tokens", "reasoning_tokens", "prompt_tokens_", "prompt_tok\\u0065ns", "completion_tokens_details"};
    private static final String[] VALUES = {"0", "7", "812", "1099511627776", "1099511627777",
        "123456789012345678901234567890", "-3", "2.5", "1e3", "4E+2", "null", "true", "\"str\"", "\"s\\\"}\"", "[1,{\"a\":2}]", "[]"};
    private static final String[] SPACE = {"", "", " ", "\n", "\t "};
    private static final String MUTATIONS = "\"\\{}[],: 0a";

    /** A usage object of engine-like members with random spacing, and now and then what engines do not write. */
    private static String usageObject(Random r, int level) {
        StringBuilder s = new StringBuilder("{");
        int members = r.nextInt(5);
        for (int m = 0; m < members; m++) {
            s.append(SPACE[r.nextInt(SPACE.length)]).append(m > 0 ? "," : "").append(SPACE[r.nextInt(SPACE.length)]);
            String key = KEYS[r.nextInt(KEYS.length)];
            s.append('"').append(key).append('"').append(SPACE[r.nextInt(SPACE.length)]).append(':')
                .append(SPACE[r.nextInt(SPACE.length)]);
            if (level < 3 && (key.endsWith("details") || r.nextInt(12) == 0)) {
                s.append(r.nextInt(4) == 0 ? "null" : usageObject(r, level + 1));
            } else {
                s.append(VALUES[r.nextInt(VALUES.length)]);
            }
        }
        return s.append(SPACE[r.nextInt(SPACE.length)]).append('}').toString();
    }

    /**
     * Usage objects as engines write them (and not: fractions, strings, arrays, escapes, other nested objects,
     * {@code "usage": null}), one or two per answer, some with a byte inserted or deleted anywhere, fed in random
     * pieces through each entry point: the one-pass read of a whole object and the state machine it falls back to
     * read what the reference reads.
     */
    @Test
    void usageObjectsOfEveryShapeReadAsVisitingEveryByteReads() {
        Random random = new Random(1764460800);
        int seen = 0;
        for (int round = 0; round < 20_000; round++) {
            StringBuilder text = new StringBuilder(random.nextBoolean() ? "{\"id\":\"chatcmpl-1\",\"choices\":[]," : "data: {");
            for (int u = 1 + random.nextInt(2); u > 0; u--) {
                text.append("\"usage\"").append(SPACE[random.nextInt(SPACE.length)]).append(':')
                    .append(SPACE[random.nextInt(SPACE.length)])
                    .append(random.nextInt(5) == 0 ? "null" : usageObject(random, 1)).append(u > 1 ? "," : "}");
            }
            for (int m = random.nextInt(3) == 0 ? 1 + random.nextInt(2) : 0; m > 0 && text.length() > 0; m--) {
                int at = random.nextInt(text.length());
                if (random.nextBoolean()) {
                    text.deleteCharAt(at);
                } else {
                    text.insert(at, MUTATIONS.charAt(random.nextInt(MUTATIONS.length())));
                }
            }
            byte[] b = text.toString().getBytes(StandardCharsets.UTF_8);
            String expected = everyByte(b);
            int[] cuts = new int[random.nextInt(3)];
            for (int c = 0; c < cuts.length; c++) {
                cuts[c] = random.nextInt(b.length + 1);
            }
            Arrays.sort(cuts);
            Entry entry = Entry.values()[round % Entry.values().length];
            assertEquals(expected, scanned(b, entry, cuts), () -> entry + " " + text + " cut at " + Arrays.toString(cuts));
            seen += expected != null ? 1 : 0;
        }
        assertTrue(seen > 5_000, "most generated answers hold a complete usage object: " + seen);
    }
}
