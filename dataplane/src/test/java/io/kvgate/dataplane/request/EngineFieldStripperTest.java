package io.kvgate.dataplane.request;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.dataplane.request.RequestFields.Member;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * The in-place removal of client-sent engine fields, byte for byte, with the body split at every byte: the
 * top-level members and, on {@code kv_exact} rules, vLLM's {@code vllm_xargs.kv_cache_report_mode} (vLLM copies
 * {@code vllm_xargs} into {@code SamplingParams.extra_args}; {@code "full"} re-announces every reused block with no
 * removal to match it, PR #45261), while every other byte, other {@code vllm_xargs} members included, survives.
 */
class EngineFieldStripperTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    private static RequestFields parsed(byte[] b, int split) {
        RequestFields f = new RequestFields();
        RequestFieldExtractor x = new RequestFieldExtractor(f);
        x.feed(ByteBuffer.wrap(b, 0, split));
        x.feed(ByteBuffer.wrap(b, split, b.length - split));
        assertEquals(RequestFieldExtractor.Result.OK, x.finish(), "split at " + split);
        return f;
    }

    /** The stripped body (the same for every split) and the number of members removed, as "count|body". */
    private static String stripped(String body, boolean kvExact) throws Exception {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        String first = null;
        for (int split = 0; split <= b.length; split++) {
            RequestFields f = parsed(b, split);
            if (!kvExact) {
                f.keepReportModeXarg();
            }
            ByteBuf buf = Unpooled.copiedBuffer(b);
            int removed = f.engineFieldRangeCount > 0 ? EngineFieldStripper.strip(buf, f) : 0;
            String out = buf.toString(StandardCharsets.UTF_8);
            buf.release();
            JSON.readTree(out); // still one valid JSON object
            String s = removed + "|" + out;
            if (first == null) {
                first = s;
            } else {
                assertEquals(first, s, "split at " + split);
            }
        }
        return first;
    }

    @Test
    void theReportModeIsRemovedFromVllmXargsAndItsOtherMembersKept() throws Exception {
        assertEquals("1|{\"model\":\"m\",\"vllm_xargs\":{\"my_ext\":3},\"messages\":[]}",
            stripped("{\"model\":\"m\",\"vllm_xargs\":{\"kv_cache_report_mode\":\"full\",\"my_ext\":3},\"messages\":[]}", true));
        assertEquals("1|{\"vllm_xargs\":{\"a\":\"x\"  },\"model\":\"m\"}",
            stripped("{\"vllm_xargs\":{\"a\":\"x\" , \"kv_cache_report_mode\" : \"full\" },\"model\":\"m\"}", true),
            "the last member of vllm_xargs takes its comma (the whitespace around it stays)");
        assertEquals("1|{\"vllm_xargs\":{ }}", stripped("{\"vllm_xargs\":{ \"kv_cache_report_mode\":\"full\"}}", true));
        assertEquals("2|{\"vllm_xargs\":{},\"model\":\"m\"}",
            stripped("{\"vllm_xargs\":{\"kv_cache_report_mode\":\"incremental\",\"kv_cache_report_mode\":\"full\"},"
                + "\"model\":\"m\"}", true), "duplicates: Python's json keeps the last, both go");
    }

    @Test
    void theReportModeGoesWithTopLevelEngineFieldsAndDeeperCopiesStay() throws Exception {
        assertEquals("2|{\"model\":\"m\",\"vllm_xargs\":{\"b\":[1,{\"kv_cache_report_mode\":1}]}}",
            stripped("{\"model\":\"m\",\"vllm_xargs\":{\"kv_cache_report_mode\":\"full\",\"b\":[1,{\"kv_cache_report_mode\":1}]},"
                + "\"kv_transfer_params\":{\"x\":1}}", true));
        assertEquals("2|{\"model\":\"m\",\"vllm_xargs\":{\"k\":1}}",
            stripped("{\"kv_transfer_params\":null,\"model\":\"m\",\"vllm_xargs\":{\"k\":1,\"kv_cache_report_mode\":\"full\"}}",
                true));
    }

    @Test
    void bodiesWithoutTheXargAreLeftByteExact() throws Exception {
        for (String body : new String[] {
            "{\"model\":\"m\",\"kv_cache_report_mode\":\"full\"}", // top level: vLLM never reads it there
            "{\"model\":\"m\",\"vllm_xargs\":\"kv_cache_report_mode\"}",
            "{\"model\":\"m\",\"vllm_xargs\":null,\"x\":{\"kv_cache_report_mode\":\"full\"}}",
            "{ \"model\" : \"m\" , \"vllm_xargs\" : { \"other\" : [ \"kv_cache_report_mode\" ] } }"}) {
            assertEquals("0|" + body, stripped(body, true));
        }
    }

    @Test
    void onOtherRulesTheClientsReportModeIsKeptAndTopLevelFieldsStillGo() throws Exception {
        String body = "{\"model\":\"m\",\"vllm_xargs\":{\"kv_cache_report_mode\":\"full\"},\"bootstrap_room\":7}";
        assertEquals("1|{\"model\":\"m\",\"vllm_xargs\":{\"kv_cache_report_mode\":\"full\"}}", stripped(body, false));
        String only = "{\"model\":\"m\",\"vllm_xargs\":{\"kv_cache_report_mode\":\"full\"}}";
        assertEquals("0|" + only, stripped(only, false));
    }

    @Test
    void theRemovalAndAnEditGoInOnePass() {
        byte[] b = "{\"vllm_xargs\":{\"x\":1,\"kv_cache_report_mode\":\"full\"},\"model\":\"gpt\",\"stream\":true}"
            .getBytes(StandardCharsets.UTF_8);
        for (int split = 0; split <= b.length; split++) {
            RequestFields f = parsed(b, split);
            RequestEdits edits = new RequestEdits();
            edits.set(Member.MODEL, "\"qwen3\"");
            edits.set(Member.MAX_TOKENS, "5");
            ByteBuf out = edits.apply(Unpooled.copiedBuffer(b), f, ByteBufAllocator.DEFAULT);
            assertEquals("{\"vllm_xargs\":{\"x\":1},\"model\":\"qwen3\",\"stream\":true,\"max_tokens\":5}",
                out.toString(StandardCharsets.UTF_8), "split at " + split);
            out.release();
        }
    }

    /** On other rules the kept report mode survives the re-read that precedes later edits (dialect, answer rewrite). */
    @Test
    void aKeptReportModeSurvivesTheReReadBeforeLaterEdits() {
        byte[] b = "{\"bootstrap_room\":7,\"vllm_xargs\":{\"kv_cache_report_mode\":\"full\"},\"model\":\"gpt\"}"
            .getBytes(StandardCharsets.UTF_8);
        RequestFields f = parsed(b, b.length);
        f.keepReportModeXarg();
        ByteBuf body = Unpooled.copiedBuffer(b);
        assertEquals(1, EngineFieldStripper.strip(body, f));
        assertEquals(true, RequestEdits.refreshIfEdited(body, f));
        assertEquals(0, f.engineFieldRangeCount, "nothing left to remove after the re-read");
        RequestEdits edits = new RequestEdits();
        edits.set(Member.MODEL, "\"qwen3\"");
        ByteBuf out = edits.apply(body, f, ByteBufAllocator.DEFAULT);
        assertEquals("{\"vllm_xargs\":{\"kv_cache_report_mode\":\"full\"},\"model\":\"qwen3\"}",
            out.toString(StandardCharsets.UTF_8));
        out.release();
    }
}
