package io.kvgate.dataplane.relay;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.dataplane.request.AnswerRewrite;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The stream rewrites of issue #13 (alias, greedy replication, forced usage) behind an {@link SseFramer} and an
 * {@link EngineStreamCheck}, as the relay runs them, with the engine's stream split at every byte.
 */
class SseRewriterTest {
    private static final ByteBufAllocator ALLOC = ByteBufAllocator.DEFAULT;
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String HEAD = "\"id\":\"c1\",\"model\":\"qwen3\"";
    private static final String ROLE = chunk("{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,"
        + "\"finish_reason\":null}");
    private static final String TEXT = chunk("{\"index\":0,\"delta\":{\"content\":\"hi \\\"there\\\"\"},\"logprobs\":null,"
        + "\"finish_reason\":null}");
    private static final String TOOL = chunk("{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\"}]},"
        + "\"finish_reason\":null}");
    private static final String FINISH = chunk("{\"index\":0,\"delta\":{\"content\":\"\"},\"logprobs\":null,"
        + "\"finish_reason\":\"stop\",\"stop_reason\":null}");
    private static final String USAGE = "data: {" + HEAD + ",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"total_tokens\":7,"
        + "\"completion_tokens\":2,\"prompt_tokens_details\":{\"cached_tokens\":3},\"completion_tokens_details\":"
        + "{\"reasoning_tokens\":1}}}\n\n";
    private static final String DONE = "data: [DONE]\n\n";
    private static final String VLLM_STREAM = ROLE + TEXT + TOOL + FINISH + USAGE + DONE;

    private static String chunk(String choice) {
        return "data: {" + HEAD + ",\"choices\":[" + choice + "]}\n\n";
    }

    /** What the client receives for {@code stream} split at {@code split}, and the usage counted on the way. */
    private record Relayed(String text, UsageScanner usage) {}

    private static Relayed relay(String stream, int split, AnswerRewrite rw) {
        byte[] b = stream.getBytes(StandardCharsets.UTF_8);
        SseFramer framer = new SseFramer();
        EngineStreamCheck check = new EngineStreamCheck(true);
        SseRewriter rewriter = new SseRewriter(rw);
        UsageScanner usage = new UsageScanner();
        StringBuilder out = new StringBuilder();
        ByteBuf first = rewriter.rewrite(ALLOC, check.check(ALLOC, framer.next(ALLOC, Unpooled.wrappedBuffer(b, 0, split))), usage);
        out.append(first.toString(StandardCharsets.UTF_8));
        first.release();
        ByteBuf last = rewriter.releaseHeld(ALLOC, rewriter.rewrite(ALLOC, check.check(ALLOC, framer.finish(ALLOC,
            Unpooled.wrappedBuffer(b, split, b.length - split))), usage));
        out.append(last.toString(StandardCharsets.UTF_8));
        last.release();
        return new Relayed(out.toString(), usage);
    }

    /** Relays {@code stream} at every split; asserts the client always gets the same bytes and returns them. */
    private static Relayed everySplit(String stream, AnswerRewrite rw) {
        Relayed first = relay(stream, 0, rw);
        for (int i = 1; i <= stream.getBytes(StandardCharsets.UTF_8).length; i++) {
            Relayed r = relay(stream, i, rw);
            assertEquals(first.text(), r.text(), "split at " + i);
            assertEquals(first.usage().usageSeen(), r.usage().usageSeen(), "split at " + i);
            assertEquals(first.usage().completionTokens(), r.usage().completionTokens(), "split at " + i);
        }
        return first;
    }

    /** The {@code data:} payloads of a stream, as JSON (null for [DONE]). */
    private static List<JsonNode> events(String text) throws Exception {
        List<JsonNode> out = new ArrayList<>();
        for (String e : text.split("\n\n")) {
            String data = e.substring("data: ".length());
            out.add(data.equals("[DONE]") ? null : JSON.readTree(data));
        }
        return out;
    }

    @Test
    void anAliasIsWrittenBackIntoEveryChunkAndNothingElseChanges() {
        Relayed r = everySplit(VLLM_STREAM, new AnswerRewrite("gpt-4o-mini", 1, false));
        assertEquals(VLLM_STREAM.replace("\"model\":\"qwen3\"", "\"model\":\"gpt-4o-mini\""), r.text());
        assertEquals(5, r.usage().promptTokens());
        assertEquals(2, r.usage().completionTokens());
        assertEquals(3, r.usage().cachedTokens());
    }

    @Test
    void forcedUsageIsCountedThenDroppedAndEveryOtherByteKept() {
        Relayed r = everySplit(VLLM_STREAM, new AnswerRewrite(null, 1, true));
        assertEquals(ROLE + TEXT + TOOL + FINISH + DONE, r.text());
        assertTrue(r.usage().usageSeen(), "counted although the client never sees it");
        assertEquals(5, r.usage().promptTokens());
        assertEquals(2, r.usage().completionTokens());
        // SGLang writes "usage":null on every chunk (asked or not): those stay, only the usage chunk goes
        String sglang = TEXT.replace("]}\n\n", "],\"usage\":null}\n\n");
        Relayed s = everySplit(sglang + sglang + USAGE + DONE, new AnswerRewrite(null, 1, true));
        assertEquals(sglang + sglang + DONE, s.text());
    }

    /**
     * llama.cpp's last chunks as {@code to_json_oaicompat_chat_stream} writes them (nlohmann ordered_json, compact):
     * with {@code include_usage} the usage-only chunk is {@code deltas.back()} and carries {@code timings}; unasked,
     * the finish chunk does. A client that did not ask for usage gets the timings on the finish chunk, as from the
     * engine directly, and no usage chunk.
     */
    @Test
    void llamaCppTimingsMoveFromTheRemovedUsageChunkToTheFinishChunk() throws Exception {
        String head = "\"created\":1765000000,\"id\":\"chatcmpl-x\",\"model\":\"qwen3\",\"system_fingerprint\":\"b1\","
            + "\"object\":\"chat.completion.chunk\"";
        String text = "data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"content\":\"hi\"}}]," + head + "}\n\n";
        String finish = "data: {\"choices\":[{\"finish_reason\":\"stop\",\"index\":0,\"delta\":{}}]," + head + "}\n\n";
        String timings = "{\"cache_n\":0,\"prompt_n\":5,\"prompt_ms\":1.5,\"prompt_per_token_ms\":0.3,"
            + "\"prompt_per_second\":3333.3,\"predicted_n\":2,\"predicted_ms\":4.0,\"predicted_per_token_ms\":2.0,"
            + "\"predicted_per_second\":500.0}";
        String usage = "data: {\"choices\":[]," + head + ",\"usage\":{\"completion_tokens\":2,\"prompt_tokens\":5,"
            + "\"total_tokens\":7},\"timings\":" + timings + "}\n\n";
        AnswerRewrite strip = new AnswerRewrite(null, 1, true, true);
        Relayed r = everySplit(text + finish + usage + DONE, strip);
        String finishWithTimings = finish.replace(head + "}", head + ",\"timings\":" + timings + "}");
        assertEquals(text + finishWithTimings + DONE, r.text());
        assertEquals(7, r.usage().promptTokens() + r.usage().completionTokens(), "counted although removed");
        // Relayed as the engine sent it: the client asked for usage (no rewrite), or the engine is not llama.cpp.
        assertEquals(text + finish + usage + DONE, everySplit(text + finish + usage + DONE,
            new AnswerRewrite(null, 1, false, true)).text());
        assertEquals(text + finish + DONE, everySplit(text + finish + usage + DONE, new AnswerRewrite(null, 1, true)).text());
        // No usage chunk after the finish chunk, or none at all before the stream's end: the finish chunk as it was.
        assertEquals(text + finish + DONE, everySplit(text + finish + DONE, strip).text());
        assertEquals(text + finish, everySplit(text + finish, strip).text());
        // An alias is written into the held chunk too.
        assertEquals((text + finishWithTimings + DONE).replace("\"model\":\"qwen3\"", "\"model\":\"gpt\""),
            everySplit(text + finish + usage + DONE, new AnswerRewrite("gpt", 1, true, true)).text());
    }

    @Test
    void greedyReplicationSendsEachChunkForEveryIndexAndMultipliesTheUsage() throws Exception {
        Relayed r = everySplit(VLLM_STREAM, new AnswerRewrite("gpt-4o-mini", 3, false));
        List<JsonNode> ev = events(r.text());
        assertEquals(4 * 3 + 2, ev.size(), "each of the 4 choice chunks 3 times, the usage chunk once, [DONE]");
        for (int c = 0; c < 4; c++) {
            for (int i = 0; i < 3; i++) {
                JsonNode e = ev.get(c * 3 + i);
                assertEquals(i, e.at("/choices/0/index").asInt(), r.text());
                assertEquals("gpt-4o-mini", e.get("model").asText());
            }
        }
        assertEquals(0, ev.get(7).at("/choices/0/delta/tool_calls/0/index").asInt(), "a tool call's own index is not a choice");
        assertEquals("hi \"there\"", ev.get(5).at("/choices/0/delta/content").asText());
        JsonNode usage = ev.get(12).get("usage");
        assertEquals(5, usage.get("prompt_tokens").asInt(), "the prompt is counted once");
        assertEquals(6, usage.get("completion_tokens").asInt());
        assertEquals(11, usage.get("total_tokens").asInt());
        assertEquals(3, usage.at("/completion_tokens_details/reasoning_tokens").asInt());
        assertEquals(3, usage.at("/prompt_tokens_details/cached_tokens").asInt());
        assertEquals(6, r.usage().completionTokens(), "counted as the client sees it");
        assertEquals(null, ev.get(13));
        // one copy is the engine's bytes with the index changed
        assertTrue(r.text().startsWith(ROLE.replace("qwen3", "gpt-4o-mini") + ROLE.replace("qwen3", "gpt-4o-mini")
            .replace("\"index\":0,\"delta\"", "\"index\":1,\"delta\"")), r.text());
    }

    @Test
    void aBatchOfPromptsKeepsOpenAisPromptMajorOrder() throws Exception {
        String p0 = "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\"a\"}]}\n\n";
        String p1 = p0.replace("\"index\":0", "\"index\":1").replace("\"a\"", "\"b\"");
        Relayed r = everySplit(p0 + p1 + DONE, new AnswerRewrite(null, 2, true));
        List<JsonNode> ev = events(r.text());
        assertEquals(List.of(0, 1, 2, 3), ev.subList(0, 4).stream().map(e -> e.at("/choices/0/index").asInt()).toList());
        assertEquals(List.of("a", "a", "b", "b"), ev.subList(0, 4).stream().map(e -> e.at("/choices/0/text").asText()).toList());
    }

    @Test
    void errorEventsDoneAndForeignEventsPassUnchanged() {
        String vllmError = "data: {\"error\":{\"message\":\"engine died\",\"type\":\"InternalServerError\",\"param\":null,\"code\":500}}\n\n";
        String normalized = "data: {\"error\":{\"message\":\"engine died\",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n";
        String named = "event: ping\ndata: {\"model\":\"qwen3\"}\n\n";
        String comment = ": keep-alive\n\n";
        Relayed r = everySplit(TEXT + named + comment + vllmError + DONE, new AnswerRewrite("gpt", 2, true));
        String text = TEXT.replace("qwen3", "gpt");
        assertEquals(text + text.replace("\"index\":0", "\"index\":1") + named + comment + normalized + DONE, r.text());
        assertFalse(r.usage().usageSeen());
    }

    @Test
    void crlfEventsAreRewrittenAsLfEvents() {
        String crlf = TEXT.replace("\n\n", "\r\n\r\n");
        assertEquals(TEXT.replace("qwen3", "gpt") + DONE, everySplit(crlf + DONE, new AnswerRewrite("gpt", 1, false)).text());
    }

    @Test
    void aBatchWithNothingToChangeIsTheSameBuffer() {
        SseRewriter stripOnly = new SseRewriter(new AnswerRewrite(null, 1, true));
        UsageScanner usage = new UsageScanner();
        String sglang = TEXT.replace("]}\n\n", "],\"usage\":null}\n\n");
        for (String batch : new String[] {TEXT + FINISH, sglang + sglang, DONE}) {
            ByteBuf in = Unpooled.copiedBuffer(batch, StandardCharsets.UTF_8);
            assertSame(in, stripOnly.rewrite(ALLOC, in, usage), batch);
            in.release();
        }
        ByteBuf withUsage = Unpooled.copiedBuffer(FINISH + USAGE, StandardCharsets.UTF_8);
        ByteBuf out = stripOnly.rewrite(ALLOC, withUsage, usage);
        assertEquals(0, withUsage.refCnt(), "a changed batch releases the engine's buffer");
        assertEquals(FINISH, out.toString(StandardCharsets.UTF_8));
        out.release();
    }

    @Test
    void usageObjectDetection() {
        assertTrue(hasUsage("{\"usage\" : {}}"));
        assertFalse(hasUsage("{\"usage\":null}"));
        assertFalse(hasUsage("{\"usage\":null,\"x\":\"\\\"usage\\\":{\"}"), "escaped quotes in a string are not a member");
        assertTrue(hasUsage("{\"usage\":null,\"usage\":{}}"));
    }

    private static boolean hasUsage(String s) {
        ByteBuf b = buf(s);
        try {
            return new SseRewriter(new AnswerRewrite(null, 1, true)).hasUsageObject(b, 0, b.writerIndex());
        } finally {
            b.release();
        }
    }

    private static ByteBuf buf(String s) {
        return Unpooled.copiedBuffer(s, StandardCharsets.UTF_8);
    }
}
