package io.kvgate.dataplane.request;

import io.netty.util.internal.PlatformDependent;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/**
 * The body stage's own JSON lexer: one pass over a complete request body that validates it exactly as strictly as
 * the Jackson configuration the gateway used before ({@code JsonFactory.builder().build()}, jackson-core 2.21, its
 * non-blocking UTF-8 parser) and hands {@link RequestFieldExtractor} the same token stream, with exact byte offsets.
 *
 * <p>Why our own: almost all of a chat body is string content, which Jackson decodes char by char into its text
 * buffer although the gateway only needs to know it is valid; that decode was the whole per-byte cost of the body
 * stage (~0.4 ns/byte, {@code perf/results/bodyscan-2026-12-02.md}). Here string content is skipped one SIMD vector
 * per branch where the JVM has the (incubating) Vector API, {@code --add-modules jdk.incubator.vector} as in
 * {@code deploy/jvm.options} ({@link VectorScan}: 64 bytes with AVX-512, 32 with AVX2; one load, compares for
 * {@code '"'}, {@code '\\'} and a signed {@code < 0x20}, which also holds for every byte {@code >= 0x80}, and the
 * first flagged lane; {@code perf/results/bodyscan-2026-12-03.md}), and otherwise, and for the last bytes before the
 * body's end that do not fill a vector, sixteen then eight bytes per branch (those four byte tests done carry-free,
 * SWAR, on {@code long} words); the same bytes stop both, and only where a non-ASCII byte is does a byte loop
 * validate the UTF-8 sequence. A string's characters are decoded only when the extractor asks for them
 * ({@link #getText}, {@link #appendText}).
 *
 * <p>What is refused (each a {@link MalformedJsonException} naming what and the byte offset): anything outside RFC
 * 8259 as Jackson's defaults read it — comments, trailing commas, leading zeros, {@code +1}, {@code .5}, {@code 1.},
 * NaN/Infinity, unquoted or single-quoted names, unescaped control characters ({@code < 0x20}) in strings, escapes
 * other than {@code \" \\ \/ \b \f \n \r \t \\uXXXX}, whitespace other than space/tab/LF/CR; invalid UTF-8 as
 * Jackson judges it (a byte {@code 0x80-0xBF} or {@code 0xF8-0xFF} starting a sequence, a continuation byte that is
 * not {@code 10xxxxxx}, a three-byte sequence that encodes a surrogate; like Jackson, overlong forms, four-byte
 * sequences beyond U+10FFFF and unpaired {@code \\uD800} escapes pass); and
 * Jackson's {@code StreamReadConstraints} defaults: nesting deeper than {@value #MAX_DEPTH}, a number of more than
 * {@value #MAX_NUMBER_LENGTH} digits (integral + fraction + exponent digits), a string value of more than
 * {@value #MAX_STRING_LENGTH} chars, a name of more than {@value #MAX_NAME_LENGTH} UTF-8 bytes. Like Jackson's
 * parser, several root values in a row are tokens (the extractor refuses anything after the object), a UTF-8 BOM
 * at the very start is skipped, and a keyword must be followed by a byte below {@code '0'}, {@code ']'} or
 * {@code '}'} ({@code truex} is refused, {@code 3x} is the number 3 and then an error).
 *
 * <p>It scans a complete body ({@link #start}): the front door buffers the whole body anyway (bounded by
 * {@code limits.max_body_bytes}), so the lexer needs no state across chunks. One instance per event-loop thread
 * ({@link #forThisThread}), reused for every body with no allocation in steady state: names and short string values
 * come from small direct-mapped caches of canonical Strings (a miss allocates one String), number values are
 * computed from the digits (an exact double fast path; only numbers it cannot decide exactly build a String).
 * Not thread-safe; a body is scanned synchronously, start to end, by one caller.
 */
public final class JsonLexer {
    /** Jackson 2.x {@code StreamReadConstraints.DEFAULT_MAX_DEPTH}. */
    public static final int MAX_DEPTH = 1000;
    /** Jackson 2.x {@code StreamReadConstraints.DEFAULT_MAX_NUM_LEN}. */
    public static final int MAX_NUMBER_LENGTH = 1000;
    /** Jackson 2.x {@code StreamReadConstraints.DEFAULT_MAX_STRING_LEN}. */
    public static final int MAX_STRING_LENGTH = 20_000_000;
    /** Jackson 2.x {@code StreamReadConstraints.DEFAULT_MAX_NAME_LEN}. */
    public static final int MAX_NAME_LENGTH = 50_000;

    /** The tokens of a JSON text (named as Jackson's, so the extractor's token switch reads the same). */
    public enum JsonToken {
        START_OBJECT, END_OBJECT, START_ARRAY, END_ARRAY, FIELD_NAME, VALUE_STRING, VALUE_NUMBER_INT,
        VALUE_NUMBER_FLOAT, VALUE_TRUE, VALUE_FALSE, VALUE_NULL
    }

    /** The body is not JSON: the message says what and at which byte. No stack trace (a client error, not ours). */
    public static final class MalformedJsonException extends java.io.IOException {
        private static final long serialVersionUID = 1L;

        MalformedJsonException(String message) {
            super(message);
        }

        @Override
        public synchronized Throwable fillInStackTrace() {
            return this;
        }
    }

    private static final io.netty.util.concurrent.FastThreadLocal<JsonLexer> PER_THREAD =
        new io.netty.util.concurrent.FastThreadLocal<>() {
            @Override
            protected JsonLexer initialValue() {
                return new JsonLexer();
            }
        };

    /** This thread's lexer (event-loop threads each keep one for every body they scan). */
    public static JsonLexer forThisThread() {
        return PER_THREAD.get();
    }

    // What the next token may be.
    private static final int ROOT = 0;
    private static final int VALUE_OR_END = 1; // after '['
    private static final int NAME_OR_END = 2; // after '{'
    private static final int COLON = 3; // after a member name
    private static final int AFTER_VALUE = 4;

    private static final long ONES_7F = 0x7F7F7F7F7F7F7F7FL;
    private static final long HIGHS = 0x8080808080808080L;
    private static final long QUOTES = 0x2222222222222222L;
    private static final long BACKSLASHES = 0x5C5C5C5C5C5C5C5CL;
    private static final long SIXTIES = 0x6060606060606060L;

    /**
     * Bytes per vector of the string skip on the Vector API ({@link VectorScan}), 0 when it is not used: the module
     * {@code jdk.incubator.vector} is not in the boot layer (the JVM was started without {@code --add-modules
     * jdk.incubator.vector}, which {@code deploy/jvm.options} passes), its preferred byte vector is narrower than 16
     * bytes (not compiled to SIMD instructions: the API's Java fallback would be far slower than SWAR), or
     * {@code -Dkvgate.json.vector=false} turns it off. Decided once; {@link VectorScan} is loaded only when this
     * finds the module, so the lexer runs without it.
     */
    static final int VECTOR_BYTES = vectorBytes();

    private static int vectorBytes() {
        if (!Boolean.parseBoolean(System.getProperty("kvgate.json.vector", "true"))
            || ModuleLayer.boot().findModule("jdk.incubator.vector").isEmpty()) {
            return 0;
        }
        int n = VectorScan.BYTES;
        return n >= 16 ? n : 0;
    }

    /** How this JVM's lexers skip string content: {@code "vector (N bytes)"} or {@code "swar"} (for logs and benchmarks). */
    public static String stringScan() {
        return VECTOR_BYTES != 0 ? "vector (" + VECTOR_BYTES + " bytes)" : "swar";
    }

    /** This lexer skips strings with {@link VectorScan} (tests turn it off to run the SWAR path on the same JVM). */
    private boolean vectors = VECTOR_BYTES != 0;
    /** {@link #vectors} as it was at {@link #start}: the current scan's skip ({@link #segment} is set for it). */
    private boolean scanVectors;

    /**
     * All of native memory as one segment: {@link VectorScan} reads a direct buffer through it at the buffer's
     * address, so no segment is made per body (the front door's body buffers are new ByteBuffer objects from one body
     * to the next). Null where it cannot be had: no native access for this code ({@code
     * --enable-native-access=ALL-UNNAMED} in {@code deploy/jvm.options}; asked first, so no warning is printed), or
     * no Unsafe for Netty to read a buffer's address; those bodies, and heap ones, get a segment each. (Reading
     * through it is not bounds-checked against the buffer: {@link VectorScan} never reads at or past {@link #end},
     * which is the buffer's limit.)
     */
    @SuppressWarnings("restricted") // reinterpret: the one restricted call, made only with native access enabled
    private static final MemorySegment NATIVE = VECTOR_BYTES != 0 && PlatformDependent.hasUnsafe()
        && JsonLexer.class.getModule().isNativeAccessEnabled() ? MemorySegment.NULL.reinterpret(Long.MAX_VALUE) : null;

    private ByteBuffer in;
    /**
     * {@link VectorScan}'s view of {@link #in}: byte {@code i} of the buffer (absolute index) is at
     * {@code segmentBase + i} of {@link #segment} ({@link #NATIVE} at the buffer's address, or a segment made for a
     * heap body, one small object and its scope, dropped by {@link #clear}).
     */
    private MemorySegment segment;
    private long segmentBase;
    private boolean bigEndian;
    /** Absolute index of the body's first byte in {@link #in}; every reported offset is relative to it. */
    private int base;
    private int end;
    private int pos;
    private int state;
    private int depth;
    /** One bit per open container, set for an object. */
    private final long[] objects = new long[MAX_DEPTH / 64 + 2];
    private JsonToken token;
    private int tokenStart;
    private int tokenEnd;
    private int previousEnd;
    /** String and name tokens: whether the content has an escape or a non-ASCII byte (then it must be decoded). */
    private boolean escaped;
    private boolean nonAscii;
    /** Number tokens: sign and digit counts (integral, fraction, exponent). */
    private boolean negative;
    private int intDigits;
    private int fracDigits;
    private int expDigits;
    private boolean expNegative;
    private char[] chars = new char[256];
    /** Scratch for {@link #appendText}'s bulk copy of ASCII content, and views of it and of {@link #chars}. */
    private byte[] bytes = new byte[256];
    private ByteBuffer byteView = ByteBuffer.wrap(bytes);
    private java.nio.CharBuffer charView = java.nio.CharBuffer.wrap(chars);
    private final java.nio.charset.CharsetDecoder latin1 = StandardCharsets.ISO_8859_1.newDecoder();
    private int charsLength;
    /** {@link #chars} holds the current token's text. */
    private boolean charsValid;
    private final TextCache names = new TextCache(512);
    private final TextCache values = new TextCache(256);

    /**
     * Starts a scan of the complete body {@code body[position, limit)} (read in place, absolute gets only: the
     * buffer's position, limit and order are not changed, and it must not change until the scan is over).
     */
    public void start(ByteBuffer body) {
        in = body;
        scanVectors = vectors;
        if (vectors) {
            if (NATIVE != null && body.isDirect()) {
                segment = NATIVE;
                segmentBase = PlatformDependent.directBufferAddress(body); // the address of the buffer's index 0
            } else {
                segment = MemorySegment.ofBuffer(body); // from the body's position on
                segmentBase = -(long) body.position();
            }
        }
        bigEndian = body.order() == ByteOrder.BIG_ENDIAN;
        base = body.position();
        end = body.limit();
        pos = base;
        state = ROOT;
        depth = 0;
        token = null;
        tokenStart = tokenEnd = previousEnd = pos;
        charsValid = false;
        badStart = null;
        // UTF-8 byte order marks, skipped as Jackson's non-blocking parser skips them: any number in a row (one only
        // before: a body starting with two was refused; fuzz tier finding, issue #43)
        while (pos < end && (in.get(pos) & 0xFF) == 0xEF) {
            if (end - pos >= 3 && (in.get(pos + 1) & 0xFF) == 0xBB && (in.get(pos + 2) & 0xFF) == 0xBF) {
                pos += 3;
            } else {
                badStart = "Unexpected byte 0xef at byte " + (pos - base) + ": not a UTF-8 byte order mark";
                break;
            }
        }
    }

    /** Set by {@link #start} when the body cannot start as it does; the first {@link #nextToken} reports it. */
    private String badStart;

    /** Ends the scan: the body is no longer referenced. */
    public void clear() {
        in = null;
        token = null;
        segment = null;
    }

    /**
     * Turns the vector string skip on or off for this lexer (on only where {@link #VECTOR_BYTES} is not 0), from its
     * next {@link #start} on.
     */
    void vectors(boolean on) {
        vectors = on && VECTOR_BYTES != 0;
    }

    /** Whether {@link VectorScan} reads direct buffers in place through {@link #NATIVE} (else a segment per body). */
    static boolean readsDirectBuffersInPlace() {
        return NATIVE != null;
    }

    /** Whether this lexer skips strings with {@link VectorScan}. */
    boolean vectors() {
        return vectors;
    }

    /** Unchecked carrier of a {@link MalformedJsonException} out of helpers; {@link #nextToken} rethrows it. */
    private static final class Fail extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Fail(String message) {
            super(message, null, false, false);
        }
    }

    /** The next token, or null when the input ends between root values. */
    public JsonToken nextToken() throws MalformedJsonException {
        try {
            return next();
        } catch (Fail f) {
            token = null;
            throw new MalformedJsonException(f.getMessage());
        }
    }

    private JsonToken next() {
        charsValid = false;
        previousEnd = tokenEnd;
        if (badStart != null) {
            throw new Fail(badStart);
        }
        int p = skipWhitespace(pos);
        switch (state) {
            case AFTER_VALUE -> {
                if (depth == 0) {
                    return p >= end ? endOfInput(p) : value(p); // another root value: the caller decides
                }
                if (p >= end) {
                    throw eof(p);
                }
                int b = in.get(p);
                boolean object = inObject();
                if (b == ',') {
                    p = skipWhitespace(p + 1);
                    return object ? name(p) : value(p);
                }
                if (b == (object ? '}' : ']')) {
                    return close(p);
                }
                throw unexpected(p, object ? "expected ',' or '}' after an object member" : "expected ',' or ']' after an array element");
            }
            case COLON -> {
                if (p >= end) {
                    throw eof(p);
                }
                if (in.get(p) != ':') {
                    throw unexpected(p, "expected ':' after a member name");
                }
                return value(skipWhitespace(p + 1));
            }
            case NAME_OR_END -> {
                if (p < end && in.get(p) == '}') {
                    return close(p);
                }
                return name(p);
            }
            case VALUE_OR_END -> {
                if (p < end && in.get(p) == ']') {
                    return close(p);
                }
                return value(p);
            }
            default -> {
                return p >= end ? endOfInput(p) : value(p);
            }
        }
    }

    private JsonToken endOfInput(int p) {
        pos = p;
        tokenStart = tokenEnd = p;
        return token = null;
    }

    private int skipWhitespace(int p) {
        while (p < end) {
            int b = in.get(p);
            if (b != ' ' && b != '\n' && b != '\r' && b != '\t') {
                if (b >= 0 && b < 0x20) {
                    throw new Fail("Illegal character 0x" + hex(b) + " at byte " + (p - base)
                        + ": only space, tab, LF and CR may separate tokens");
                }
                return p;
            }
            p++;
        }
        return p;
    }

    private boolean inObject() {
        int d = depth - 1;
        return (objects[d >>> 6] & (1L << d)) != 0;
    }

    private JsonToken open(int p, boolean object) {
        if (depth >= MAX_DEPTH) {
            throw new Fail("Nesting depth " + (depth + 1) + " exceeds the maximum allowed (" + MAX_DEPTH + ") at byte " + (p - base));
        }
        int d = depth++;
        if (object) {
            objects[d >>> 6] |= 1L << d;
        } else {
            objects[d >>> 6] &= ~(1L << d);
        }
        tokenStart = p;
        tokenEnd = pos = p + 1;
        state = object ? NAME_OR_END : VALUE_OR_END;
        return token = object ? JsonToken.START_OBJECT : JsonToken.START_ARRAY;
    }

    private JsonToken close(int p) {
        boolean object = inObject();
        depth--;
        tokenStart = p;
        tokenEnd = pos = p + 1;
        state = AFTER_VALUE;
        return token = object ? JsonToken.END_OBJECT : JsonToken.END_ARRAY;
    }

    private JsonToken name(int p) {
        if (p >= end) {
            throw eof(p);
        }
        if (in.get(p) != '"') {
            throw unexpected(p, "expected a member name in double quotes");
        }
        tokenStart = p;
        tokenEnd = pos = string(p + 1);
        if (escaped) {
            nameSurrogates();
        }
        if (tokenEnd - tokenStart - 2 > MAX_NAME_LENGTH && nameBytes() > MAX_NAME_LENGTH) {
            throw new Fail("Name length (" + nameBytes() + " bytes) exceeds the maximum allowed (" + MAX_NAME_LENGTH
                + ") at byte " + (p - base));
        }
        state = COLON;
        return token = JsonToken.FIELD_NAME;
    }

    private JsonToken value(int p) {
        if (p >= end) {
            throw eof(p);
        }
        int b = in.get(p);
        switch (b) {
            case '{' -> {
                return open(p, true);
            }
            case '[' -> {
                return open(p, false);
            }
            case '"' -> {
                tokenStart = p;
                tokenEnd = pos = string(p + 1);
                if (tokenEnd - tokenStart - 2 > MAX_STRING_LENGTH && decodedLength() > MAX_STRING_LENGTH) {
                    throw new Fail("String value length (" + decodedLength() + ") exceeds the maximum allowed ("
                        + MAX_STRING_LENGTH + ") at byte " + (p - base));
                }
                state = AFTER_VALUE;
                return token = JsonToken.VALUE_STRING;
            }
            case 't' -> {
                return keyword(p, "true", JsonToken.VALUE_TRUE);
            }
            case 'f' -> {
                return keyword(p, "false", JsonToken.VALUE_FALSE);
            }
            case 'n' -> {
                return keyword(p, "null", JsonToken.VALUE_NULL);
            }
            default -> {
                if (b == '-' || (b >= '0' && b <= '9')) {
                    return number(p);
                }
                throw unexpected(p, "expected a JSON value (string, number, object, array, true, false or null)");
            }
        }
    }

    private JsonToken keyword(int p, String word, JsonToken t) {
        int n = word.length();
        for (int i = 1; i < n; i++) {
            if (p + i >= end || in.get(p + i) != word.charAt(i)) {
                throw new Fail("Unrecognized token at byte " + (p - base) + ": expected '" + word + "'");
            }
        }
        if (p + n < end) {
            int c = in.get(p + n) & 0xFF;
            if (c >= '0' && c != ']' && c != '}') {
                throw new Fail("Unrecognized token at byte " + (p - base) + ": '" + word + "' followed by "
                    + describe(c));
            }
        }
        tokenStart = p;
        tokenEnd = pos = p + n;
        state = AFTER_VALUE;
        return token = t;
    }

    private JsonToken number(int p) {
        int q = p;
        negative = in.get(q) == '-';
        if (negative) {
            q++;
            if (q >= end) {
                throw new Fail("Unexpected end of input at byte " + (q - base) + ": expected a digit after '-'");
            }
        }
        int b = in.get(q);
        if (b < '0' || b > '9') {
            throw unexpected(q, "expected a digit (0-9) to follow the minus sign");
        }
        int digits = q;
        q++;
        if (b == '0') {
            if (q < end) {
                int c = in.get(q) & 0xFF;
                if (isDigit(c)) {
                    throw new Fail("Invalid number at byte " + (p - base) + ": leading zeroes are not allowed");
                }
                // Jackson checks the byte after a lone 0 (and only then): a separator, '.', an exponent or a bracket
                if (c >= '0' && (c | 0x20) != 'e' && c != '}' && c != ']') {
                    throw new Fail("Unexpected character " + describe(c) + " at byte " + (q - base)
                        + ": expected a digit, '.' or an exponent to follow '0'");
                }
            }
        } else {
            while (q < end && isDigit(in.get(q))) {
                q++;
            }
        }
        intDigits = q - digits;
        fracDigits = 0;
        expDigits = 0;
        expNegative = false;
        boolean fraction = false;
        if (q < end && in.get(q) == '.') {
            fraction = true;
            int f = ++q;
            while (q < end && isDigit(in.get(q))) {
                q++;
            }
            fracDigits = q - f;
            if (fracDigits == 0) {
                throw new Fail("Invalid number at byte " + (p - base) + ": the decimal point is not followed by a digit");
            }
        }
        if (q < end && (in.get(q) | 0x20) == 'e') {
            fraction = true;
            q++;
            if (q < end && (in.get(q) == '-' || in.get(q) == '+')) {
                expNegative = in.get(q) == '-';
                q++;
            }
            int x = q;
            while (q < end && isDigit(in.get(q))) {
                q++;
            }
            expDigits = q - x;
            if (expDigits == 0) {
                throw new Fail("Invalid number at byte " + (p - base) + ": the exponent is not followed by a digit");
            }
        }
        int length = intDigits + fracDigits + expDigits;
        if (length > MAX_NUMBER_LENGTH) {
            throw new Fail("Number value length (" + length + ") exceeds the maximum allowed (" + MAX_NUMBER_LENGTH
                + ") at byte " + (p - base));
        }
        tokenStart = p;
        tokenEnd = pos = q;
        state = AFTER_VALUE;
        return token = fraction ? JsonToken.VALUE_NUMBER_FLOAT : JsonToken.VALUE_NUMBER_INT;
    }

    private static boolean isDigit(int b) {
        return b >= '0' && b <= '9';
    }

    /**
     * Skips a string's content from {@code p} (just past its opening quote) to past its closing quote, validating
     * it; sets {@link #escaped} and {@link #nonAscii}.
     */
    private int string(int p) {
        boolean esc = false;
        boolean high = false;
        final int e = end;
        final ByteBuffer b = in;
        while (true) {
            // Whole vectors first where the Vector API is there; then (or else) eight bytes at a time: a byte is
            // special when it is '"', '\\', < 0x20 or >= 0x80. Each SWAR test works
            // on the low seven bits of every byte plus a constant that cannot carry into the next byte, so the
            // flags are exact per byte whichever the buffer's byte order.
            // Sixteen bytes per iteration while there is room (one branch for two words: long ASCII content
            // is most of a chat body), then eight.
            scan:
            {
                if (scanVectors) { // whole vectors first; the SWAR loops below take what is left (less than one)
                    int q = VectorScan.firstSpecial(segment, segmentBase, p, e);
                    if (q >= 0) {
                        p = q;
                        break scan;
                    }
                    p = -1 - q;
                }
                while (p <= e - 16) {
                    long s1 = special(b.getLong(p));
                    long s2 = special(b.getLong(p + 8));
                    if ((s1 | s2) != 0) {
                        p += s1 != 0 ? firstFlagged(s1) : 8 + firstFlagged(s2);
                        break scan;
                    }
                    p += 16;
                }
                while (p <= e - 8) {
                    long s1 = special(b.getLong(p));
                    if (s1 != 0) {
                        p += firstFlagged(s1);
                        break scan;
                    }
                    p += 8;
                }
            }
            if (p >= e) {
                throw new Fail("Unexpected end of input at byte " + (p - base) + ": unterminated string");
            }
            int c = b.get(p);
            if (c == '"') {
                escaped = esc;
                nonAscii = high;
                return p + 1;
            }
            if (c == '\\') {
                esc = true;
                p = escape(p);
            } else if (c < 0) {
                high = true;
                p = utf8Run(p);
            } else if (c < 0x20) {
                throw new Fail("Illegal unquoted character 0x" + hex(c) + " at byte " + (p - base)
                    + ": control characters must be escaped in a string");
            } else {
                p++;
            }
        }
    }

    /** The high bit of each byte of {@code w} that is '"', '\\', < 0x20 or >= 0x80; 0 when none is. */
    private static long special(long w) {
        long low = w & ONES_7F;
        long quote = (low ^ (QUOTES & ONES_7F)) + ONES_7F;
        long backslash = (low ^ (BACKSLASHES & ONES_7F)) + ONES_7F;
        long control = low + SIXTIES;
        return (~(quote & backslash & control) | w) & HIGHS;
    }

    /** Index (0-7) in memory order of the first byte {@link #special} flagged in a word read in the buffer's order. */
    private int firstFlagged(long special) {
        return (bigEndian ? Long.numberOfLeadingZeros(special) : Long.numberOfTrailingZeros(special)) >>> 3;
    }

    /** An escape at {@code p} (its backslash): returns the index past it. */
    private int escape(int p) {
        if (p + 1 >= end) {
            throw new Fail("Unexpected end of input at byte " + (p + 1 - base) + ": unterminated escape");
        }
        int c = in.get(p + 1);
        switch (c) {
            case '"', '\\', '/', 'b', 'f', 'n', 'r', 't' -> {
                return p + 2;
            }
            case 'u' -> {
                for (int i = 2; i < 6; i++) {
                    if (p + i >= end) {
                        throw new Fail("Unexpected end of input at byte " + (p + i - base) + ": unterminated \\u escape");
                    }
                    if (hexValue(in.get(p + i)) < 0) {
                        throw new Fail("Unexpected character " + describe(in.get(p + i) & 0xFF) + " at byte "
                            + (p + i - base) + ": expected a hex digit of a \\u escape");
                    }
                }
                return p + 6;
            }
            default -> throw new Fail("Unrecognized character escape " + describe(c & 0xFF) + " at byte "
                + (p + 1 - base));
        }
    }

    private static int hexValue(int c) {
        if (c >= '0' && c <= '9') {
            return c - '0';
        }
        int l = c | 0x20;
        return l >= 'a' && l <= 'f' ? l - 'a' + 10 : -1;
    }

    /** Validates the run of multi-byte UTF-8 sequences starting at {@code p}; returns the index of the next ASCII byte. */
    private int utf8Run(int p) {
        final int e = end;
        while (p < e) {
            int lead = in.get(p) & 0xFF;
            if (lead < 0x80) {
                return p;
            }
            int need;
            if ((lead & 0xE0) == 0xC0) {
                need = 1;
            } else if ((lead & 0xF0) == 0xE0) {
                need = 2;
            } else if ((lead & 0xF8) == 0xF0) {
                need = 3;
            } else {
                throw new Fail("Invalid UTF-8 start byte 0x" + hex(lead) + " at byte " + (p - base));
            }
            for (int k = 1; k <= need; k++) {
                if (p + k >= e) {
                    throw new Fail("Unexpected end of input at byte " + (p + k - base) + ": unterminated string");
                }
                int c = in.get(p + k) & 0xFF;
                if ((c & 0xC0) != 0x80) {
                    throw new Fail("Invalid UTF-8 middle byte 0x" + hex(c) + " at byte " + (p + k - base));
                }
            }
            if (lead == 0xED && (in.get(p + 1) & 0xFF) >= 0xA0) { // U+D800-U+DFFF in three bytes
                throw new Fail("Invalid UTF-8 at byte " + (p - base) + ": an illegal surrogate character");
            }
            p += need + 1;
        }
        return p;
    }

    private Fail eof(int p) {
        return new Fail("Unexpected end of input at byte " + (p - base) + ": "
            + (depth == 0 ? "expected a JSON value" : inObject() ? "the object is not closed" : "the array is not closed"));
    }

    private Fail unexpected(int p, String expected) {
        return new Fail("Unexpected character " + describe(in.get(p) & 0xFF) + " at byte " + (p - base) + ": " + expected);
    }

    private static String describe(int c) {
        return c >= 0x20 && c < 0x7F ? "'" + (char) c + "'" : "0x" + hex(c);
    }

    private static String hex(int c) {
        return String.format("%02x", c & 0xFF);
    }

    // ---- the current token ---------------------------------------------------------------------------------

    /** The current token (null before the first and after the end). */
    public JsonToken currentToken() {
        return token;
    }

    /** Offset of the current token's first byte in the body (a string's or name's opening quote). */
    public int tokenStart() {
        return tokenStart - base;
    }

    /** Offset just past the current token's last byte. */
    public int tokenEnd() {
        return tokenEnd - base;
    }

    /**
     * Offset just past the token before the current one: for a closing bracket, the end of the container's last
     * value (or of its opening bracket when it is empty), before any whitespace.
     */
    public int previousTokenEnd() {
        return previousEnd - base;
    }

    /** The current member name (a canonical String: the same instance for the same name, no allocation on a hit). */
    public String currentName() {
        return token == JsonToken.FIELD_NAME ? text(names) : null;
    }

    /**
     * The current token's text: a string's or name's decoded value, a number's or keyword's characters. Short
     * strings come from a cache of canonical Strings (a miss allocates).
     */
    public String getText() {
        if (token == null) {
            return null;
        }
        return switch (token) {
            case FIELD_NAME -> text(names);
            case VALUE_STRING -> text(values);
            default -> {
                decode();
                yield new String(chars, 0, charsLength);
            }
        };
    }

    /** The current token's text in {@link #getTextCharacters()} from {@link #getTextOffset()}, decoded on first ask. */
    public char[] getTextCharacters() {
        decode();
        return chars;
    }

    public int getTextOffset() {
        return 0;
    }

    /** The current token's text length in chars (UTF-16 units, as Jackson counts). */
    public int getTextLength() {
        if (!escaped && !nonAscii && isText()) {
            return tokenEnd - tokenStart - 2;
        }
        if (!isText()) {
            return tokenEnd - tokenStart;
        }
        decode();
        return charsLength;
    }

    private boolean isText() {
        return token == JsonToken.VALUE_STRING || token == JsonToken.FIELD_NAME;
    }

    /**
     * Appends at most {@code max} chars of the current string token to {@code out}, decoding only those: the body
     * stage keeps a bounded prefix of a long content string without decoding the rest.
     */
    public void appendText(StringBuilder out, int max) {
        if (max <= 0) {
            return;
        }
        if (charsValid) {
            out.append(chars, 0, Math.min(max, charsLength));
            return;
        }
        int from = tokenStart + 1;
        int to = tokenEnd - 1;
        if (!escaped && !nonAscii) {
            // ASCII without escapes: one bulk copy out of the buffer, then the JDK's Latin-1 decoder between heap
            // arrays, whose loop is the intrinsic String inflation. A get(index) per byte of the direct buffer, or a
            // (char) loop (not vectorized), took most of the body stage's time at 16 KiB (BodyScanBench).
            int n = Math.min(max, to - from);
            ensureChars(n);
            if (bytes.length < n) {
                bytes = new byte[Math.max(n, bytes.length * 2)];
                byteView = ByteBuffer.wrap(bytes);
            }
            if (charView.array() != chars) {
                charView = java.nio.CharBuffer.wrap(chars);
            }
            in.get(from, bytes, 0, n);
            byteView.clear().limit(n);
            charView.clear();
            latin1.reset();
            latin1.decode(byteView, charView, true); // never fails: every byte is a Latin-1 char, and chars has room
            out.append(chars, 0, n);
            return;
        }
        int n = decodeInto(from, to, max);
        out.append(chars, 0, n);
    }

    private String text(TextCache cache) {
        int from = tokenStart + 1;
        int length = tokenEnd - 1 - from;
        if (!escaped && !nonAscii && length <= TextCache.MAX_BYTES) {
            return cache.lookup(in, from, length);
        }
        decode();
        return new String(chars, 0, charsLength);
    }

    /** Decodes the current token's text into {@link #chars} (once per token). */
    private void decode() {
        if (charsValid) {
            return;
        }
        if (isText()) {
            charsLength = decodeInto(tokenStart + 1, tokenEnd - 1, Integer.MAX_VALUE);
        } else {
            int n = tokenEnd - tokenStart;
            ensureChars(n);
            for (int i = 0; i < n; i++) {
                chars[i] = (char) in.get(tokenStart + i);
            }
            charsLength = n;
        }
        charsValid = true;
    }

    /**
     * Decodes validated string content {@code [from, to)} into {@link #chars}, at most {@code max} chars (a surrogate
     * pair may be cut after its first char, as a bounded copy of Jackson's text is), as Jackson does: each escape to
     * its char ({@code \\uXXXX} as is, unpaired surrogates included), UTF-8 sequences by their payload bits (overlong
     * forms and values beyond U+10FFFF as Jackson computes them). Returns the chars written.
     */
    private int decodeInto(int from, int to, int max) {
        ensureChars(Math.min(max, to - from));
        int o = 0;
        int p = from;
        while (p < to && o < max) {
            int c = in.get(p) & 0xFF;
            if (c == '\\') {
                int e = in.get(p + 1);
                switch (e) {
                    case 'b' -> c = '\b';
                    case 'f' -> c = '\f';
                    case 'n' -> c = '\n';
                    case 'r' -> c = '\r';
                    case 't' -> c = '\t';
                    case 'u' -> {
                        c = (hexValue(in.get(p + 2)) << 12) | (hexValue(in.get(p + 3)) << 8)
                            | (hexValue(in.get(p + 4)) << 4) | hexValue(in.get(p + 5));
                        p += 4;
                    }
                    default -> c = e;
                }
                p += 2;
            } else if (c < 0x80) {
                p++;
            } else if ((c & 0xE0) == 0xC0) {
                c = ((c & 0x1F) << 6) | (in.get(p + 1) & 0x3F);
                p += 2;
            } else if ((c & 0xF0) == 0xE0) {
                c = ((c & 0x0F) << 12) | ((in.get(p + 1) & 0x3F) << 6) | (in.get(p + 2) & 0x3F);
                p += 3;
            } else {
                int v = ((((c & 0x07) << 6 | (in.get(p + 1) & 0x3F)) << 6 | (in.get(p + 2) & 0x3F)) << 6
                    | (in.get(p + 3) & 0x3F)) - 0x10000;
                chars[o++] = (char) (0xD800 | (v >> 10));
                if (o == max) {
                    break;
                }
                c = 0xDC00 | (v & 0x3FF);
                p += 4;
            }
            chars[o++] = (char) c; // never past the buffer: no char takes less than one byte of content
        }
        return o;
    }

    private void ensureChars(int n) {
        if (chars.length < n) {
            chars = java.util.Arrays.copyOf(chars, Math.max(n, chars.length * 2));
        }
    }

    /** The current string's length in chars, without decoding it (for the string length limit). */
    private int decodedLength() {
        int n = 0;
        int p = tokenStart + 1;
        int to = tokenEnd - 1;
        while (p < to) {
            int c = in.get(p) & 0xFF;
            if (c == '\\') {
                p += in.get(p + 1) == 'u' ? 6 : 2;
                n++;
            } else if (c < 0x80) {
                p++;
                n++;
            } else if ((c & 0xE0) == 0xC0) {
                p += 2;
                n++;
            } else if ((c & 0xF0) == 0xE0) {
                p += 3;
                n++;
            } else {
                p += 4;
                n += 2;
            }
        }
        return n;
    }

    /**
     * A name's {@code \\u} escapes of surrogates must pair up (Jackson 2.21 refuses a broken pair in a name, not in
     * a value): a high surrogate directly followed by an escape of a low one, no low surrogate on its own.
     */
    private void nameSurrogates() {
        int p = tokenStart + 1;
        int to = tokenEnd - 1;
        while (p < to) {
            if (in.get(p) != '\\') {
                p++;
                continue;
            }
            int c = escapedChar(p);
            int at = p;
            p += in.get(p + 1) == 'u' ? 6 : 2;
            if (c >= 0xDC00 && c <= 0xDFFF) {
                throw new Fail("Unexpected low surrogate \\u" + Integer.toHexString(c) + " in a member name at byte "
                    + (at - base));
            }
            if (c >= 0xD800 && c <= 0xDBFF) {
                int low = p < to && in.get(p) == '\\' ? escapedChar(p) : -1;
                if (low < 0xDC00 || low > 0xDFFF) {
                    throw new Fail("Broken surrogate pair in a member name at byte " + (at - base)
                        + ": a high surrogate not followed by the escape of a low one");
                }
                p += in.get(p + 1) == 'u' ? 6 : 2;
            }
        }
    }

    /** The char the (validated) escape at {@code p} stands for. */
    private int escapedChar(int p) {
        int e = in.get(p + 1);
        return switch (e) {
            case 'b' -> '\b';
            case 'f' -> '\f';
            case 'n' -> '\n';
            case 'r' -> '\r';
            case 't' -> '\t';
            case 'u' -> (hexValue(in.get(p + 2)) << 12) | (hexValue(in.get(p + 3)) << 8) | (hexValue(in.get(p + 4)) << 4)
                | hexValue(in.get(p + 5));
            default -> e;
        };
    }

    /** The current name's length as Jackson measures it: UTF-8 bytes after unescaping. */
    private int nameBytes() {
        int n = 0;
        int p = tokenStart + 1;
        int to = tokenEnd - 1;
        while (p < to) {
            if (in.get(p) == '\\') {
                if (in.get(p + 1) == 'u') {
                    int c = (hexValue(in.get(p + 2)) << 12) | (hexValue(in.get(p + 3)) << 8)
                        | (hexValue(in.get(p + 4)) << 4) | hexValue(in.get(p + 5));
                    n += c < 0x80 ? 1 : c < 0x800 ? 2 : 3;
                    p += 6;
                } else {
                    n++;
                    p += 2;
                }
            } else {
                n++;
                p++;
            }
        }
        return n;
    }

    // ---- numbers -------------------------------------------------------------------------------------------

    /**
     * The current integer token's value clamped to int range (beyond it: {@link Integer#MIN_VALUE} or
     * {@link Integer#MAX_VALUE} by its sign), which is what the extractor makes of Jackson's int/long/BigInteger.
     */
    public int getIntClamped() {
        if (intDigits > 10) {
            return negative ? Integer.MIN_VALUE : Integer.MAX_VALUE;
        }
        long v = 0;
        int p = tokenStart + (negative ? 1 : 0);
        for (int i = 0; i < intDigits; i++) {
            v = v * 10 + (in.get(p + i) - '0');
        }
        if (negative) {
            v = -v;
        }
        return (int) Math.max(Integer.MIN_VALUE, Math.min(Integer.MAX_VALUE, v));
    }

    /**
     * The current integer token as a token id: its value when it is in {@code [0, 2^31)} ({@code -0} is 0), else -1.
     * The range is what the tree reading accepted ({@code isIntegralNumber}, {@code canConvertToInt}, not negative).
     */
    public int tokenId() {
        if (intDigits > 10) {
            return -1;
        }
        long v = 0;
        int p = tokenStart + (negative ? 1 : 0);
        for (int i = 0; i < intDigits; i++) {
            v = v * 10 + (in.get(p + i) - '0');
        }
        return v > Integer.MAX_VALUE || (negative && v != 0) ? -1 : (int) v;
    }

    private static final double[] POWERS_OF_TEN = {
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18,
        1e19, 1e20, 1e21, 1e22};

    /**
     * The current number token as a double, correctly rounded as {@link Double#parseDouble} gives it (what
     * Jackson's {@code getDoubleValue} returns). Exact without a String when the significant digits fit 2^53 and
     * the decimal exponent is within ±22 (Clinger's fast path: one exact multiplication or division); otherwise
     * parsed from the token's text.
     */
    public double getDoubleValue() {
        int p = tokenStart + (negative ? 1 : 0);
        int sig = intDigits + fracDigits;
        if (sig <= 18 && expDigits <= 3) {
            long m = 0;
            for (int i = 0; i < intDigits; i++) {
                m = m * 10 + (in.get(p + i) - '0');
            }
            int f = p + intDigits + 1;
            for (int i = 0; i < fracDigits; i++) {
                m = m * 10 + (in.get(f + i) - '0');
            }
            int exp = 0;
            if (expDigits > 0) {
                int x = tokenEnd - expDigits;
                for (int i = 0; i < expDigits; i++) {
                    exp = exp * 10 + (in.get(x + i) - '0');
                }
                if (expNegative) {
                    exp = -exp;
                }
            }
            exp -= fracDigits;
            if (m == 0) { // -0 is the integer 0 (as Jackson reads it), -0.0 the double
                return negative && token == JsonToken.VALUE_NUMBER_FLOAT ? -0.0 : 0.0;
            }
            if (m < (1L << 53) && exp >= -22 && exp <= 22) {
                double d = exp >= 0 ? m * POWERS_OF_TEN[exp] : m / POWERS_OF_TEN[-exp];
                return negative ? -d : d;
            }
        }
        decode();
        return Double.parseDouble(new String(chars, 0, charsLength));
    }

    /**
     * Direct-mapped cache of canonical Strings for short ASCII byte sequences (member names, short values such as
     * model names): a hit compares the bytes and returns the same String, a miss decodes one and replaces the slot,
     * so memory stays bounded whatever names clients send.
     */
    private static final class TextCache {
        static final int MAX_BYTES = 64;
        private final byte[][] keys;
        private final String[] texts;
        private final int mask;

        TextCache(int slots) {
            keys = new byte[slots][];
            texts = new String[slots];
            mask = slots - 1;
        }

        String lookup(ByteBuffer in, int from, int length) {
            int h = length;
            for (int i = 0; i < length; i++) {
                h = 31 * h + in.get(from + i);
            }
            int slot = (h ^ (h >>> 15)) & mask;
            byte[] k = keys[slot];
            if (k != null && k.length == length && same(k, in, from)) {
                return texts[slot];
            }
            byte[] key = new byte[length];
            in.get(from, key);
            String s = new String(key, StandardCharsets.ISO_8859_1);
            keys[slot] = key;
            texts[slot] = s;
            return s;
        }

        private static boolean same(byte[] k, ByteBuffer in, int from) {
            for (int i = 0; i < k.length; i++) {
                if (k[i] != in.get(from + i)) {
                    return false;
                }
            }
            return true;
        }
    }
}
