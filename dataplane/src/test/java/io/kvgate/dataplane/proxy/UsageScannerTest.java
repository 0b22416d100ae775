package io.kvgate.dataplane.proxy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** Token usage read from answer bytes as they are relayed, whatever the chunk boundaries (split at every byte). */
class UsageScannerTest {
    /** prompt, completion, cached as read from {@code text} fed in two pieces split at {@code split}; null: none seen. */
    private static long[] scanned(String text, int split) {
        byte[] b = text.getBytes(StandardCharsets.UTF_8);
        UsageScanner s = new UsageScanner();
        ByteBuf first = Unpooled.wrappedBuffer(b, 0, split);
        ByteBuf second = Unpooled.wrappedBuffer(b, split, b.length - split);
        s.scanUsage(first);
        s.scanUsage(second);
        assertEquals(0, first.readerIndex(), "the scanner does not consume the relayed bytes");
        return s.usageSeen() ? new long[] {s.promptTokens(), s.completionTokens(), s.cachedTokens()} : null;
    }

    private static long[] everySplit(String text) {
        long[] first = scanned(text, 0);
        for (int i = 1; i <= text.getBytes(StandardCharsets.UTF_8).length; i++) {
            long[] r = scanned(text, i);
            assertEquals(first == null ? null : java.util.Arrays.toString(first), r == null ? null : java.util.Arrays.toString(r),
                "split at " + i);
        }
        return first;
    }

    @Test
    void aJsonAnswersUsageIsReadWhereverItIsSplit() {
        String vllm = "{\"id\":\"cmpl-1\",\"choices\":[{\"index\":0,\"text\":\" usage: 7\"}],\"usage\":{\"prompt_tokens\":12,"
            + "\"total_tokens\":17,\"completion_tokens\":5,\"prompt_tokens_details\":{\"cached_tokens\":8}},\"kv_transfer_params\":null}";
        assertEquals("[12, 5, 8]", java.util.Arrays.toString(everySplit(vllm)));
        String spaced = "{ \"usage\" : { \"completion_tokens\" : 3 , \"prompt_tokens\" :\n40, \"prompt_tokens_details\": null } }";
        assertEquals("[40, 3, 0]", java.util.Arrays.toString(everySplit(spaced)), "no details: no cached tokens");
    }

    @Test
    void aStreamsLastUsageChunkWinsAndNullUsagesAreSkipped() {
        String sglang = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}],\"usage\":null}\n\n"
            + "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2,\"total_tokens\":11,"
            + "\"prompt_tokens_details\":{\"cached_tokens\":4},\"reasoning_tokens\":0}}\n\ndata: [DONE]\n\n";
        assertEquals("[9, 2, 4]", java.util.Arrays.toString(everySplit(sglang)));
        String continuous = "data: {\"choices\":[{\"index\":0}],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":1}}\n\n"
            + "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":6}}\n\n";
        assertEquals("[9, 6, 0]", java.util.Arrays.toString(everySplit(continuous)), "the final, cumulative one");
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
        assertEquals("[3, 4, 2]", java.util.Arrays.toString(everySplit(odd)));
        String badNumbers = "{\"usage\":{\"prompt_tokens\":-3,\"completion_tokens\":2.5}}";
        assertEquals("[0, 0, 0]", java.util.Arrays.toString(everySplit(badNumbers)), "not counts: not counted");
    }

    @Test
    void brokenUsageIsAbandonedAndTheNextOneRead() {
        String s = "{\"usage\":{\"prompt_tokens\" 5}} {\"usage\":{\"prompt_tokens\":6,\"completion_tokens\":1}}";
        assertEquals("[6, 1, 0]", java.util.Arrays.toString(everySplit(s)));
        assertTrue(everySplit("{\"usage\":{}}") != null, "an empty usage object is a usage of nothing");
    }

    /**
     * The buffer path jumps from quote to quote while nothing of the needle is matched; the byte path visits every
     * byte. Over answers made of the characters that matter (quotes, escapes, digits, braces, the needle's and the
     * keys' letters) in random order and at random reader offsets, both read the same usage.
     */
    @Test
    void jumpingToTheNextQuoteReadsWhatVisitingEveryByteReads() {
        java.util.Random random = new java.util.Random(20261202);
        String[] pieces = {"\"", "\\", "usage", "\"usage\"", ":", " ", "{", "}", "[", "]", ",", "12", "x",
            "\"prompt_tokens\":", "\"completion_tokens\":", "\"prompt_tokens_details\":", "\"cached_tokens\":", "null"};
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
            UsageScanner everyByte = new UsageScanner();
            everyByte.scanUsage(b, 0, b.length);
            int offset = random.nextInt(4);
            ByteBuf buf = Unpooled.buffer(offset + b.length).writerIndex(offset).readerIndex(offset).writeBytes(b);
            UsageScanner jumping = new UsageScanner();
            jumping.scanUsage(buf);
            assertEquals(offset, buf.readerIndex());
            assertEquals(everyByte.usageSeen(), jumping.usageSeen(), text::toString);
            assertEquals(everyByte.promptTokens(), jumping.promptTokens(), text::toString);
            assertEquals(everyByte.completionTokens(), jumping.completionTokens(), text::toString);
            assertEquals(everyByte.cachedTokens(), jumping.cachedTokens(), text::toString);
            seen += everyByte.usageSeen() ? 1 : 0;
        }
        assertTrue(seen > 200, "the generated answers include complete usage objects: " + seen);
    }
}
