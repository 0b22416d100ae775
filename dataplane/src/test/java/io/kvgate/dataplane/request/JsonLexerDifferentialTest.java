package io.kvgate.dataplane.request;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.async.ByteArrayFeeder;
import io.kvgate.dataplane.request.JsonLexer.JsonToken;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.Parameter;
import org.junit.jupiter.params.ParameterizedClass;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@link JsonLexer} and the {@link RequestFieldExtractor} on it against Jackson as the oracle: the extractor as it
 * was on Jackson's non-blocking parser ({@link JacksonFieldExtractor}) and Jackson's parser itself. Thousands of
 * generated valid bodies (every JSON value kind, nesting, escapes, unicode with 4-byte UTF-8 and surrogate escapes,
 * numbers of every form, whitespace) and one-byte mutations of them (changed, inserted, deleted), truncations,
 * invalid UTF-8, control characters and the StreamReadConstraints limits: the new extractor accepts exactly the
 * bodies the old one accepted, gives the same {@link RequestFields} for them, and the lexer's tokens, names, texts
 * and numbers are Jackson's. The string skip is swept with each special byte at every offset mod 8 and at every
 * position of two vectors. The whole class runs once on each string skip ({@link StringSkips}: the Vector API's and
 * SWAR's).
 */
@ParameterizedClass(name = "{0} string skip")
@ValueSource(strings = {"vector", "swar"})
class JsonLexerDifferentialTest {
    @Parameter
    String path;

    @BeforeEach
    void stringSkip() {
        StringSkips.use(path);
    }

    @AfterEach
    void defaultStringSkip() {
        StringSkips.reset();
    }

    private static final JsonFactory FACTORY = JsonFactory.builder().build();

    // ---- running both --------------------------------------------------------------------------------------

    /**
     * The old extractor's verdict. It could also throw: Jackson hands a number cut short by the end of input
     * ({@code "temperature":8e+}) as a token whose value then fails to parse (NumberFormatException out of the body
     * stage); the lexer refuses such a body as malformed, which is what that counts as here.
     */
    private static String oracle(byte[] body, RequestFields f) {
        JacksonFieldExtractor x = new JacksonFieldExtractor(f);
        try {
            x.feed(ByteBuffer.wrap(body));
            return x.finish().name();
        } catch (NumberFormatException e) {
            return "MALFORMED";
        }
    }

    /** The new extractor over {@code body} in a buffer whose reader index is {@code shift} (so offsets are relative). */
    private static String mine(byte[] body, RequestFields f, int shift, boolean direct, String[] error) {
        ByteBuf b = direct ? Unpooled.directBuffer(body.length + shift) : Unpooled.buffer(body.length + shift);
        try {
            b.writeZero(shift).writeBytes(body).readerIndex(shift);
            RequestFieldExtractor x = new RequestFieldExtractor(f);
            x.body(b);
            String r = x.finish().name();
            error[0] = x.error();
            return r;
        } finally {
            b.release();
        }
    }

    private static int checked;

    /** Both extractors over {@code body}: the same verdict and, when accepted, the same fields. Returns whether accepted. */
    static boolean check(byte[] body, int shift, String what) {
        checked++;
        RequestFields o = new RequestFields();
        String expected = oracle(body, o);
        RequestFields m = new RequestFields();
        String[] error = new String[1];
        String actual = mine(body, m, shift & 7, (shift & 8) != 0, error);
        if (expected.equals("OK")) {
            assertEquals("OK", actual, () -> what + ": refused " + show(body) + ": " + error[0]);
            sameFields(body, o, m, () -> what + ": " + show(body));
            return true;
        }
        assertNotEquals("OK", actual, () -> what + ": accepted what Jackson refuses (" + expected + "): " + show(body));
        if (!actual.equals(expected) && !quirk(body, expected, actual)) {
            fail(what + ": " + expected + " expected, " + actual + " (" + error[0] + "): " + show(body));
        }
        if (actual.equals("MALFORMED")) {
            assertTrue(error[0] != null && error[0].contains(" at byte "), () -> "says where: " + error[0]);
        }
        return false;
    }

    /**
     * Jackson's non-blocking parser leaves a root scalar cut short by the end of input pending or completes it
     * ({@code -}, {@code tru}, {@code truex}, {@code 8.}): the old extractor called that an empty body or not an
     * object. Both refuse it (400); the lexer says it is malformed. Nothing else may differ.
     */
    private static boolean quirk(byte[] body, String expected, String actual) {
        if (!(expected.equals("EMPTY") || expected.equals("NOT_OBJECT")) || !actual.equals("MALFORMED")) {
            return false;
        }
        String s = new String(body, StandardCharsets.ISO_8859_1).strip();
        return !s.isEmpty() && s.charAt(0) != '{' && s.charAt(0) != '[' && s.charAt(0) != '"';
    }

    private static String show(byte[] body) {
        String s = new String(body, StandardCharsets.UTF_8);
        return s.length() > 300 ? s.substring(0, 300) + "...(" + body.length + " bytes)" : s;
    }

    private static void sameFields(byte[] body, RequestFields o, RequestFields m, java.util.function.Supplier<String> what) {
        ByteBuf b = Unpooled.wrappedBuffer(body);
        assertEquals(o.model, m.model, what);
        assertEquals(o.modelNotString, m.modelNotString, what);
        assertEquals(o.stream, m.stream, what);
        assertEquals(o.user, m.user, what);
        assertEquals(o.hasMessages, m.hasMessages, what);
        assertEquals(o.messagesNotArray, m.messagesNotArray, what);
        assertEquals(o.hasPrompt, m.hasPrompt, what);
        assertEquals(o.promptIsTokenIds, m.promptIsTokenIds, what);
        assertEquals(o.promptCount, m.promptCount, what);
        assertEquals(o.promptTokenIdsMax, m.promptTokenIdsMax, what);
        assertEquals(o.hasStreamOptions, m.hasStreamOptions, what);
        assertEquals(o.streamOptionsObject, m.streamOptionsObject, what);
        assertEquals(o.streamOptionsMembers, m.streamOptionsMembers, what);
        assertEquals(o.includeUsageTrue, m.includeUsageTrue, what);
        assertEquals(start(b, o.includeUsageStart), start(b, m.includeUsageStart), what);
        assertEquals(o.includeUsageEnd, m.includeUsageEnd, what);
        assertEquals(o.temperatureZero, m.temperatureZero, what);
        assertEquals(o.n, m.n, what);
        assertEquals(o.nInvalid, m.nInvalid, what);
        assertEquals(o.hasKvTransferParams, m.hasKvTransferParams, what);
        assertEquals(o.logprobsTrue, m.logprobsTrue, what);
        assertEquals(o.hasTopLogprobs, m.hasTopLogprobs, what);
        assertEquals(o.hasMaxTokens, m.hasMaxTokens, what);
        assertEquals(o.maxTokens, m.maxTokens, what);
        assertEquals(o.hasMaxCompletionTokens, m.hasMaxCompletionTokens, what);
        assertEquals(o.maxCompletionTokens, m.maxCompletionTokens, what);
        assertEquals(o.maxTokensUnreadable, m.maxTokensUnreadable, what);
        assertEquals(o.maxCompletionTokensUnreadable, m.maxCompletionTokensUnreadable, what);
        if (body[m.objectEnd - 1] != '{') { // {}: Jackson locates its end past the brace, the lexer at it
            assertEquals(o.objectEnd, m.objectEnd, what);
        }
        assertEquals(o.bodyLength, m.bodyLength, what);
        assertEquals(o.textPrefix.toString(), m.textPrefix.toString(), what);
        assertEquals(o.textPrefixFromMessages, m.textPrefixFromMessages, what);
        assertEquals(o.hasTools, m.hasTools, what);
        assertEquals(o.hasLoraPath, m.hasLoraPath, what);
        assertEquals(o.templateKwargs, m.templateKwargs, what);
        for (RequestFields.Member x : RequestFields.Member.ALL) {
            assertEquals(o.has(x), m.has(x), what);
            if (o.has(x)) {
                // Jackson locates a token at or one past its first byte, the lexer at it: the same value start
                assertEquals(o.valueStart(b, x), m.valueStart(b, x), what);
                assertEquals(o.valueEnd[x.ordinal()], m.valueEnd[x.ordinal()], what);
                assertEquals(o.valueStart(b, x), m.valueFrom[x.ordinal()], () -> "exact value start: " + what.get());
            }
        }
        assertEquals(o.budgetValueRangeCount, m.budgetValueRangeCount, what);
        for (int k = 0; k < o.budgetValueRangeCount; k++) {
            int os = o.budgetValueRanges[k * 2];
            int ms = m.budgetValueRanges[k * 2];
            assertEquals(numberStart(body, os), ms, what);
            boolean minusZero = body[ms] == '-' && body[ms + 1] == '0' && (ms + 2 == body.length || !isDigit(body[ms + 2]));
            // the range is the number's bytes; Jackson's text of -0 is "0", one char short
            assertEquals(o.budgetValueRanges[k * 2 + 1] - os + (minusZero ? 1 : 0), m.budgetValueRanges[k * 2 + 1] - ms, what);
        }
        assertEquals(o.engineFieldRangeCount, m.engineFieldRangeCount, what);
        for (int k = 0; k < o.engineFieldRangeCount * 2; k++) {
            int ov = o.engineFieldRanges[k];
            int mv = m.engineFieldRanges[k];
            if (k % 2 == 1 && ov == o.objectEnd) { // the last member's range ends where a member is added
                assertEquals(m.objectEnd, mv, what);
            } else {
                // Jackson locates a name one past its opening quote, the lexer at it. (The stripper's search back
                // for a quote took an empty name's closing quote; the lexer's offsets need no search.)
                assertEquals(ov > 0 && body[ov - 1] == '"' ? ov - 1 : quoteAtOrBefore(body, ov), mv, what);
            }
        }
    }

    private static boolean isDigit(byte b) {
        return b >= '0' && b <= '9';
    }

    private static int start(ByteBuf b, int reported) {
        return reported < 0 ? -1 : RequestFields.exactStart(b, reported);
    }

    private static int numberStart(byte[] body, int at) {
        int i = at;
        while (i > 0 && ((body[i - 1] >= '0' && body[i - 1] <= '9') || body[i - 1] == '-')) {
            i--;
        }
        return i;
    }

    private static int quoteAtOrBefore(byte[] body, int at) {
        int i = at;
        while (i > 0 && body[i] != '"') {
            i--;
        }
        return i;
    }

    // ---- the lexer against Jackson's parser, token by token ----------------------------------------------

    /** Every token of a valid body: type, name, text, text length and number value as Jackson gives them. */
    static void sameTokens(byte[] body, String what) throws IOException {
        JsonParser p = FACTORY.createNonBlockingByteArrayParser();
        ((ByteArrayFeeder) p.getNonBlockingInputFeeder()).feedInput(body, 0, body.length);
        ((ByteArrayFeeder) p.getNonBlockingInputFeeder()).endOfInput();
        JsonLexer lexer = JsonLexer.forThisThread();
        lexer.start(ByteBuffer.wrap(body));
        try {
            com.fasterxml.jackson.core.JsonToken j;
            while ((j = p.nextToken()) != null && j != com.fasterxml.jackson.core.JsonToken.NOT_AVAILABLE) {
                JsonToken t = lexer.nextToken();
                assertEquals(j.name(), t == null ? null : t.name(), what);
                switch (t) {
                    case FIELD_NAME -> {
                        assertEquals(p.currentName(), lexer.currentName(), what);
                        assertEquals(p.getTextLength(), lexer.getTextLength(), what);
                    }
                    case VALUE_STRING -> {
                        assertEquals(p.getText(), lexer.getText(), what);
                        assertEquals(p.getTextLength(), lexer.getTextLength(), what);
                        assertEquals(p.getText(), new String(lexer.getTextCharacters(), lexer.getTextOffset(),
                            lexer.getTextLength()), what);
                        StringBuilder prefix = new StringBuilder();
                        int max = p.getTextLength() / 2;
                        lexer.appendText(prefix, max);
                        assertEquals(p.getText().substring(0, max), prefix.toString(), what);
                    }
                    case VALUE_NUMBER_INT -> {
                        int clamped = p.getNumberType() == JsonParser.NumberType.INT ? p.getIntValue()
                            : p.getBigIntegerValue().signum() < 0 ? Integer.MIN_VALUE : Integer.MAX_VALUE;
                        assertEquals(clamped, lexer.getIntClamped(), what);
                        assertEquals(p.getDoubleValue(), lexer.getDoubleValue(), what + " " + p.getText());
                        if (!lexer.getText().equals("-0")) { // Jackson's text of -0 is "0"; the lexer's is the bytes
                            assertEquals(p.getText(), lexer.getText(), what);
                            assertEquals(p.getTextLength(), lexer.getTextLength(), what);
                        }
                    }
                    case VALUE_NUMBER_FLOAT -> {
                        assertEquals(Double.doubleToLongBits(p.getDoubleValue()),
                            Double.doubleToLongBits(lexer.getDoubleValue()), what + " " + p.getText());
                        assertEquals(p.getText(), lexer.getText(), what);
                    }
                    default -> assertEquals(p.getText(), lexer.getText(), what);
                }
            }
            if (j == null) { // Jackson leaves a root scalar at the end of input pending (NOT_AVAILABLE)
                assertEquals(null, lexer.nextToken(), what);
            }
        } finally {
            lexer.clear();
        }
    }

    // ---- generated bodies ----------------------------------------------------------------------------------

    private static final String[] NAMES = {"model", "messages", "prompt", "n", "stream", "stream_options",
        "include_usage", "temperature", "max_tokens", "max_completion_tokens", "user", "tools", "lora_path",
        "chat_template_kwargs", "kv_transfer_params", "bootstrap_host", "bootstrap_room", "disaggregated_params",
        "logprobs", "top_logprobs", "content", "role", "text", "type", "x", "", "mod\\u0065l", "n\\u00e9", "中文",
        "😀", "a b", "\\\"q\\\""};

    private static final String[] STRING_PIECES = {"a", "hello world", " ", "\\\"", "\\\\", "\\/", "\\b", "\\f",
        "\\n", "\\r", "\\t", "\\u00e9", "\\u0000", "\\u001F", "\\uD83D\\uDE00", "\\ud800", "\\uDFFF", "\\uFFFF",
        "é", "ß", "中", "文字", "😀", "𝄞", "\u0080", "\u07FF", "\u0800", "\uFFFD", "\u007F", "~", "'", "{", "}", "[",
        "]", ",", ":", "model"};

    private static String string(Random r) {
        StringBuilder sb = new StringBuilder("\"");
        int pieces = r.nextInt(8);
        for (int i = 0; i < pieces; i++) {
            if (r.nextInt(6) == 0) {
                sb.append("abcdefghijklmnopqrstuvwxyz0123456789 ".repeat(3), 0, 1 + r.nextInt(100));
            } else {
                sb.append(STRING_PIECES[r.nextInt(STRING_PIECES.length)]);
            }
        }
        return sb.append('"').toString();
    }

    private static String digits(Random r, int n, boolean leading) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < n; i++) {
            sb.append((char) ('0' + (i == 0 && leading ? 1 + r.nextInt(9) : r.nextInt(10))));
        }
        return sb.toString();
    }

    private static String number(Random r) {
        return switch (r.nextInt(14)) {
            case 0 -> "0";
            case 1 -> "-0";
            case 2 -> String.valueOf(r.nextInt(100));
            case 3 -> String.valueOf(r.nextInt());
            case 4 -> String.valueOf(r.nextLong());
            case 5 -> (r.nextBoolean() ? "-" : "") + digits(r, 11 + r.nextInt(20), true);
            case 6 -> r.nextBoolean() ? "2147483647" : r.nextBoolean() ? "2147483648" : r.nextBoolean() ? "-2147483648" : "-2147483649";
            case 7 -> (r.nextBoolean() ? "-" : "") + r.nextInt(1000) + "." + digits(r, 1 + r.nextInt(6), false);
            case 8 -> r.nextInt(10) + (r.nextBoolean() ? "e" : "E") + (r.nextBoolean() ? "+" : r.nextBoolean() ? "-" : "")
                + r.nextInt(400);
            case 9 -> String.valueOf(r.nextDouble() * Math.pow(10, r.nextInt(40) - 20));
            case 10 -> "0." + digits(r, 1 + r.nextInt(25), false) + (r.nextBoolean() ? "e-" + r.nextInt(30) : "");
            case 11 -> digits(r, 1 + r.nextInt(3), true) + "." + digits(r, 1 + r.nextInt(3), false) + "e" + r.nextInt(25);
            case 12 -> r.nextBoolean() ? "0.0" : r.nextBoolean() ? "-0.0" : "1.0";
            default -> (r.nextBoolean() ? "-" : "") + digits(r, 995 + r.nextInt(6), true);
        };
    }

    private static String ws(Random r) {
        return switch (r.nextInt(10)) {
            case 0 -> " ";
            case 1 -> "\n";
            case 2 -> "\t";
            case 3 -> "\r\n  ";
            default -> "";
        };
    }

    private static String value(Random r, int depth) {
        int kind = r.nextInt(depth > 4 ? 6 : 9);
        return switch (kind) {
            case 0, 1 -> string(r);
            case 2, 3 -> number(r);
            case 4 -> r.nextBoolean() ? "true" : "false";
            case 5 -> "null";
            case 6 -> array(r, depth + 1);
            default -> object(r, depth + 1);
        };
    }

    private static String array(Random r, int depth) {
        StringBuilder sb = new StringBuilder("[").append(ws(r));
        int n = r.nextInt(5);
        for (int i = 0; i < n; i++) {
            if (i > 0) {
                sb.append(ws(r)).append(',').append(ws(r));
            }
            sb.append(value(r, depth));
        }
        return sb.append(ws(r)).append(']').toString();
    }

    private static String object(Random r, int depth) {
        StringBuilder sb = new StringBuilder("{").append(ws(r));
        int n = r.nextInt(5);
        for (int i = 0; i < n; i++) {
            if (i > 0) {
                sb.append(ws(r)).append(',').append(ws(r));
            }
            sb.append(r.nextInt(3) == 0 ? string(r) : "\"" + NAMES[r.nextInt(NAMES.length)] + "\"").append(ws(r))
                .append(':').append(ws(r)).append(value(r, depth));
        }
        return sb.append(ws(r)).append('}').toString();
    }

    /** A request-shaped value for a top-level member: mostly what clients send, sometimes any JSON value. */
    private static String member(Random r, String name) {
        if (r.nextInt(5) == 0) {
            return value(r, 1);
        }
        return switch (name) {
            case "model", "user", "lora_path" -> r.nextInt(4) == 0 ? string(r) : "\"qwen3-" + r.nextInt(5) + "\"";
            case "messages" -> {
                StringBuilder sb = new StringBuilder("[");
                int n = r.nextInt(4);
                for (int i = 0; i < n; i++) {
                    sb.append(i > 0 ? "," : "").append("{\"role\":\"user\",\"content\":");
                    if (r.nextInt(3) == 0) {
                        sb.append("[{\"type\":\"text\",\"text\":").append(string(r)).append("},{\"type\":\"image_url\"},")
                            .append("{\"text\":").append(string(r)).append(",\"type\":\"text\"}]");
                    } else {
                        sb.append(r.nextInt(8) == 0 ? "null" : string(r));
                    }
                    sb.append(r.nextBoolean() ? ",\"name\":" + string(r) : "").append('}');
                }
                yield sb.append(']').toString();
            }
            case "prompt" -> switch (r.nextInt(5)) {
                case 0 -> string(r);
                case 1 -> "[" + string(r) + "," + string(r) + "]";
                case 2 -> "[1,2,3," + r.nextInt(100000) + "]";
                case 3 -> "[[1,2],[3],[" + r.nextInt(9) + ",4,5,6]]";
                default -> "[1,\"a\",[2]]";
            };
            case "n", "max_tokens", "max_completion_tokens", "top_logprobs" -> number(r);
            case "temperature" -> r.nextBoolean() ? "0" : number(r);
            case "stream", "logprobs" -> r.nextBoolean() ? "true" : "false";
            case "stream_options" -> "{\"include_usage\":" + (r.nextBoolean() ? "true" : value(r, 2))
                + (r.nextBoolean() ? ",\"continuous_usage_stats\":false" : "") + "}";
            case "chat_template_kwargs" -> "{\"enable_thinking\":false,\"x\":" + value(r, 2) + "}";
            default -> value(r, 1);
        };
    }

    private static String body(Random r) {
        StringBuilder sb = new StringBuilder(ws(r)).append('{').append(ws(r));
        int n = r.nextInt(9);
        for (int i = 0; i < n; i++) {
            String name = NAMES[r.nextInt(NAMES.length)];
            if (i > 0) {
                sb.append(ws(r)).append(',').append(ws(r));
            }
            sb.append('"').append(name).append('"').append(ws(r)).append(':').append(ws(r)).append(member(r, name));
        }
        return sb.append(ws(r)).append('}').append(ws(r)).toString();
    }

    private static final int[] BYTES = {'"', '\\', '{', '}', '[', ']', ',', ':', ' ', '\t', 0x00, 0x01, 0x0B, 0x1F,
        0x7F, 0x80, 0xBF, 0xC0, 0xC3, 0xE0, 0xED, 0xF0, 0xF4, 0xF5, 0xF8, 0xFF, 'a', '0', '1', '-', '+', '.', 'e',
        'E', 't', 'n', 'u', '/', '#', '\''};

    /** What the last {@link #mutate} did (for a failure's message). */
    private static String lastMutation;

    private static byte[] mutate(Random r, byte[] b) {
        int i = r.nextInt(b.length + 1);
        byte x = (byte) BYTES[r.nextInt(BYTES.length)];
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        int kind = r.nextInt(4);
        lastMutation = new String[] {"changed", "inserted", "deleted", "truncated"}[kind] + " at " + i + " (0x"
            + Integer.toHexString(x & 0xFF) + ")";
        switch (kind) {
            case 0 -> { // change
                byte[] c = b.clone();
                if (i < c.length) {
                    c[i] = x;
                }
                return c;
            }
            case 1 -> { // insert
                out.write(b, 0, i);
                out.write(x);
                out.write(b, i, b.length - i);
                return out.toByteArray();
            }
            case 2 -> { // delete
                if (i == b.length) {
                    return b;
                }
                out.write(b, 0, i);
                out.write(b, i + 1, b.length - i - 1);
                return out.toByteArray();
            }
            default -> {
                return Arrays.copyOf(b, i); // truncate
            }
        }
    }

    @Test
    void generatedBodiesAndTheirMutationsAreJudgedAsJacksonJudgesThem() throws IOException {
        Random r = new Random(20261202);
        checked = 0;
        int accepted = 0;
        for (int i = 0; i < 4000; i++) {
            byte[] b = body(r).getBytes(StandardCharsets.UTF_8);
            if (check(b, i, "body " + i)) { // not when a generated name has an unpaired surrogate escape
                sameTokens(b, "body " + i);
                accepted++;
            }
            for (int k = 0; k < 6; k++) {
                byte[] m = mutate(r, b);
                if (r.nextInt(4) == 0) {
                    m = mutate(r, m);
                }
                check(m, i + k, "mutation " + k + " of body " + i + ", " + lastMutation);
            }
        }
        assertTrue(checked >= 28000 && accepted > 3000, "bodies checked: " + checked + ", accepted: " + accepted);
    }

    @Test
    void anyValueAtTheRootIsJudgedAsJacksonJudgesIt() throws IOException {
        Random r = new Random(7);
        for (int i = 0; i < 3000; i++) {
            String v = ws(r) + value(r, 0) + ws(r);
            byte[] b = v.getBytes(StandardCharsets.UTF_8);
            check(b, i, "root value " + i);
            if (acceptsAsJackson(b)) {
                sameTokens(b, "root value " + i);
            }
            check(mutate(r, b), i, "mutated root value " + i);
        }
        for (String s : new String[] {"", " ", "\n\t\r ", "{}", "[]", "{} {}", "{}{}", "{} 1", "{}]", "1 2", "3x",
            "-", "tru", "truex", "true:", "true]", "nul", "\"abc", "{\"a\":1}x", "\u00ef\u00bb\u00bf{}", "\u00ef{}",
            "\u00ef\u00bb{}", "/*c*/{}", "{\"a\":1,}", "[1,]", "{,}", "{\"a\"}", "{\"a\":}", "{'a':1}", "{a:1}",
            "{\"a\":NaN}", "{\"a\":Infinity}", "{\"a\":-Infinity}", "{\"a\":+1}", "{\"a\":.5}", "{\"a\":1.}",
            "{\"a\":01}", "{\"a\":-01}", "{\"a\":00}", "{\"a\":0x1}", "{\"a\":1e}", "{\"a\":1e+}", "{\"a\":1.5e-3}",
            "{\"a\":\"\\x\"}", "{\"a\":\"\\u12G4\"}", "{\"a\":\"\\u12\"}", "{\"a\":\"\t\"}", "{\"a\":1}\u0000",
            "\u000c{}", "{\"a\":true1}", "{\"a\":[true}", "{\"a\":{]}", "{\"\u0001\":1}"}) {
            check(s.getBytes(StandardCharsets.ISO_8859_1), 0, "literal " + s);
        }
    }

    @Test
    void invalidUtf8AsJacksonJudgesIt() {
        int[][] sequences = {{0x80}, {0xBF}, {0xC0, 0x80}, {0xC1, 0xBF}, {0xC3}, {0xC3, 0x28}, {0xE0, 0x80, 0x80},
            {0xED, 0xA0, 0x80}, {0xE2, 0x82}, {0xE2, 0x28, 0xA1}, {0xF0, 0x80, 0x80, 0x80}, {0xF4, 0x90, 0x80, 0x80},
            {0xF5, 0x80, 0x80, 0x80}, {0xF7, 0xBF, 0xBF, 0xBF}, {0xF8, 0x88, 0x80, 0x80, 0x80}, {0xFE}, {0xFF},
            {0xF0, 0x9F, 0x98}, {0xF0, 0x9F, 0x98, 0x80}, {0xEF, 0xBB, 0xBF}};
        for (int[] seq : sequences) {
            for (String where : new String[] {"value", "name", "outside"}) {
                ByteArrayOutputStream out = new ByteArrayOutputStream();
                String head = switch (where) {
                    case "value" -> "{\"model\":\"m\",\"messages\":[{\"content\":\"ab";
                    case "name" -> "{\"model\":\"m\",\"ab";
                    default -> "{\"model\":\"m\",";
                };
                out.writeBytes(head.getBytes(StandardCharsets.US_ASCII));
                for (int x : seq) {
                    out.write(x);
                }
                out.writeBytes((where.equals("value") ? "cd\"}]}" : where.equals("name") ? "cd\":1}" : "\"x\":1}")
                    .getBytes(StandardCharsets.US_ASCII));
                check(out.toByteArray(), seq.length, "UTF-8 " + Arrays.toString(seq) + " in a " + where);
            }
        }
    }

    @Test
    void streamReadConstraintLimitsAsJacksonAppliesThem() {
        for (int depth = 995; depth <= 1002; depth++) {
            String arrays = "{\"a\":" + "[".repeat(depth - 1) + "]".repeat(depth - 1) + "}";
            check(arrays.getBytes(StandardCharsets.US_ASCII), depth, "depth " + depth + " (arrays)");
            String objects = "{\"model\":\"m\",\"x\":" + "{\"a\":".repeat(depth - 1) + "1" + "}".repeat(depth - 1) + "}";
            check(objects.getBytes(StandardCharsets.US_ASCII), depth, "depth " + depth + " (objects)");
        }
        Random r = new Random(3);
        for (int n = 997; n <= 1002; n++) {
            for (String form : new String[] {"%s", "-%s", "1.%s", "%se5", "%se-5", "0.%sE+7"}) {
                String digits = digits(r, form.startsWith("0.") || form.startsWith("1.") ? n - 1 : n, true);
                String num = String.format(form, digits);
                for (String name : new String[] {"n", "x", "max_tokens", "temperature"}) {
                    check(("{\"model\":\"m\",\"" + name + "\":" + num + "}").getBytes(StandardCharsets.US_ASCII), n,
                        n + "-digit number " + form + " in " + name);
                }
            }
        }
        for (int n = 49_998; n <= 50_002; n++) {
            check(("{\"" + "k".repeat(n) + "\":1,\"model\":\"m\"}").getBytes(StandardCharsets.US_ASCII), n, "name of " + n + " bytes");
            check(("{\"" + "é".repeat(n / 2) + "\":1}").getBytes(StandardCharsets.UTF_8), n, "name of " + (n / 2 * 2) + " UTF-8 bytes");
            check(("{\"" + "k".repeat(n - 6) + "\\u00e9\":1}").getBytes(StandardCharsets.UTF_8), n, "escaped name of " + (n - 4) + " bytes");
        }
    }

    /**
     * The SWAR string scan: each special byte ({@code "}, {@code \}, a control byte, UTF-8 leads of 2, 3 and 4 bytes,
     * invalid bytes) at every position of contents of 0-24 bytes, at every alignment of the body in its buffer,
     * with the string in the middle and at the very end of the body (its last 7 bytes read byte by byte).
     */
    @Test
    void everySpecialByteAtEveryOffsetModEight() throws IOException {
        String[] specials = {"\"", "\\n", "\\u00e9", "\u0001", "\u001f", "\u007f", "é", "中", "😀", "\u00ff", "\u0080"};
        for (int len = 0; len <= 24; len++) {
            for (int at = 0; at <= len; at++) {
                for (String s : specials) {
                    byte[] special = s.equals("\u00ff") ? new byte[] {(byte) 0xFF} : s.equals("\u0080")
                        ? new byte[] {(byte) 0x80} : s.getBytes(StandardCharsets.UTF_8);
                    ByteArrayOutputStream c = new ByteArrayOutputStream();
                    c.writeBytes("a".repeat(at).getBytes(StandardCharsets.US_ASCII));
                    c.writeBytes(special);
                    c.writeBytes("b".repeat(len - at).getBytes(StandardCharsets.US_ASCII));
                    byte[] content = c.toByteArray();
                    for (int shift = 0; shift < 16; shift++) {
                        byte[] middle = concat("{\"messages\":[{\"content\":\"", content, "\"}],\"model\":\"m\"}");
                        check(middle, shift, "content " + show(content) + " in the middle, shift " + shift);
                        byte[] last = concat("{\"model\":\"m\",\"user\":\"", content, "\"}");
                        check(last, shift, "content " + show(content) + " at the end, shift " + shift);
                    }
                    byte[] plain = concat("\"", content, "\"");
                    if (acceptsAsJackson(plain)) {
                        sameTokens(plain, "string " + show(content));
                    }
                }
            }
        }
    }

    /**
     * The vector skip's offsets ({@code firstTrue}) and its hand-over to the SWAR tail: in content longer than two
     * vectors, each special byte at every position from 0 to two vectors past the opening quote, with the string in
     * the middle of the body, ending two bytes before the body's end, and as the whole body (its closing quote the
     * body's last byte, or missing: unterminated); then content of every length up to a vector and a half, plain or
     * ending in a special byte, so strings shorter than a vector are read both where a whole vector still fits
     * before the body's end and where only the tail loops do. The SWAR run sweeps the same positions (a 64-byte
     * "vector").
     */
    @Test
    void everySpecialByteAtEveryPositionOfTwoVectors() throws IOException {
        int v = JsonLexer.VECTOR_BYTES != 0 ? JsonLexer.VECTOR_BYTES : 64;
        String[] specials = {"\"", "\\n", "\\u00e9", "\u0001", "\u001f", "\u007f", "é", "中", "😀", "\u00ff", "\u0080", "\\"};
        for (String s : specials) {
            byte[] special = s.equals("\u00ff") ? new byte[] {(byte) 0xFF} : s.equals("\u0080")
                ? new byte[] {(byte) 0x80} : s.getBytes(StandardCharsets.UTF_8);
            for (int at = 0; at <= 2 * v + 1; at++) {
                byte[] content = concat("a".repeat(at), special, "b".repeat(2 * v + 24 - at));
                for (int shift : new int[] {0, 1, 7, 8, 8 + 3}) { // 8 and up: a direct buffer
                    check(concat("{\"messages\":[{\"content\":\"", content, "\"}],\"model\":\"m\"}"), shift,
                        s + " at " + at + " of " + content.length + " bytes, in the middle, shift " + shift);
                    check(concat("{\"model\":\"m\",\"user\":\"", content, "\"}"), shift,
                        s + " at " + at + " of " + content.length + " bytes, at the end, shift " + shift);
                }
                wholeBody(content, s + " at " + at + " of " + content.length + " bytes, the whole body");
            }
            for (int len = 0; len <= v + v / 2; len++) {
                byte[] plain = "c".repeat(len).getBytes(StandardCharsets.US_ASCII);
                byte[] ending = concat("c".repeat(len), special, "");
                for (byte[] content : new byte[][] {plain, ending}) {
                    String what = show(content) + " (" + content.length + " bytes)";
                    for (int shift : new int[] {0, 8 + 5}) {
                        check(concat("{\"messages\":[{\"content\":\"", content, "\"}],\"model\":\"m\"}"), shift,
                            what + " in the middle, shift " + shift);
                        check(concat("{\"model\":\"m\",\"user\":\"", content, "\"}"), shift, what + " at the end, shift " + shift);
                    }
                    wholeBody(content, what + ", the whole body");
                }
            }
        }
    }

    /**
     * A root string {@code "content"} whose closing quote is the body's last byte, and the same without its closing
     * quote (unterminated, unless the content has one of its own): Jackson's tokens, or refused where Jackson refuses.
     */
    private static void wholeBody(byte[] content, String what) throws IOException {
        for (byte[] b : new byte[][] {concat("\"", content, "\""), concat("\"", content, "")}) {
            if (acceptsAsJackson(b)) {
                sameTokens(b, what + ": " + show(b));
            } else {
                refused(b, what + ": " + show(b));
            }
        }
    }

    private static void refused(byte[] body, String what) {
        JsonLexer lexer = JsonLexer.forThisThread();
        lexer.start(ByteBuffer.wrap(body));
        try {
            assertThrows(JsonLexer.MalformedJsonException.class, () -> {
                while (lexer.nextToken() != null) {
                    lexer.getText();
                }
            }, what);
        } finally {
            lexer.clear();
        }
    }

    private static byte[] concat(String head, byte[] middle, String tail) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.writeBytes(head.getBytes(StandardCharsets.UTF_8));
        out.writeBytes(middle);
        out.writeBytes(tail.getBytes(StandardCharsets.UTF_8));
        return out.toByteArray();
    }

    private static boolean acceptsAsJackson(byte[] b) {
        try {
            JsonParser p = FACTORY.createParser(b);
            while (p.nextToken() != null) {
                p.getText();
            }
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    /** The text prefix is cut at its bound exactly as before, a surrogate pair split included. */
    @Test
    void textPrefixBoundAndLongContents() throws IOException {
        int max = RequestFields.MAX_TEXT_PREFIX_CHARS;
        List<String> contents = new ArrayList<>();
        contents.add("a".repeat(max - 1) + "😀tail");
        contents.add("a".repeat(max) + "😀");
        contents.add("中".repeat(max + 10));
        contents.add("x\\n".repeat(max));
        contents.add("é".repeat(3) + "a".repeat(3 * max));
        for (String c : contents) {
            byte[] b = ("{\"model\":\"m\",\"messages\":[{\"content\":\"" + c + "\"},{\"content\":\"more\"}]}")
                .getBytes(StandardCharsets.UTF_8);
            check(b, c.length(), "long content");
            sameTokens(b, "long content");
        }
    }

    /** The lexer reads the buffer in either byte order and never moves its position or limit. */
    @Test
    void eitherByteOrderAndTheBufferIsLeftAsItWas() throws IOException {
        byte[] b = "{\"model\":\"qwen\",\"messages\":[{\"content\":\"0123456789abcdef\\\"中文😀\"}]}".getBytes(StandardCharsets.UTF_8);
        for (java.nio.ByteOrder order : new java.nio.ByteOrder[] {java.nio.ByteOrder.BIG_ENDIAN, java.nio.ByteOrder.LITTLE_ENDIAN}) {
            ByteBuffer direct = ByteBuffer.allocateDirect(b.length + 5).order(order);
            direct.position(5);
            direct.put(b).position(5);
            JsonLexer lexer = JsonLexer.forThisThread();
            lexer.start(direct);
            List<String> texts = new ArrayList<>();
            JsonToken t;
            while ((t = lexer.nextToken()) != null) {
                if (t == JsonToken.VALUE_STRING) {
                    texts.add(lexer.getText());
                }
            }
            lexer.clear();
            assertEquals(List.of("qwen", "0123456789abcdef\"中文😀"), texts, order.toString());
            assertEquals(5, direct.position());
            assertEquals(b.length + 5, direct.limit());
        }
    }
}
