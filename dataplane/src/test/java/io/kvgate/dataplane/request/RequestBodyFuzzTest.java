package io.kvgate.dataplane.request;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.async.ByteArrayFeeder;
import io.kvgate.testkit.fuzz.ByteMutations;
import io.kvgate.testkit.fuzz.FuzzCorpus;
import io.kvgate.testkit.fuzz.PropertyRunner;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Issue #43 fuzzing of the body stage over arbitrary bytes: mutants of real request bodies and the hostile corpus
 * in {@code fuzz/request-bodies.corpus}, and token soups of JSON's grammar. Oracles: Jackson 2.21's defaults, which
 * the lexer claims to be as strict as (accept exactly what Jackson's non-blocking parser, the body stage's
 * reference, accepts, token for token), and the Jackson-based extractor the body stage used before
 * ({@link JsonLexerDifferentialTest#check}); the verdict and the
 * {@link RequestValidator} problem must not depend on how the body was handed over (read in place or fed in
 * chunks), and nothing but {@link JsonLexer.MalformedJsonException} may come out of the lexer.
 */
class RequestBodyFuzzTest {
    static final int MAX_BODY_BYTES = 4096;
    static final List<FuzzCorpus.Entry> CORPUS = FuzzCorpus.load("/fuzz/request-bodies.corpus");
    static final List<byte[]> JSON_TOKENS = FuzzCorpus.tokens("{", "}", "[", "]", ",", ":", "\"", "\\", "\\u",
        "\\ud83d", "\\udc00", "\\u0000", "0", "-0", "1e400", "-", "+", ".", "e", "E", "01", "1.", "true", "false",
        "null", "nul", "tru", " ", "\t", "\n", "\r", "\u0000", "\u001f", "\u007f", "\u00e9", "\ud83d\ude00",
        "\"model\"", "\"messages\"", "\"prompt\"", "\"n\"", "\"stream\"", "\"max_tokens\"", "\"stream_options\"",
        "\"include_usage\"", "\"logit_bias\"", "\"response_format\"", "\"tools\"", "\"m\"", "9999999999999999999999",
        "/*", "'", "NaN", "\u00ef\u00bb\u00bf");
    static final List<byte[]> RAW_TOKENS = List.of(new byte[] {(byte) 0xc3}, new byte[] {(byte) 0xed, (byte) 0xa0},
        new byte[] {(byte) 0xf4, (byte) 0x90}, new byte[] {(byte) 0xff}, new byte[] {(byte) 0xc0, (byte) 0x80},
        new byte[] {(byte) 0xe2, (byte) 0x82, (byte) 0xac}, new byte[] {(byte) 0xf0, (byte) 0x9f, (byte) 0x98});
    static final List<byte[]> SEEDS = FuzzCorpus.bytes(CORPUS);
    static final List<byte[]> MUTATION_TOKENS = mutationTokens();
    /** Two thirds mutants of the corpus (JSON and raw UTF-8 tokens planted), one third soups of JSON tokens. */
    static final PropertyRunner.Generator<byte[]> BODIES = random -> random.nextInt(3) < 2
        ? ByteMutations.mutant(random, SEEDS, MUTATION_TOKENS, 4, MAX_BODY_BYTES)
        : ByteMutations.tokenSoup(random, JSON_TOKENS, 30);
    /** A body and up to 6 places to split it at. */
    static final PropertyRunner.Generator<SplitBody> SPLIT_BODIES =
        random -> new SplitBody(BODIES.next(random), ByteMutations.cuts(random, 6));

    record SplitBody(byte[] body, List<Integer> cuts) {
    }

    private static List<byte[]> mutationTokens() {
        List<byte[]> tokens = new ArrayList<>(JSON_TOKENS);
        tokens.addAll(RAW_TOKENS);
        return List.copyOf(tokens);
    }

    @Test
    void corpusIsJudgedAsJacksonJudgesIt() throws IOException {
        for (FuzzCorpus.Entry e : CORPUS) {
            assertJudgedAsJackson(e.bytes(), e.name());
            assertSameVerdictHoweverHandedOver(e.bytes(), List.of(1 << 15), e.name());
        }
    }

    /**
     * Where Jackson's two parsers disagree, the lexer is its non-blocking parser's (the body stage's reference):
     * a root number may run straight into the next root value ({@code 0"stream"}, {@code -1[]}; the blocking parser
     * wants a space between), and a root keyword may not ({@code true{}}; the blocking parser takes two values).
     * The fuzzers' first oracle was the blocking parser and reported both as lexer defects; they were not.
     */
    @Test
    void atTheRootTheLexerIsJacksonsNonBlockingParser() throws IOException {
        for (String body : List.of("0-0", " 0\"stream\"", "-1[]", "1e3\"x\"", "0 -0", "true{}", "truex", "null[]",
            "[true{}]", "7\n8")) {
            assertJudgedAsJackson(body.getBytes(StandardCharsets.UTF_8), body);
        }
        assertEquals(true, lexerAccepts(" 0\"stream\"".getBytes(StandardCharsets.UTF_8)));
        assertEquals(false, lexerAccepts("true{}".getBytes(StandardCharsets.UTF_8)));
    }

    /**
     * Fuzz tier finding (issue #43): the lexer skipped one UTF-8 byte order mark and refused a body starting with
     * two; Jackson's non-blocking parser, the body stage's reference, skips any number of them.
     */
    @Test
    void everyLeadingByteOrderMarkIsSkippedAsJacksonSkipsThem() throws IOException {
        byte[] body = ByteMutations.concat(List.of(LONE_BOM, LONE_BOM,
            "{\"model\":\"m\",\"prompt\":\"p\"}".getBytes(StandardCharsets.UTF_8)));
        assertEquals(true, lexerAccepts(body));
        assertEquals("OK", extractorVerdict(body));
        assertJudgedAsJackson(body, "two marks");
        assertJudgedAsJackson(ByteMutations.concat(List.of(LONE_BOM, LONE_BOM, " ".getBytes(StandardCharsets.UTF_8))),
            "two marks and a space");
    }

    @Test
    void mutantsAreJudgedAsJacksonJudgesThem() {
        PropertyRunner.check("mutantsAreJudgedAsJacksonJudgesThem", 4321, 400, BODIES,
            body -> assertJudgedAsJackson(body, "mutant"));
    }

    @Test
    void theVerdictDoesNotDependOnHowTheBodyArrives() {
        PropertyRunner.check("theVerdictDoesNotDependOnHowTheBodyArrives", 4322, 200, SPLIT_BODIES,
            s -> assertSameVerdictHoweverHandedOver(s.body(), s.cuts(), "mutant"));
    }

    @Test
    @Tag("fuzz")
    @Timeout(value = 60, unit = TimeUnit.MINUTES)
    void fuzzBodiesAreJudgedAsJacksonAndHoweverTheyArrive() {
        PropertyRunner.fuzz("fuzzBodiesAreJudgedAsJacksonAndHoweverTheyArrive", SPLIT_BODIES, s -> {
            assertJudgedAsJackson(s.body(), "mutant");
            assertSameVerdictHoweverHandedOver(s.body(), s.cuts(), "mutant");
        });
    }

    /**
     * The lexer accepts exactly what Jackson's non-blocking parser accepts, token for token, and the extractor on it
     * judges as the old one on that parser did. Undecided: a body the parser leaves pending at its end (a root scalar
     * cut by the end of input, {@code 0} or {@code tru}); the extractor check covers those.
     */
    static void assertJudgedAsJackson(byte[] body, String what) throws IOException {
        String shown = what + ": " + new String(body, StandardCharsets.UTF_8) + " (hex "
            + java.util.HexFormat.of().formatHex(body, 0, Math.min(body.length, 200)) + ")";
        boolean lexer = lexerAccepts(body);
        int marks = 0;
        while (body.length >= 3 * (marks + 1) && Arrays.equals(body, 3 * marks, 3 * marks + 3, LONE_BOM, 0, 3)) {
            marks++;
        }
        if (marks > 0 && body.length == 3 * marks) {
            // Jackson's non-blocking parser is left pending after byte order marks alone (NOT_AVAILABLE at the end
            // of input), which the old extractor called malformed; the lexer skips the marks and finds an empty
            // body. Fuzz tier, issue #43: a Jackson quirk, not a lexer defect (marks and a space are empty to both).
            assertEquals("EMPTY", extractorVerdict(body), shown);
            return;
        }
        if (marks > 0) {
            // Jackson's offsets start after the byte order marks, the lexer's at the body's first byte (the offsets
            // the body edits splice at; fuzz tier, issue #43): the old extractor is compared on the body without them.
            byte[] unmarked = Arrays.copyOfRange(body, 3 * marks, body.length);
            if ((unmarked[0] & 0xFF) == 0xEF) {
                assertEquals("MALFORMED", extractorVerdict(body), shown); // a broken mark
            } else {
                assertEquals(extractorVerdict(unmarked), extractorVerdict(body), shown);
                JsonLexerDifferentialTest.check(unmarked, unmarked.length, shown);
            }
        } else {
            JsonLexerDifferentialTest.check(body, body.length, shown);
        }
        if (!validUtf8(body)) {
            // Jackson's non-blocking parser does not validate UTF-8 in field names; the lexer refuses invalid UTF-8
            // where it decodes text (a name or value the gateway reads). The engines refuse such a body outright
            // (RFC 8259 JSON is UTF-8), so the client gets a 400 either way: no verdict is compared (fuzz tier finding).
            return;
        }
        Boolean jackson = nonBlockingJacksonAccepts(body);
        if (jackson == null) {
            return;
        }
        assertEquals(jackson, lexer, () -> "Jackson " + (jackson ? "accepts" : "refuses") + ", the lexer "
            + (lexer ? "accepts" : "refuses") + ": " + shown);
        if (jackson) {
            JsonLexerDifferentialTest.sameTokens(body, shown);
        }
    }

    private static boolean validUtf8(byte[] body) {
        try {
            StandardCharsets.UTF_8.newDecoder().onMalformedInput(java.nio.charset.CodingErrorAction.REPORT)
                .onUnmappableCharacter(java.nio.charset.CodingErrorAction.REPORT).decode(java.nio.ByteBuffer.wrap(body));
            return true;
        } catch (java.nio.charset.CharacterCodingException e) {
            return false;
        }
    }

    /** Jackson's non-blocking parser over the whole body: accepted, refused, or null when left pending at the end. */
    static Boolean nonBlockingJacksonAccepts(byte[] body) {
        try {
            JsonParser p = NON_BLOCKING.createNonBlockingByteArrayParser();
            ByteArrayFeeder feeder = (ByteArrayFeeder) p.getNonBlockingInputFeeder();
            feeder.feedInput(body, 0, body.length);
            feeder.endOfInput();
            JsonToken t;
            while ((t = p.nextToken()) != null) {
                if (t == JsonToken.NOT_AVAILABLE) {
                    return null;
                }
                p.getText();
            }
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    private static final JsonFactory NON_BLOCKING = JsonFactory.builder().build();
    private static final byte[] LONE_BOM = {(byte) 0xef, (byte) 0xbb, (byte) 0xbf};

    static String extractorVerdict(byte[] body) {
        RequestFieldExtractor x = new RequestFieldExtractor(new RequestFields());
        x.feed(ByteBuffer.wrap(body));
        return x.finish().name();
    }

    /** Every token of {@code body}; false on {@link JsonLexer.MalformedJsonException}, anything else escapes. */
    static boolean lexerAccepts(byte[] body) {
        JsonLexer lexer = JsonLexer.forThisThread();
        lexer.start(ByteBuffer.wrap(body));
        try {
            while (lexer.nextToken() != null) {
                lexer.getText();
            }
            return true;
        } catch (JsonLexer.MalformedJsonException e) {
            return false;
        } finally {
            lexer.clear();
        }
    }

    /** Read in place or fed in chunks: the same verdict and the same 400 for chat and for completions. */
    static void assertSameVerdictHoweverHandedOver(byte[] body, List<Integer> cuts, String what) {
        for (boolean chat : new boolean[] {true, false}) {
            RequestFields inPlace = new RequestFields();
            RequestFieldExtractor whole = new RequestFieldExtractor(inPlace);
            ByteBuf buf = Unpooled.wrappedBuffer(body);
            Problem expected;
            try {
                whole.body(buf);
                expected = RequestValidator.validate(whole, inPlace, chat);
            } finally {
                buf.release();
            }
            RequestFields fedFields = new RequestFields();
            RequestFieldExtractor fed = new RequestFieldExtractor(fedFields);
            for (byte[] chunk : ByteMutations.split(body, cuts)) {
                fed.feed(ByteBuffer.wrap(chunk));
            }
            Problem actual = RequestValidator.validate(fed, fedFields, chat);
            assertEquals(String.valueOf(expected), String.valueOf(actual), () -> what + " split at " + cuts + ": "
                + new String(body, StandardCharsets.UTF_8));
        }
    }
}
