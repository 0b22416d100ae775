package io.kvgate.dataplane.request;

import static io.kvgate.dataplane.request.ContextBudget.ABSENT;
import static io.kvgate.dataplane.request.ContextBudget.UNREADABLE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** The context-length verdicts and the in-place budget edit (issue #13 item 1). */
class ContextBudgetTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    private static ContextBudget.Verdict vllm(int ctx, int prompt, int requested, boolean chat, boolean clamp) {
        return ContextBudget.decide(ctx, prompt, true, requested, chat, false, clamp);
    }

    private static ContextBudget.Verdict sglang(int ctx, int prompt, int requested, boolean chat, boolean clamp) {
        return ContextBudget.decide(ctx, prompt, true, requested, chat, true, clamp);
    }

    // ---- arithmetic --------------------------------------------------------------------------------------------

    @Test
    void aRequestThatFitsIsSentAsItIs() {
        assertSame(ContextBudget.Verdict.PASS, vllm(64, 10, 54, true, false), "prompt + max_tokens = context fits");
        assertSame(ContextBudget.Verdict.PASS, vllm(64, 10, 20, false, true));
        assertSame(ContextBudget.Verdict.PASS, sglang(64, 10, 53, true, false), "SGLang needs one token free: 63 fits");
    }

    @Test
    void rejectAnswersTheOverflowWithOpenAisMessage() {
        ContextBudget.Verdict chat = vllm(64, 10, 100, true, false);
        assertEquals(0, chat.budget());
        Problem p = chat.problem();
        assertEquals("messages", p.param());
        assertEquals("context_length_exceeded", p.openAiCode());
        assertEquals("context_length_exceeded", p.reason());
        assertEquals("This model's maximum context length is 64 tokens. However, you requested 110 tokens (10 in the"
            + " messages, 100 in the completion). Please reduce the length of the messages or completion.", p.message());
        Problem completions = sglang(64, 10, 55, false, false).problem();
        assertEquals("prompt", completions.param());
        assertEquals("This model's maximum context length is 64 tokens. However, you requested 65 tokens (10 in the"
            + " prompt, 55 in the completion). Please reduce the length of the prompt or completion.", completions.message());
    }

    @Test
    void aPromptAloneAtOrOverTheContextIsRefusedWhateverThePolicy() {
        for (boolean clamp : new boolean[] {false, true}) {
            Problem withBudget = vllm(64, 64, 5, true, clamp).problem();
            assertEquals("This model's maximum context length is 64 tokens. However, you requested 69 tokens (64 in the"
                + " messages, 5 in the completion). Please reduce the length of the messages or completion.", withBudget.message());
            Problem alone = sglang(64, 70, ABSENT, false, clamp).problem();
            assertEquals("prompt", alone.param());
            assertEquals("This model's maximum context length is 64 tokens. However, your prompt resulted in 70 tokens."
                + " Please reduce the length of the prompt.", alone.message());
            assertEquals("context_length_exceeded", vllm(64, 64, UNREADABLE, true, clamp).problem().openAiCode(),
                "an unreadable budget cannot save a prompt that fills the context");
        }
        // A count that stopped at the bound proves the prompt is over it.
        Problem over = ContextBudget.decide(64, 64, false, ABSENT, true, false, false).problem();
        assertEquals("This model's maximum context length is 64 tokens. However, your messages resulted in more than 64"
            + " tokens. Please reduce the length of the messages.", over.message());
        Problem overWithBudget = ContextBudget.decide(64, 64, false, 8, false, false, true).problem();
        assertTrue(overWithBudget.message().contains("you requested more than 72 tokens (more than 64 in the prompt, 8 in"
            + " the completion)"), overWithBudget.message());
    }

    @Test
    void clampLowersTheBudgetToWhatFitsAsVllmDoes() {
        assertEquals(54, vllm(64, 10, 100, true, true).budget());
        assertNull(vllm(64, 10, 100, true, true).problem());
        assertEquals(1, vllm(64, 63, 100, false, true).budget(), "one token of room is still a completion");
        // SGLang refuses prompt + max_new_tokens >= context: the budget sent there leaves one token free.
        assertEquals(53, sglang(64, 10, 100, true, true).budget());
    }

    @Test
    void sglangsStricterBoundaryIsAbsorbedUnderBothPolicies() {
        // prompt + budget = context: vLLM serves it, SGLang would answer 400 — so SGLang gets one token less.
        assertEquals(53, sglang(64, 10, 54, true, false).budget());
        assertEquals(53, sglang(64, 10, 54, true, true).budget());
        // prompt = context - 1: nothing fits on SGLang; its own 400 (normalised) is the answer, not a budget of 0.
        assertSame(ContextBudget.Verdict.PASS, sglang(64, 63, 1, true, true));
        assertSame(ContextBudget.Verdict.PASS, sglang(64, 63, ABSENT, false, false));
    }

    @Test
    void noBudgetIsLeftAsVllmServesIt() {
        // Chat without a budget fills the rest of the context on both engines.
        assertSame(ContextBudget.Verdict.PASS, vllm(64, 60, ABSENT, true, false));
        assertSame(ContextBudget.Verdict.PASS, sglang(64, 62, ABSENT, true, true));
        // Completions default to 16: vLLM lowers it to the room; SGLang would refuse, so the gateway sets it.
        assertSame(ContextBudget.Verdict.PASS, vllm(64, 48, ABSENT, false, false), "48 + 16 = 64 fits vLLM");
        assertEquals(15, sglang(64, 48, ABSENT, false, false).budget(), "set under reject too: the client asked nothing");
        assertEquals(4, sglang(64, 59, ABSENT, false, true).budget());
        assertEquals(4, vllm(64, 60, ABSENT, false, false).budget());
        assertSame(ContextBudget.Verdict.PASS, sglang(64, 40, ABSENT, false, false));
    }

    @Test
    void aBudgetTheGatewayCannotReadIsTheEnginesToJudge() {
        assertSame(ContextBudget.Verdict.PASS, vllm(64, 10, UNREADABLE, true, false));
        assertSame(ContextBudget.Verdict.PASS, sglang(64, 10, UNREADABLE, false, true));
        assertSame(ContextBudget.Verdict.PASS, ContextBudget.decide(64, 10, false, 100, true, false, false),
            "an inexact count below the context proves nothing");
    }

    // ---- which field the engines read ---------------------------------------------------------------------------

    private static RequestFields fields(String body) {
        RequestFields f = new RequestFields();
        RequestFieldExtractor x = new RequestFieldExtractor(f);
        x.feed(ByteBuffer.wrap(body.getBytes(StandardCharsets.UTF_8)));
        assertEquals(RequestFieldExtractor.Result.OK, x.finish(), x.error());
        return f;
    }

    @Test
    void maxCompletionTokensWinsOnChatAndCompletionsReadOnlyMaxTokens() {
        assertEquals(50, ContextBudget.requested(fields("{\"max_tokens\":10,\"max_completion_tokens\":50}"), true));
        assertEquals(10, ContextBudget.requested(fields("{\"max_tokens\":10,\"max_completion_tokens\":50}"), false));
        assertEquals(10, ContextBudget.requested(fields("{\"max_tokens\":10,\"max_completion_tokens\":null}"), true));
        assertEquals(ABSENT, ContextBudget.requested(fields("{\"max_completion_tokens\":50}"), false));
        assertEquals(ABSENT, ContextBudget.requested(fields("{\"max_tokens\":null}"), true));
        assertEquals(7, ContextBudget.requested(fields("{\"max_tokens\":99,\"max_tokens\":7}"), true), "the last wins");
        assertEquals(UNREADABLE, ContextBudget.requested(fields("{\"max_tokens\":10.5}"), true));
        assertEquals(UNREADABLE, ContextBudget.requested(fields("{\"max_tokens\":10,\"max_completion_tokens\":\"50\"}"), true));
        assertEquals(10, ContextBudget.requested(fields("{\"max_tokens\":\"x\",\"max_tokens\":10}"), true));
        assertEquals(UNREADABLE, ContextBudget.requested(fields("{\"max_tokens\":{\"a\":1}}"), false));
    }

    // ---- the JSON edit -------------------------------------------------------------------------------------------

    /** Extracts, strips engine-internal members as the front door does, lowers the budget; returns the new body. */
    private static String lowered(String body, int budget, boolean insert, int split) {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        RequestFields f = new RequestFields();
        RequestFieldExtractor x = new RequestFieldExtractor(f);
        x.feed(ByteBuffer.wrap(b, 0, split));
        x.feed(ByteBuffer.wrap(b, split, b.length - split));
        assertEquals(RequestFieldExtractor.Result.OK, x.finish(), x.error());
        ByteBuf buf = Unpooled.buffer(b.length, b.length + 64).writeBytes(b);
        EngineFieldStripper.strip(buf, f);
        buf = ContextBudget.lowerBudget(buf, f, budget, insert, b.length + 64);
        assertNotNull(buf);
        String out = buf.toString(StandardCharsets.UTF_8);
        buf.release();
        return out;
    }

    private static JsonNode tree(String s) throws Exception {
        return JSON.readTree(s);
    }

    @Test
    void theBudgetIsRewrittenInPlaceAtEverySplitPosition() throws Exception {
        String body = "{\"model\":\"m\",\"max_tokens\":4096,\"messages\":[{\"role\":\"user\",\"content\":\"max_tokens\"}]}";
        for (int split = 0; split <= body.length(); split++) {
            String out = lowered(body, 54, false, split);
            assertEquals("{\"model\":\"m\",\"max_tokens\":54,\"messages\":[{\"role\":\"user\",\"content\":\"max_tokens\"}]}", out,
                "split at " + split);
        }
    }

    @Test
    void duplicatesAndBothFieldsAreAllLowered() throws Exception {
        String out = lowered("{\"max_tokens\":100000 ,\"model\":\"m\",\"max_completion_tokens\":  999,"
            + "\"max_tokens\":5,\"max_completion_tokens\":70,\"messages\":[]}", 60, false, 7);
        assertEquals("{\"max_tokens\":60 ,\"model\":\"m\",\"max_completion_tokens\":  60,\"max_tokens\":5,"
            + "\"max_completion_tokens\":60,\"messages\":[]}", out, "each value above the budget, duplicates too; 5 stays");
        JsonNode t = tree(out);
        assertEquals(60, t.get("max_completion_tokens").asInt(), "whichever occurrence the engine reads is in budget");
    }

    @Test
    void valuesBeyondIntRangeAndNestedNamesAreHandled() throws Exception {
        String out = lowered("{\"model\":\"m\",\"extra\":{\"max_tokens\":99999},\"max_tokens\":123456789012345678901234567890}",
            12, false, 3);
        assertEquals("{\"model\":\"m\",\"extra\":{\"max_tokens\":99999},\"max_tokens\":12}", out,
            "only top-level members are budgets");
    }

    @Test
    void anAbsentBudgetIsAddedAsTheLastMember() throws Exception {
        assertEquals("{\"model\":\"m\",\"prompt\":[1,2,3],\"max_tokens\":4}", lowered("{\"model\":\"m\",\"prompt\":[1,2,3]}", 4, true, 5));
        String withNull = lowered("{\"model\":\"m\",\"max_tokens\":null,\"prompt\":\"x\"}\n", 9, true, 20);
        assertEquals("{\"model\":\"m\",\"max_tokens\":null,\"prompt\":\"x\",\"max_tokens\":9}\n", withNull);
        assertEquals(9, tree(withNull).get("max_tokens").asInt(), "the added member is the one the engine reads");
    }

    @Test
    void editsLandWhereTheStrippedBodyHasThem() throws Exception {
        // Engine-internal members before, between and after the budgets are removed first; the edit follows them.
        String body = "{\"kv_transfer_params\":{\"a\":[1,2]},\"model\":\"m\",\"max_tokens\":500,\"bootstrap_host\":\"h\","
            + "\"max_completion_tokens\":800,\"prompt\":[1],\"bootstrap_room\":7}";
        for (int split = 0; split <= body.length(); split += 7) {
            assertEquals("{\"model\":\"m\",\"max_tokens\":40,\"max_completion_tokens\":40,\"prompt\":[1]}",
                lowered(body, 40, false, split), "split at " + split);
        }
        assertEquals("{\"model\":\"m\",\"prompt\":[1],\"max_tokens\":3}",
            lowered("{\"model\":\"m\",\"prompt\":[1],\"bootstrap_host\":\"h\",\"bootstrap_room\":7}", 3, true, 9),
            "added after a stripped last member");
    }

    @Test
    void aBodyAtItsSizeLimitIsLeftForTheEngine() {
        byte[] b = "{\"model\":\"m\",\"prompt\":[1,2]}".getBytes(StandardCharsets.UTF_8);
        RequestFields f = new RequestFields();
        RequestFieldExtractor x = new RequestFieldExtractor(f);
        x.feed(ByteBuffer.wrap(b));
        x.finish();
        ByteBuf full = Unpooled.buffer(b.length, b.length).writeBytes(b);
        assertNull(ContextBudget.lowerBudget(full, f, 5, true, b.length));
        assertEquals("{\"model\":\"m\",\"prompt\":[1,2]}", full.toString(StandardCharsets.UTF_8), "unchanged");
        full.release();
    }

    /**
     * A body kept as a slice of the read buffer cannot grow: within the size limit the member goes into a larger
     * copy (the slice released), and the copy is what the caller forwards.
     */
    @Test
    void aBodyThatCannotGrowIsCopiedWhenTheLimitLeavesRoom() {
        byte[] b = "{\"model\":\"m\",\"prompt\":[1,2]}".getBytes(StandardCharsets.UTF_8);
        RequestFields f = new RequestFields();
        RequestFieldExtractor x = new RequestFieldExtractor(f);
        x.feed(ByteBuffer.wrap(b));
        x.finish();
        ByteBuf read = Unpooled.buffer(64).writeBytes(b);
        ByteBuf slice = read.retainedSlice(0, b.length);
        read.release();
        ByteBuf edited = ContextBudget.lowerBudget(slice, f, 5, true, 4096);
        assertNotSame(slice, edited);
        assertEquals(0, slice.refCnt(), "the slice was released");
        assertEquals("{\"model\":\"m\",\"prompt\":[1,2],\"max_tokens\":5}", edited.toString(StandardCharsets.UTF_8));
        edited.release();
    }
}
