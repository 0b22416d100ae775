package io.kvgate.dataplane.request;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.request.RequestFields.Member;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.function.BiConsumer;
import org.junit.jupiter.api.Test;

/**
 * The request edits (model alias, greedy {@code n}, forced usage, engine-internal removals) as byte splices at the
 * ranges the extractor recorded, with every body split at every byte (the extractor sees it chunk by chunk).
 */
class RequestEditsTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** Parses {@code body} split at {@code split}; returns the filled fields. */
    private static RequestFields parsed(byte[] b, int split) {
        RequestFields f = new RequestFields();
        RequestFieldExtractor x = new RequestFieldExtractor(f);
        x.feed(ByteBuffer.wrap(b, 0, split));
        x.feed(ByteBuffer.wrap(b, split, b.length - split));
        assertEquals(RequestFieldExtractor.Result.OK, x.finish(), "split at " + split);
        return f;
    }

    /** The edited body for every split of {@code body}, asserted to be the same each time; returned once. */
    private static String edited(String body, BiConsumer<ByteBuf, RequestFields> plan, RequestEdits edits) {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        String first = null;
        for (int split = 0; split <= b.length; split++) {
            RequestFields f = parsed(b, split);
            ByteBuf in = Unpooled.copiedBuffer(b);
            edits.reset();
            plan.accept(in, f);
            ByteBuf out = edits.apply(in, f, ByteBufAllocator.DEFAULT);
            String s = out.toString(StandardCharsets.UTF_8);
            out.release();
            assertEquals(0, in.refCnt(), "the client's body is released (or is the one returned)");
            if (first == null) {
                first = s;
            } else {
                assertEquals(first, s, "split at " + split);
            }
        }
        return first;
    }

    private static String edited(String body, Member m, String json) {
        RequestEdits edits = new RequestEdits();
        return edited(body, (buf, f) -> edits.set(m, json), edits);
    }

    @Test
    void aMembersLastValueIsReplacedAndEveryOtherByteKept() {
        assertEquals("{\"model\" : \"qwen3\", \"n\":3}", edited("{\"model\" : \"gpt-4o-mini\", \"n\":3}", Member.MODEL, "\"qwen3\""));
        assertEquals("{\"model\":\"a\",\"n\": 1 ,\"x\":[1]}", edited("{\"model\":\"a\",\"n\": 3 ,\"x\":[1]}", Member.N, "1"));
        assertEquals("{\"n\":1,\"model\":\"a\",\"n\":1}", edited("{\"n\":1,\"model\":\"a\",\"n\":4}", Member.N, "1"),
            "duplicate keys: the last one, which the engine reads, is edited");
        assertEquals("{\"model\":\"a\",\"stream_options\":{\"include_usage\":true}}",
            edited("{\"model\":\"a\",\"stream_options\":{\"x\":[{}]}}", Member.STREAM_OPTIONS, "{\"include_usage\":true}"),
            "a container value is replaced whole");
        assertEquals("{\"model\":\"\\u00e9\\\"\",\"t\":\"é\"}", edited("{\"model\":\"m\",\"t\":\"é\"}", Member.MODEL,
            "\"\\u00e9\\\"\""), "multi-byte text after the edit stays in place");
    }

    @Test
    void anAbsentMemberIsAddedBeforeTheClosingBrace() {
        assertEquals("{\"model\":\"a\",\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
            edited("{\"model\":\"a\",\"stream\":true}", Member.STREAM_OPTIONS, "{\"include_usage\":true}"));
        assertEquals("{\"model\":\"a\",\"n\":1 \n}", edited("{\"model\":\"a\" \n}", Member.N, "1"),
            "the parser places the closing brace after the last value (before the whitespace)");
    }

    @Test
    void editsAndEngineInternalRemovalsGoInOnePass() {
        RequestEdits edits = new RequestEdits();
        String body = "{\"kv_transfer_params\":{\"remote_host\":\"10.9.9.9\"},\"model\":\"gpt\",\"n\":2,"
            + "\"bootstrap_room\":7}";
        String out = edited(body, (buf, f) -> {
            edits.set(Member.MODEL, "\"qwen3\"");
            edits.set(Member.N, "1");
            edits.set(Member.STREAM_OPTIONS, "{\"include_usage\":true}");
        }, edits);
        assertEquals("{\"model\":\"qwen3\",\"n\":1,\"stream_options\":{\"include_usage\":true}}", out);
        // no edit set: the removals alone, in place (the same buffer comes back)
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        RequestFields f = parsed(b, 5);
        ByteBuf in = Unpooled.copiedBuffer(b);
        edits.reset();
        ByteBuf same = edits.apply(in, f, ByteBufAllocator.DEFAULT);
        assertSame(in, same);
        assertEquals("{\"model\":\"gpt\",\"n\":2}", same.toString(StandardCharsets.UTF_8));
        same.release();
    }

    @Test
    void noEditLeavesTheBodyAlone() {
        RequestEdits edits = new RequestEdits();
        byte[] b = "{\"model\":\"a\"}".getBytes(StandardCharsets.UTF_8);
        ByteBuf in = Unpooled.copiedBuffer(b);
        assertTrue(edits.isEmpty());
        assertSame(in, edits.apply(in, parsed(b, 3), ByteBufAllocator.DEFAULT));
        assertEquals("{\"model\":\"a\"}", in.toString(StandardCharsets.UTF_8));
        in.release();
    }

    private static String withUsage(String streamOptions) {
        String body = "{\"model\":\"a\",\"stream\":true" + streamOptions + "}";
        RequestEdits edits = new RequestEdits();
        return edited(body, (buf, f) -> edits.set(Member.STREAM_OPTIONS, RequestEdits.streamOptionsWithUsage(buf, f)), edits);
    }

    @Test
    void includeUsageIsMergedIntoTheClientsStreamOptions() {
        String head = "{\"model\":\"a\",\"stream\":true";
        assertEquals(head + ",\"stream_options\":{\"include_usage\":true}}", withUsage(""));
        assertEquals(head + ",\"stream_options\":{\"include_usage\":true}}", withUsage(",\"stream_options\":null"));
        assertEquals(head + ",\"stream_options\":{\"include_usage\":true}}", withUsage(",\"stream_options\":{}"));
        assertEquals(head + ",\"stream_options\":{\"include_usage\":true,\"continuous_usage_stats\":true}}",
            withUsage(",\"stream_options\":{\"continuous_usage_stats\":true}"), "the client's other options are kept");
        assertEquals(head + ",\"stream_options\":{\"include_usage\": true , \"continuous_usage_stats\":false}}",
            withUsage(",\"stream_options\":{\"include_usage\": false , \"continuous_usage_stats\":false}"));
        assertEquals(head + ",\"stream_options\":{\"include_usage\":[1],\"include_usage\":true}}",
            withUsage(",\"stream_options\":{\"include_usage\":[1],\"include_usage\":{\"a\":1}}"),
            "the last include_usage, container or not");
        assertEquals(head + ",\"stream_options\":{\"include_usage\":true},\"stream_options\":{\"include_usage\":true,\"x\":1}}",
            withUsage(",\"stream_options\":{\"include_usage\":true},\"stream_options\":{\"x\":1}"),
            "the last stream_options is the one the engine reads");
    }

    @Test
    void theExtractorRecordsWhatThePlanNeeds() {
        byte[] b = ("{\"model\":\"m\",\"temperature\":0.0,\"stream_options\":{\"include_usage\":true},\"stream\":true}")
            .getBytes(StandardCharsets.UTF_8);
        for (int split = 0; split <= b.length; split++) {
            RequestFields f = parsed(b, split);
            assertTrue(f.temperatureZero, "split " + split);
            assertTrue(f.includeUsageTrue, "split " + split);
            assertTrue(f.streamOptionsObject);
            assertEquals(1, f.streamOptionsMembers);
            assertTrue(f.has(Member.TEMPERATURE) && f.has(Member.MODEL) && !f.has(Member.N));
        }
        for (String t : new String[] {"0.01", "\"0\"", "null", "-1"}) {
            byte[] other = ("{\"model\":\"m\",\"temperature\":" + t + "}").getBytes(StandardCharsets.UTF_8);
            assertFalse(parsed(other, 4).temperatureZero, t);
        }
        assertTrue(parsed("{\"model\":\"m\",\"temperature\":0}".getBytes(StandardCharsets.UTF_8), 20).temperatureZero);
        assertFalse(parsed("{\"model\":\"m\",\"stream_options\":{\"include_usage\":1}}".getBytes(StandardCharsets.UTF_8), 7)
            .includeUsageTrue, "only true counts as asking");
    }

    // ---- the plan ------------------------------------------------------------------------------------------------

    private static RuleConfig rule(String engine, String extra) throws Exception {
        return GatewayConfig.parse("""
            rules:
              - name: r
                engine: %s
                models: [m, {name: gpt-4o-mini, served_as: qwen3}]
                endpoints: [{url: "http://127.0.0.1:9001"}]
            %s""".formatted(engine, extra)).rules().get(0);
    }

    /** The plan for {@code body} on {@code rule}, and the body the engine would get. */
    private record Planned(AnswerRewrite rewrite, String engineBody) {}

    private static Planned plan(RuleConfig rule, String body) {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        RequestFields f = parsed(b, b.length / 2);
        RequestEdits edits = new RequestEdits();
        ByteBuf in = Unpooled.copiedBuffer(b);
        AnswerRewrite rw = AnswerRewrite.plan(f, rule, in, edits);
        ByteBuf out = edits.apply(in, f, ByteBufAllocator.DEFAULT);
        String s = out.toString(StandardCharsets.UTF_8);
        out.release();
        return new Planned(rw, s);
    }

    @Test
    void aRequestThatNeedsNoRewriteHasNoPlanAndItsBodyIsUntouched() throws Exception {
        RuleConfig vllm = rule("vllm", "");
        for (String body : new String[] {
            "{\"model\":\"m\",\"messages\":[]}",
            "{\"model\":\"m\",\"messages\":[],\"n\":3,\"temperature\":0.7}",
            "{\"model\":\"m\",\"messages\":[],\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
            "{\"model\":\"m\",\"messages\":[],\"stream\":true,\"stream_options\":\"yes\"}",
        }) {
            Planned p = plan(vllm, body);
            assertNull(p.rewrite(), body);
            assertEquals(body, p.engineBody());
        }
        Planned sglang = plan(rule("sglang", ""), "{\"model\":\"m\",\"messages\":[],\"n\":3,\"temperature\":0}");
        assertNull(sglang.rewrite(), "SGLang answers n identical greedy choices itself");
    }

    @Test
    void anAliasIsSentAsTheServedName() throws Exception {
        Planned p = plan(rule("vllm", ""), "{\"model\":\"gpt-4o-mini\",\"messages\":[]}");
        assertEquals("gpt-4o-mini", p.rewrite().clientModel());
        assertEquals("{\"model\":\"qwen3\",\"messages\":[]}", p.engineBody());
        assertFalse(p.rewrite().stripUsage());
    }

    @Test
    void greedyNIsOneChoiceOnEnginesThatRefuseIt() throws Exception {
        String body = "{\"model\":\"m\",\"prompt\":\"x\",\"n\":3,\"temperature\":0}";
        Planned v = plan(rule("vllm", ""), body);
        assertEquals(3, v.rewrite().replicas());
        assertEquals("{\"model\":\"m\",\"prompt\":\"x\",\"n\":1,\"temperature\":0}", v.engineBody());
        assertEquals(3, plan(rule("trtllm", ""), body).rewrite().replicas());
        assertNull(plan(rule("vllm", "    greedy_n: reject\n"), body).rewrite(), "reject is answered before any engine");
    }

    @Test
    void aStreamWhoseClientDidNotAskForUsageGetsItForced() throws Exception {
        Planned p = plan(rule("sglang", ""), "{\"model\":\"m\",\"messages\":[],\"stream\":true}");
        assertTrue(p.rewrite().stripUsage());
        assertFalse(p.rewrite().rewritesJson());
        assertEquals("{\"model\":\"m\",\"messages\":[],\"stream\":true,\"stream_options\":{\"include_usage\":true}}", p.engineBody());
        Planned all = plan(rule("vllm", ""), "{\"model\":\"gpt-4o-mini\",\"messages\":[],\"stream\":true,\"n\":2,"
            + "\"temperature\":0,\"stream_options\":{\"include_usage\":false}}");
        assertEquals("{\"model\":\"qwen3\",\"messages\":[],\"stream\":true,\"n\":1,\"temperature\":0,"
            + "\"stream_options\":{\"include_usage\":true}}", all.engineBody());
        assertEquals(2, all.rewrite().replicas());
        assertTrue(all.rewrite().stripUsage());
        assertTrue(JSON.readTree(all.engineBody()).isObject());
    }

    @Test
    void greedyNRejectIsVllmsMessageForEveryEngine() throws Exception {
        byte[] b = "{\"model\":\"m\",\"prompt\":\"x\",\"n\":2,\"temperature\":0.0}".getBytes(StandardCharsets.UTF_8);
        Problem p = RequestValidator.greedyN(parsed(b, 9), RuleConfig.GreedyN.REJECT);
        assertEquals(new Problem("n", "greedy_n", "n must be 1 when using greedy sampling.", "invalid_value"), p);
        assertNull(RequestValidator.greedyN(parsed(b, 9), RuleConfig.GreedyN.REPLICATE));
        byte[] one = "{\"model\":\"m\",\"prompt\":\"x\",\"n\":1,\"temperature\":0}".getBytes(StandardCharsets.UTF_8);
        assertNull(RequestValidator.greedyN(parsed(one, 9), RuleConfig.GreedyN.REJECT));
    }

    @Test
    void aBodyChangedSinceItWasParsedIsRefusedNotSplicedAtStaleOffsets() {
        byte[] b = "{\"n\":1000,\"model\":\"gpt\"}".getBytes(StandardCharsets.UTF_8);
        RequestFields f = parsed(b, 4);
        ByteBuf shorter = Unpooled.copiedBuffer("{\"n\":10,\"model\":\"gpt\"}", StandardCharsets.UTF_8);
        RequestEdits edits = new RequestEdits();
        edits.set(Member.MODEL, "\"qwen3\"");
        IllegalStateException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalStateException.class,
            () -> edits.apply(shorter, f, ByteBufAllocator.DEFAULT));
        assertTrue(e.getMessage().contains("changed after it was parsed"), e.getMessage());
        shorter.release();
    }

    @Test
    void aBodyAnEarlierStageShortenedInPlaceIsReadAgainBeforeItIsEdited() {
        byte[] b = "{\"max_tokens\":1000,\"model\":\"gpt\",\"stream\":true}".getBytes(StandardCharsets.UTF_8);
        RequestFields f = parsed(b, 11);
        ByteBuf body = Unpooled.buffer(64).writeBytes("{\"max_tokens\":37,\"model\":\"gpt\",\"stream\":true}"
            .getBytes(StandardCharsets.UTF_8)); // e.g. a context clamp that lowered the budget in place
        assertTrue(RequestEdits.refreshIfEdited(body, f));
        RequestEdits edits = new RequestEdits();
        edits.set(Member.MODEL, "\"qwen3\"");
        edits.set(Member.STREAM_OPTIONS, RequestEdits.streamOptionsWithUsage(body, f));
        ByteBuf out = edits.apply(body, f, ByteBufAllocator.DEFAULT);
        assertEquals("{\"max_tokens\":37,\"model\":\"qwen3\",\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
            out.toString(StandardCharsets.UTF_8));
        out.release();
        ByteBuf same = Unpooled.copiedBuffer(b);
        assertFalse(RequestEdits.refreshIfEdited(same, parsed(b, 3)), "an untouched body is not parsed again");
        same.release();
        // the engine-field strip compacts the body in place: its offsets are read again before any edit
        byte[] internal = "{\"bootstrap_room\":7,\"model\":\"gpt\",\"stream\":true}".getBytes(StandardCharsets.UTF_8);
        RequestFields g = parsed(internal, 9);
        ByteBuf stripped = Unpooled.copiedBuffer(internal);
        EngineFieldStripper.strip(stripped, g);
        assertTrue(RequestEdits.refreshIfEdited(stripped, g));
        assertEquals(0, g.engineFieldRangeCount, "nothing left to remove");
        edits.reset();
        edits.set(Member.MODEL, "\"qwen3\"");
        ByteBuf edited = edits.apply(stripped, g, ByteBufAllocator.DEFAULT);
        assertEquals("{\"model\":\"qwen3\",\"stream\":true}", edited.toString(StandardCharsets.UTF_8));
        edited.release();
    }

    /** A body read again after an in-place edit keeps the text-prefix bound its first read had. */
    @Test
    void aReReadKeepsTheTextPrefixBound() {
        byte[] internal = "{\"bootstrap_room\":7,\"model\":\"gpt\",\"messages\":[{\"content\":\"abcdefgh\"}]}"
            .getBytes(StandardCharsets.UTF_8);
        for (int bound : new int[] {0, 3, RequestFields.MAX_TEXT_PREFIX_CHARS}) {
            RequestFields g = new RequestFields();
            RequestFieldExtractor x = new RequestFieldExtractor(g).textPrefixChars(bound);
            x.feed(ByteBuffer.wrap(internal));
            assertEquals(RequestFieldExtractor.Result.OK, x.finish());
            ByteBuf stripped = Unpooled.copiedBuffer(internal);
            EngineFieldStripper.strip(stripped, g);
            assertTrue(RequestEdits.refreshIfEdited(stripped, g));
            String expected = ("abcdefgh" + RequestFields.MESSAGE_END).substring(0, Math.min(bound, 9));
            assertEquals(expected, g.textPrefix.toString(), "bound " + bound);
            assertEquals(bound, g.textPrefixLimit);
            stripped.release();
        }
    }

    @Test
    void jsonStringsAreEscaped() {
        assertEquals("\"a\\\"b\\\\c\\n\\u0001é\"", new String(RequestEdits.jsonString("a\"b\\c\n\u0001é"), StandardCharsets.UTF_8));
    }
}
