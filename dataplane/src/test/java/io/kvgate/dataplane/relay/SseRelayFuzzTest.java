package io.kvgate.dataplane.relay;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

import io.kvgate.testkit.fuzz.ByteMutations;
import io.kvgate.testkit.fuzz.FuzzCorpus;
import io.kvgate.testkit.fuzz.PropertyRunner;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Issue #43 fuzzing of the relay's answer path: engine SSE streams (the corpus in {@code fuzz/sse-streams.corpus},
 * their mutants, and soups of SSE and usage tokens) split into chunks at random places. {@link SseFramer} against a
 * model of its contract (release exactly up to the last blank line seen, hold the rest up to its bound, forward an
 * over-long partial event as it is; nothing lost, nothing repeated, every buffer released), and the whole relay
 * (framer, {@link EngineStreamCheck}, {@link UsageScanner}) giving the client the same bytes, the same error and
 * [DONE] verdicts and the same usage however the engine's bytes were split.
 */
class SseRelayFuzzTest {
    static final ByteBufAllocator ALLOC = ByteBufAllocator.DEFAULT;
    static final int MAX_STREAM_BYTES = 4096;
    static final List<FuzzCorpus.Entry> CORPUS = FuzzCorpus.load("/fuzz/sse-streams.corpus");
    static final List<byte[]> SSE_TOKENS = FuzzCorpus.tokens("\n", "\r", "\r\n", "\n\n", "\r\n\r\n", "data:", "data: ",
        "[DONE]", "data: [DONE]\n\n", ": c\n", "event: x\n", "\"error\"", "{\"error\":{\"message\":\"m\",\"code\":500}}",
        "\"object\":\"error\"", "\"usage\":{", "\"usage\"", "\"prompt_tokens\":", "\"completion_tokens\":",
        "\"cached_tokens\":", "\"prompt_tokens_details\":{", "}", "{", "12", "-1", "99999999999999999999", "\\\"", "\"",
        " ", ",", ":", "\u00e9", "\u0000");

    @Test
    void corpusRelaysTheSameWhereverItIsSplit() {
        for (FuzzCorpus.Entry e : CORPUS) {
            byte[] s = e.bytes();
            for (int cut = 0; cut <= s.length; cut++) {
                List<Integer> cuts = List.of(cut * 65536 / (s.length + 1));
                for (int maxHeld : new int[] {8, 64, SseFramer.MAX_HELD_BYTES}) {
                    assertFramerKeepsItsContract(s, cuts, maxHeld);
                }
                assertRelayIndependentOfSplit(s, cuts);
            }
        }
    }

    /**
     * Fuzz finding (issue #43): an event with invalid UTF-8 reached the client as the engine sent it when it came in
     * a buffer of its own, but as U+FFFD when it shared a buffer with an engine error event (the check decoded the
     * whole buffer to rewrite the error).
     */
    @Test
    void anEventBesideAnErrorEventKeepsItsBytes() {
        byte[] ordinary = "\u00e4ata: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n".getBytes(StandardCharsets.ISO_8859_1);
        byte[] error = "data: {\"error\":{\"message\":\"engine died\",\"code\":500}}\n\ndata: [DONE]\n\n"
            .getBytes(StandardCharsets.US_ASCII);
        byte[] stream = ByteMutations.concat(List.of(ordinary, error));
        ClientView whole = relay(stream, List.of());
        assertEquals(new String(ordinary, StandardCharsets.ISO_8859_1),
            whole.bytes().substring(0, ordinary.length), "the engine's bytes, 0xe4 included");
        assertEquals(whole, relay(stream, List.of(ordinary.length * 65536 / (stream.length + 1) + 1)));
    }

    /**
     * Fuzz finding (issue #43, fuzz tier): blank lines before an engine error event were rewritten away with it when
     * the event's buffer began with them, and kept when the framer had cut between them, so the client's bytes
     * depended on the split ({@code \n\n\n} then an SGLang error object).
     */
    @Test
    void blankLinesBeforeAnErrorEventStayWhereverTheStreamIsSplit() {
        byte[] stream = ("\n\n\ndata: {\"object\":\"error\",\"message\":\"boom\",\"type\":\"BadRequestError\","
            + "\"param\":null,\"code\":400}\n\n").getBytes(StandardCharsets.US_ASCII);
        ClientView whole = relay(stream, List.of());
        assertEquals(true, whole.engineError());
        assertEquals(true, whole.bytes().startsWith("\n\n\ndata: {"), whole.bytes());
        for (int cut = 0; cut <= stream.length; cut++) {
            assertEquals(whole, relay(stream, List.of(cut * 65536 / (stream.length + 1))), "split at " + cut);
        }
    }

    /**
     * Fuzz tier finding (issue #43): whether a stream ended with [DONE] was judged on the last line of a buffer
     * without an error event, and on the last event's data in one with an error event. A multi-line data event
     * {@code data: [DONE]\ndata: [DONE]} (its data is "[DONE]\n[DONE]") counted as [DONE] or not depending on the
     * split, and so did a comment after [DONE].
     */
    @Test
    void theDoneVerdictDoesNotDependOnTheSplit() {
        String error = "data: {\"error\":{\"message\":\"engine died\",\"code\":500}}\n\n";
        for (String tail : List.of("data: [DONE]\ndata: [DONE]\n\n", "data: [DONE]\n\n: keep-alive\n\n",
            "data:[DONE] \r\n\r\n", "data: [DONE]\n\ndata: x\n\n", "data: \n\n", "id: 7\ndata: [DONE]\n\n")) {
            byte[] stream = (error + tail).getBytes(StandardCharsets.US_ASCII);
            ClientView whole = relay(stream, List.of());
            for (int cut = 0; cut <= stream.length; cut++) {
                assertEquals(whole, relay(stream, List.of(cut * 65536 / (stream.length + 1))), tail + " split at " + cut);
            }
        }
        assertEquals(false, relay("data: [DONE]\ndata: [DONE]\n\n".getBytes(StandardCharsets.US_ASCII), List.of())
            .endedWithDone(), "its data is two lines, not [DONE]");
        assertEquals(true, relay("data: [DONE]\n\n: keep-alive\n\n".getBytes(StandardCharsets.US_ASCII), List.of())
            .endedWithDone(), "a comment carries no data");
    }

    static final List<byte[]> SEEDS = FuzzCorpus.bytes(CORPUS);
    /** The framer's hold bounds worth trying: tiny ones force the over-long path, the real one the usual path. */
    static final int[] HELD_BOUNDS = {1, 4, 16, 64, SseFramer.MAX_HELD_BYTES};
    /**
     * Two thirds mutants of the corpus streams, one third soups of SSE and usage tokens; each split at up to 12
     * places and framed with one of {@link #HELD_BOUNDS}.
     */
    static final PropertyRunner.Generator<SplitStream> SPLIT_STREAMS = random -> new SplitStream(
        random.nextInt(3) < 2
            ? ByteMutations.mutant(random, SEEDS, SSE_TOKENS, 5, MAX_STREAM_BYTES)
            : ByteMutations.tokenSoup(random, SSE_TOKENS, 60),
        ByteMutations.cuts(random, 12), HELD_BOUNDS[random.nextInt(HELD_BOUNDS.length)]);

    record SplitStream(byte[] stream, List<Integer> cuts, int maxHeld) {
    }

    @Test
    void theFramerKeepsItsContract() {
        PropertyRunner.check("theFramerKeepsItsContract", 4331, 400, SPLIT_STREAMS,
            s -> assertFramerKeepsItsContract(s.stream(), s.cuts(), s.maxHeld()));
    }

    @Test
    void theClientSeesTheSameHoweverTheStreamIsSplit() {
        PropertyRunner.check("theClientSeesTheSameHoweverTheStreamIsSplit", 4332, 400, SPLIT_STREAMS,
            s -> assertRelayIndependentOfSplit(s.stream(), s.cuts()));
    }

    @Test
    @Tag("fuzz")
    @Timeout(value = 60, unit = TimeUnit.MINUTES)
    void fuzzTheRelayAndItsFramer() {
        PropertyRunner.fuzz("fuzzTheRelayAndItsFramer", SPLIT_STREAMS, s -> {
            assertFramerKeepsItsContract(s.stream(), s.cuts(), s.maxHeld());
            assertRelayIndependentOfSplit(s.stream(), s.cuts());
        });
    }

    static void assertFramerKeepsItsContract(byte[] stream, List<Integer> cuts, int maxHeld) {
        SseFramer framer = new SseFramer(maxHeld);
        List<ByteBuf> inputs = new ArrayList<>();
        ByteArrayOutputStream sent = new ByteArrayOutputStream();
        int received = 0;
        for (byte[] chunk : ByteMutations.split(stream, cuts)) {
            ByteBuf in = Unpooled.buffer(chunk.length).writeBytes(chunk); // copiedBuffer(empty) is the unreleasable EMPTY_BUFFER
            inputs.add(in);
            received += chunk.length;
            byte[] out = drain(framer.next(ALLOC, in));
            int expected = modelRelease(stream, sent.size(), received, maxHeld);
            String where = "after " + received + " of " + stream.length + " bytes, held bound " + maxHeld + ", split "
                + cuts + ": " + show(stream);
            assertEquals(expected - sent.size(), out.length, where);
            sent.writeBytes(out);
            assertEquals(received - sent.size(), framer.heldBytes(), where);
        }
        ByteBuf last = Unpooled.buffer(0);
        inputs.add(last);
        sent.writeBytes(drain(framer.finish(ALLOC, last)));
        assertArrayEquals(stream, sent.toByteArray(), () -> "the client got other bytes than the engine sent: "
            + show(stream));
        for (ByteBuf in : inputs) {
            assertEquals(0, in.refCnt(), () -> "a chunk was never released: " + show(stream));
        }
    }

    /**
     * Where the released bytes end after {@code received} bytes when {@code sent} were released before: just past
     * the last blank line ({@code \n\n}, or {@code \n\r\n} ending {@code \r\n\r\n}) in the unreleased bytes; all of
     * them when none ends there and they exceed the held bound; else nothing more.
     */
    static int modelRelease(byte[] s, int sent, int received, int maxHeld) {
        for (int i = received - 1; i > sent; i--) {
            if (s[i] == '\n' && (s[i - 1] == '\n' || (s[i - 1] == '\r' && i - 2 >= sent && s[i - 2] == '\n'))) {
                return i + 1;
            }
        }
        return received - sent > maxHeld ? received : sent;
    }

    /** The client's view of a relayed stream: its bytes, the error and [DONE] verdicts, the usage read. */
    record ClientView(String bytes, boolean engineError, boolean endedWithDone, String usage) {
    }

    static ClientView relay(byte[] stream, List<Integer> cuts) {
        SseFramer framer = new SseFramer();
        EngineStreamCheck check = new EngineStreamCheck(true);
        UsageScanner usage = new UsageScanner();
        ByteArrayOutputStream client = new ByteArrayOutputStream();
        for (byte[] chunk : ByteMutations.split(stream, cuts)) {
            ByteBuf events = check.check(ALLOC, framer.next(ALLOC, Unpooled.buffer(chunk.length).writeBytes(chunk)));
            usage.scanUsage(events);
            client.writeBytes(drain(events));
        }
        ByteBuf tail = check.check(ALLOC, framer.finish(ALLOC, Unpooled.buffer(0)));
        usage.scanUsage(tail);
        client.writeBytes(drain(tail));
        String read = usage.usageSeen()
            ? Arrays.toString(new long[] {usage.promptTokens(), usage.completionTokens(), usage.cachedTokens()}) : "-";
        return new ClientView(new String(client.toByteArray(), StandardCharsets.ISO_8859_1), check.engineError(),
            check.endedWithDone(), read);
    }

    static void assertRelayIndependentOfSplit(byte[] stream, List<Integer> cuts) {
        ClientView whole = relay(stream, List.of());
        ClientView split = relay(stream, cuts);
        assertEquals(whole, split, () -> "split at " + cuts + " (fractions of 65536): " + show(stream));
        UsageScanner everyByte = new UsageScanner();
        for (byte b : whole.bytes().getBytes(StandardCharsets.ISO_8859_1)) {
            everyByte.process(b);
        }
        String reference = everyByte.usageSeen() ? Arrays.toString(new long[] {everyByte.promptTokens(),
            everyByte.completionTokens(), everyByte.cachedTokens()}) : "-";
        assertEquals(reference, whole.usage(), () -> "the usage scan differs from its byte state machine: "
            + show(stream));
    }

    private static byte[] drain(ByteBuf b) {
        byte[] out = new byte[b.readableBytes()];
        b.getBytes(b.readerIndex(), out);
        b.release();
        return out;
    }

    static String show(byte[] b) {
        String s = new String(b, StandardCharsets.UTF_8).replace("\r", "\\r").replace("\n", "\\n");
        return s.length() > 400 ? s.substring(0, 400) + "...(" + b.length + " bytes)" : s;
    }
}
