package io.kvgate.dataplane.relay;

import io.netty.buffer.ByteBuf;
import io.netty.util.concurrent.FastThreadLocal;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/**
 * The token usage of an engine's answer, read from the bytes on their way to the client (issue #13 item 5,
 * {@code kvgate_tokens_total}): a byte-at-a-time state machine that finds a {@code "usage": {…}} member and reads
 * its {@code prompt_tokens}, {@code completion_tokens} and {@code prompt_tokens_details.cached_tokens}, whatever way
 * the bytes are split into chunks (it stops and resumes at any byte). The last complete usage object wins: a
 * stream's final usage chunk (cumulative) comes after any per-chunk usage, and a JSON answer has one.
 *
 * <p>Why a hand-written scanner: it runs on the relay's byte-for-byte path, which must not parse JSON or allocate
 * per request; the scanner holds a few primitives (the response object carries it, {@link ClientResponse} extends
 * it) and makes one pass over the bytes. Most of an answer is not its usage: there it only looks for the whole
 * needle, a word at a time over an array, and the byte state machine runs from a needle on (JFR on the 1 KiB
 * front-door benchmark had the previous walk, a Netty {@code indexOf} and {@code forEachByte} per quote, ~50 quotes
 * in a 250-byte chat completion, at 12.6% of the I/O thread's time). It is not a JSON validator: bytes it does not
 * expect send it back to looking for the next {@code "usage"}. {@code "usage"} followed by {@code :} can only be a
 * member name: inside a JSON string every quote is escaped, so the quote after {@code usage} would be preceded by a
 * backslash. Event-loop only (the scratch it copies direct buffers into is the thread's).
 */
public class UsageScanner {
    private static final byte[] NEEDLE = "\"usage\"".getBytes(StandardCharsets.US_ASCII);
    /** Words read in little-endian order: byte k of the array is bits 8k..8k+7, so trailing zeros find the first. */
    private static final VarHandle WORD = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
    /** The needle's 7 bytes as the low bytes of a little-endian word, and the mask that keeps them. */
    private static final long NEEDLE_WORD = needleWord();
    private static final long NEEDLE_MASK = (1L << 8 * 7) - 1;
    private static final long ONES_01 = 0x0101010101010101L;
    private static final long HIGHS = 0x8080808080808080L;
    private static final long QUOTES = 0x2222222222222222L;
    private static final long US = 0x7575757575757575L;
    /** The largest piece of a non-array buffer copied out at once: a few KiB per event-loop thread, never per answer. */
    static final int SCRATCH_BYTES = 4096;
    private static final FastThreadLocal<byte[]> SCRATCH = new FastThreadLocal<>() {
        @Override
        protected byte[] initialValue() {
            return new byte[SCRATCH_BYTES];
        }
    };
    private static final byte[][] KEYS = {
        "prompt_tokens".getBytes(StandardCharsets.US_ASCII),
        "completion_tokens".getBytes(StandardCharsets.US_ASCII),
        "prompt_tokens_details".getBytes(StandardCharsets.US_ASCII),
        "cached_tokens".getBytes(StandardCharsets.US_ASCII),
    };
    private static final int PROMPT = 0;
    private static final int COMPLETION = 1;
    private static final int DETAILS = 2;
    private static final int CACHED = 3;
    /** Keys that count at the usage object's level, and inside {@code prompt_tokens_details}. */
    private static final int TOP_KEYS = 1 << PROMPT | 1 << COMPLETION | 1 << DETAILS;
    private static final int DETAIL_KEYS = 1 << CACHED;
    /** Larger token counts are not believed (and cannot overflow a long). */
    private static final long MAX_COUNT = 1L << 40;

    private static final int SEEK = 0;
    private static final int COLON = 1;
    private static final int OPEN = 2;
    private static final int KEY_OR_END = 3;
    private static final int KEY = 4;
    private static final int KEY_ESCAPE = 5;
    private static final int KEY_COLON = 6;
    private static final int VALUE = 7;
    private static final int NUMBER = 8;
    private static final int STRING = 9;
    private static final int STRING_ESCAPE = 10;
    private static final int LITERAL = 11;
    private static final int SKIP = 12;
    private static final int SKIP_STRING = 13;
    private static final int SKIP_STRING_ESCAPE = 14;
    private static final int AFTER_VALUE = 15;

    private int state = SEEK;
    private int matched;
    /** 1 inside the usage object, 2 inside its {@code prompt_tokens_details}. */
    private int depth;
    private int candidates;
    private int keyPos;
    /** The key whose value comes next, or -1 for one that is not counted. */
    private int key = -1;
    private long number;
    private boolean numberValid;
    private int skipDepth;
    private long readPrompt;
    private long readCompletion;
    /** -1 until the usage object being read names {@code cached_tokens}: absent and 0 are told apart. */
    private long readCached = -1;

    private boolean usageSeen;
    private long promptTokens;
    private long completionTokens;
    /** The last complete usage object's {@code cached_tokens}, -1 when it had none. */
    private long cachedTokens = -1;

    /**
     * Feeds the readable bytes of {@code buf} (its indices are not moved). A heap buffer is scanned in its array; any
     * other (the pooled direct buffers Netty reads into, composites) is copied out in pieces of at most
     * {@link #SCRATCH_BYTES} into this thread's scratch array, each piece scanned as {@link #scanUsage(byte[], int,
     * int)} scans it: a bulk copy is cheaper than a bounds-checked {@code ByteBuf} access per byte or per word.
     * Public so perf's {@code UsageScanBench} measures this scan from its own package.
     */
    public final void scanUsage(ByteBuf buf) {
        int from = buf.readerIndex();
        int end = buf.writerIndex();
        if (buf.hasArray()) {
            scanUsage(buf.array(), buf.arrayOffset() + from, end - from);
            return;
        }
        byte[] scratch = SCRATCH.get();
        while (from < end) {
            int n = Math.min(scratch.length, end - from);
            buf.getBytes(from, scratch, 0, n);
            scanUsage(scratch, 0, n);
            from += n;
        }
    }

    /**
     * Feeds {@code len} bytes of {@code bytes} from {@code off}. While looking for the needle with nothing of it
     * matched, the scan looks for the whole needle at once (eight candidate starts per step, {@link #findNeedle}),
     * so the bytes of the answer around the usage object are only read a word at a time; from a needle on, and
     * over the bytes that may start one across the end of this piece, it runs the byte state machine
     * ({@link #process}), which then carries any partial match into the next piece. A usage object an engine
     * writes, whole in the piece, is read in one pass ({@link #readObject}); any other, and one cut by the piece's
     * end, goes through the state machine, in which a key's bytes and a number's digits are read in a loop of their
     * own ({@link #keyRun}, {@link #digitRun}). Each ends in the state the machine would be in after the same bytes.
     */
    final void scanUsage(byte[] bytes, int off, int len) {
        int i = off;
        int end = off + len;
        while (i < end) {
            if (state == SEEK && matched == 0) {
                int at = findNeedle(bytes, i, end);
                if (at < 0) {
                    // No whole needle from i on: only the last NEEDLE.length - 1 bytes can start one that the next
                    // piece completes. From a state with nothing matched the machine reads them exactly as it would
                    // have after visiting every byte before them (the needle's only quote is its first byte, so a
                    // partial match never reaches further back than its quote).
                    for (int j = Math.max(i, end - (NEEDLE.length - 1)); j < end; j++) {
                        seek(bytes[j]);
                    }
                    return;
                }
                int past = readObject(bytes, at + NEEDLE.length, end);
                if (past >= 0) {
                    i = past;
                } else {
                    state = COLON;
                    i = at + NEEDLE.length;
                }
            } else if (state == KEY) {
                i = keyRun(bytes, i, end);
            } else if (state == NUMBER) {
                i = digitRun(bytes, i, end);
            } else {
                process(bytes[i++]);
            }
        }
    }

    /**
     * What follows a needle, read in one pass without the state machine's per-byte dispatch where it can be: a usage
     * object that lies whole in this piece and holds only plain keys, unsigned integers, literals ({@code null},
     * {@code true}) and a {@code prompt_tokens_details} object of the same (what vLLM and SGLang write) is read to its
     * closing brace and its counts kept; a needle that is not followed by {@code :} and an object (SGLang's
     * {@code "usage": null} on every chunk) sends the scan back to seeking. Both end in the state the machine would
     * end in after the same bytes; the index past what was read is returned. Anything else (the piece ends first, a
     * string, a fraction, a negative number, another nested value, an escape, a byte the machine restarts on) returns
     * -1 with nothing changed, and the state machine reads it from the needle on.
     */
    private int readObject(byte[] b, int from, int end) {
        int i = skipWhitespace(b, from, end);
        if (i >= end) {
            return -1;
        }
        if (b[i] != ':') {
            restart(b[i]);
            return i + 1;
        }
        i = skipWhitespace(b, i + 1, end);
        if (i >= end) {
            return -1;
        }
        if (b[i] != '{') {
            restart(b[i]);
            return i + 1;
        }
        i++;
        int level = 1;
        long prompt = 0;
        long completion = 0;
        long cached = -1;
        boolean afterValue = false;
        while (i < end) {
            byte c = b[i];
            if (whitespace(c)) {
                i++;
            } else if (c == '}') {
                i++;
                if (level == 1) {
                    depth = 1;
                    readPrompt = prompt;
                    readCompletion = completion;
                    readCached = cached;
                    closeObject(); // the usage object is complete: the byte machine's own commit
                    return i;
                }
                level = 1;
                afterValue = true;
            } else if (afterValue) {
                if (c != ',') {
                    return -1;
                }
                afterValue = false;
                i++;
            } else if (c == ',') {
                i++;
            } else if (c != '"') {
                return -1;
            } else {
                int nameFrom = ++i;
                while (i < end && b[i] != '"' && b[i] != '\\') {
                    i++;
                }
                if (i >= end || b[i] == '\\') {
                    return -1;
                }
                int name = keyAt(b, nameFrom, i - nameFrom, level);
                i = skipWhitespace(b, i + 1, end);
                if (i >= end || b[i] != ':') {
                    return -1;
                }
                i = skipWhitespace(b, i + 1, end);
                if (i >= end) {
                    return -1;
                }
                c = b[i];
                if (c >= '0' && c <= '9') {
                    long n = 0;
                    boolean valid = true;
                    for (; i < end && (c = b[i]) >= '0' && c <= '9'; i++) {
                        if (valid) {
                            n = n * 10 + (c - '0');
                            valid = n <= MAX_COUNT;
                        }
                    }
                    if (i >= end) {
                        return -1; // a fraction or an exponent ends the run too, and then bails as not ',' or '}'
                    }
                    if (valid) {
                        switch (name) {
                            case PROMPT -> prompt = n;
                            case COMPLETION -> completion = n;
                            case CACHED -> cached = n;
                            default -> { }
                        }
                    }
                    afterValue = true;
                } else if (c >= 'a' && c <= 'z') {
                    while (i < end && b[i] >= 'a' && b[i] <= 'z') {
                        i++;
                    }
                    afterValue = true;
                } else if (c == '{' && name == DETAILS) { // only a top-level key can be DETAILS
                    level = 2;
                    i++;
                } else {
                    return -1;
                }
            }
        }
        return -1;
    }

    /** The key of {@code n} bytes of {@code b} from {@code from} at this level of the usage object, as {@link #keyOf}. */
    private static int keyAt(byte[] b, int from, int n, int level) {
        int alive = level == 1 ? TOP_KEYS : DETAIL_KEYS;
        for (int k = 0; k < KEYS.length; k++) {
            if ((alive & 1 << k) != 0 && KEYS[k].length == n && startsAt(KEYS[k], 0, b, from, n)) {
                return k;
            }
        }
        return -1;
    }

    private static int skipWhitespace(byte[] b, int i, int end) {
        while (i < end && whitespace(b[i])) {
            i++;
        }
        return i;
    }

    /**
     * In a key: its plain bytes from {@code i} compared with the candidate keys at once, then the byte that ends the
     * run (the closing quote, or a backslash) through the state machine. Reads what {@link #narrow} per byte reads.
     */
    private int keyRun(byte[] b, int i, int end) {
        int j = i;
        while (j < end && b[j] != '"' && b[j] != '\\') {
            j++;
        }
        if (j > i) {
            narrow(b, i, j - i);
        }
        if (j < end) {
            process(b[j++]);
        }
        return j;
    }

    /** In a number: its digits from {@code i} in a loop, then the byte that ends them through the state machine. */
    private int digitRun(byte[] b, int i, int end) {
        long n = number;
        boolean valid = numberValid;
        int j = i;
        for (; j < end && b[j] >= '0' && b[j] <= '9'; j++) {
            if (valid) {
                n = n * 10 + (b[j] - '0');
                valid = n <= MAX_COUNT;
            }
        }
        number = n;
        numberValid = valid;
        if (j < end) {
            process(b[j++]);
        }
        return j;
    }

    /**
     * The first index in [{@code from}, {@code end - 7}] where the whole needle starts, or -1. A start is a candidate
     * when its byte is {@code "} and the next is {@code u} ({@link #pairs}: two unaligned words, eight starts), and a
     * candidate is compared whole. Sixteen starts per step, with a branch on whether any is a quote (skipping a
     * string's text with half the work) and one on whether any is a candidate: in an answer's JSON a quote is
     * followed by {@code u} almost only in {@code "usage"}, and sixteen bytes of its members almost always hold a
     * quote, so both are predictable where a branch per quote (one every ~5 bytes of a chat completion) is not.
     */
    private static int findNeedle(byte[] b, int from, int end) {
        int last = end - NEEDLE.length;
        int s = from;
        for (; s + 2 * Long.BYTES + 1 <= end; s += 2 * Long.BYTES) {
            long lowQuotes = zeroBytes((long) WORD.get(b, s) ^ QUOTES);
            long highQuotes = zeroBytes((long) WORD.get(b, s + Long.BYTES) ^ QUOTES);
            if ((lowQuotes | highQuotes) == 0) {
                continue; // text between members: two words read, no u tested
            }
            long low = lowQuotes & zeroBytes((long) WORD.get(b, s + 1) ^ US);
            long high = highQuotes & zeroBytes((long) WORD.get(b, s + Long.BYTES + 1) ^ US);
            if ((low | high) == 0) {
                continue;
            }
            int c = needleAmong(b, s, low, end, last);
            if (c < 0) {
                c = needleAmong(b, s + Long.BYTES, high, end, last);
            }
            if (c >= 0) {
                return c;
            }
        }
        for (; s + Long.BYTES + 1 <= end; s += Long.BYTES) {
            int c = needleAmong(b, s, pairs(b, s), end, last);
            if (c >= 0) {
                return c;
            }
        }
        if (s > last) {
            return -1;
        }
        if (end - (Long.BYTES + 1) >= from) {
            // the last starts: one more pair of words, ending at the piece's end (the starts before s it covers again
            // were already found wanting)
            s = end - (Long.BYTES + 1);
            return needleAmong(b, s, pairs(b, s), end, last);
        }
        for (; s <= last; s++) {
            if (b[s] == '"' && isNeedle(b, s, end)) {
                return s;
            }
        }
        return -1;
    }

    /**
     * A high bit in byte k for each start {@code s + k} (k < 8) that is {@code "} followed by {@code u}, and possibly
     * for a few that are not (the zero-byte test below flags a 0x01 byte just above a zero one: {@code "#} or
     * {@code ut}), which the whole comparison then turns down. Needs {@code s + 9 <= b.length}.
     */
    private static long pairs(byte[] b, int s) {
        return zeroBytes((long) WORD.get(b, s) ^ QUOTES) & zeroBytes((long) WORD.get(b, s + 1) ^ US);
    }

    /** The first candidate of {@code hits} (as {@link #pairs} of {@code s}) where the whole needle is, or -1. */
    private static int needleAmong(byte[] b, int s, long hits, int end, int last) {
        while (hits != 0) {
            int c = s + (Long.numberOfTrailingZeros(hits) >>> 3);
            if (c <= last && isNeedle(b, c, end)) {
                return c;
            }
            hits &= hits - 1;
        }
        return -1;
    }

    /** Whether the needle is at {@code at} (which is at most {@code end - 7}). */
    private static boolean isNeedle(byte[] b, int at, int end) {
        if (at + Long.BYTES <= end) {
            return ((long) WORD.get(b, at) & NEEDLE_MASK) == NEEDLE_WORD;
        }
        for (int k = 0; k < NEEDLE.length; k++) {
            if (b[at + k] != NEEDLE[k]) {
                return false;
            }
        }
        return true;
    }

    /**
     * The high bit of every byte of {@code w} that is 0, and of a 0x01 byte just above a 0 one (the borrow of the
     * classic test: cheaper than the exact one, and {@link #pairs}' candidates are compared whole anyway).
     */
    private static long zeroBytes(long w) {
        return (w - ONES_01) & ~w & HIGHS;
    }

    /** Whether a complete usage object was read. */
    public final boolean usageSeen() {
        return usageSeen;
    }

    public final long promptTokens() {
        return promptTokens;
    }

    public final long completionTokens() {
        return completionTokens;
    }

    /** {@code prompt_tokens_details.cached_tokens}, 0 when the engine did not report it. */
    public final long cachedTokens() {
        return Math.max(0, cachedTokens);
    }

    /**
     * Whether the last usage object reported {@code prompt_tokens_details.cached_tokens} (vLLM only with
     * {@code --enable-prompt-tokens-details}): routing-quality accounting counts only answers that say what the
     * engine served from its cache, since a missing count is not a miss.
     */
    public final boolean cachedReported() {
        return usageSeen && cachedTokens >= 0;
    }

    /**
     * One byte through the state machine; returns false when it is back to looking for the needle with nothing of
     * it matched (where {@link #scanUsage(byte[], int, int)} jumps ahead).
     */
    final boolean process(byte b) {
        switch (state) {
            case SEEK -> seek(b);
            case COLON -> {
                if (!whitespace(b)) {
                    if (b == ':') {
                        state = OPEN;
                    } else {
                        restart(b);
                    }
                }
            }
            case OPEN -> {
                if (!whitespace(b)) {
                    if (b == '{') {
                        depth = 1;
                        readPrompt = 0;
                        readCompletion = 0;
                        readCached = -1;
                        state = KEY_OR_END;
                    } else {
                        restart(b); // "usage": null (every SGLang chunk), or not an object
                    }
                }
            }
            case KEY_OR_END -> {
                if (b == '"') {
                    state = KEY;
                    keyPos = 0;
                    candidates = depth == 1 ? TOP_KEYS : DETAIL_KEYS;
                } else if (b == '}') {
                    closeObject();
                } else if (!whitespace(b) && b != ',') {
                    restart(b);
                }
            }
            case KEY -> {
                if (b == '"') {
                    key = keyOf();
                    state = KEY_COLON;
                } else if (b == '\\') {
                    candidates = 0;
                    state = KEY_ESCAPE;
                } else {
                    narrow(b);
                }
            }
            case KEY_ESCAPE -> state = KEY;
            case KEY_COLON -> {
                if (!whitespace(b)) {
                    if (b == ':') {
                        state = VALUE;
                    } else {
                        restart(b);
                    }
                }
            }
            case VALUE -> value(b);
            case NUMBER -> {
                if (b >= '0' && b <= '9') {
                    if (numberValid) {
                        number = number * 10 + (b - '0');
                        numberValid = number <= MAX_COUNT;
                    }
                } else if (b == '.' || b == 'e' || b == 'E' || b == '+' || b == '-') {
                    numberValid = false;
                } else {
                    if (numberValid) {
                        store(number);
                    }
                    state = AFTER_VALUE;
                    process(b);
                }
            }
            case STRING -> {
                if (b == '\\') {
                    state = STRING_ESCAPE;
                } else if (b == '"') {
                    state = AFTER_VALUE;
                }
            }
            case STRING_ESCAPE -> state = STRING;
            case LITERAL -> {
                if (b < 'a' || b > 'z') {
                    state = AFTER_VALUE;
                    process(b);
                }
            }
            case SKIP -> {
                if (b == '"') {
                    state = SKIP_STRING;
                } else if (b == '{' || b == '[') {
                    skipDepth++;
                } else if ((b == '}' || b == ']') && --skipDepth == 0) {
                    state = AFTER_VALUE;
                }
            }
            case SKIP_STRING -> {
                if (b == '\\') {
                    state = SKIP_STRING_ESCAPE;
                } else if (b == '"') {
                    state = SKIP;
                }
            }
            case SKIP_STRING_ESCAPE -> state = SKIP_STRING;
            case AFTER_VALUE -> {
                if (b == ',') {
                    state = KEY_OR_END;
                } else if (b == '}') {
                    closeObject();
                } else if (!whitespace(b)) {
                    restart(b);
                }
            }
            default -> throw new IllegalStateException("usage scanner state " + state);
        }
        return state != SEEK || matched != 0; // false: the caller may jump to the next needle
    }

    private void seek(byte b) {
        if (b == NEEDLE[matched]) {
            if (++matched == NEEDLE.length) {
                matched = 0;
                state = COLON;
            }
        } else {
            matched = b == '"' ? 1 : 0; // the needle's only quote-led prefix is its start
        }
    }

    /** Back to looking for {@code "usage"}, from {@code b} (which may start the needle). */
    private void restart(byte b) {
        state = SEEK;
        matched = 0;
        seek(b);
    }

    private void value(byte b) {
        if (whitespace(b)) {
            return;
        }
        if (b >= '0' && b <= '9') {
            number = b - '0';
            numberValid = true;
            state = NUMBER;
        } else if (b == '-') {
            number = 0;
            numberValid = false; // a negative count is not a count
            state = NUMBER;
        } else if (b == '"') {
            state = STRING;
        } else if (b == '{' && depth == 1 && key == DETAILS) {
            depth = 2;
            state = KEY_OR_END;
        } else if (b == '{' || b == '[') {
            skipDepth = 1;
            state = SKIP;
        } else if (b >= 'a' && b <= 'z') {
            state = LITERAL; // true, false, null
        } else {
            restart(b);
        }
    }

    private void narrow(byte b) {
        int alive = candidates;
        for (int k = 0; k < KEYS.length; k++) {
            if ((alive & 1 << k) != 0 && (keyPos >= KEYS[k].length || KEYS[k][keyPos] != b)) {
                alive &= ~(1 << k);
            }
        }
        candidates = alive;
        keyPos++;
    }

    /** {@link #narrow(byte)} over {@code n} bytes of {@code b} from {@code from}. */
    private void narrow(byte[] b, int from, int n) {
        int alive = candidates;
        for (int k = 0; k < KEYS.length; k++) {
            if ((alive & 1 << k) != 0 && !startsAt(KEYS[k], keyPos, b, from, n)) {
                alive &= ~(1 << k);
            }
        }
        candidates = alive;
        keyPos += n;
    }

    /** Whether {@code key} from {@code pos} goes on with the {@code n} bytes of {@code b} from {@code from}. */
    private static boolean startsAt(byte[] key, int pos, byte[] b, int from, int n) {
        if (n > key.length - pos) {
            return false;
        }
        for (int k = 0; k < n; k++) {
            if (key[pos + k] != b[from + k]) {
                return false;
            }
        }
        return true;
    }

    private int keyOf() {
        for (int k = 0; k < KEYS.length; k++) {
            if ((candidates & 1 << k) != 0 && KEYS[k].length == keyPos) {
                return k;
            }
        }
        return -1;
    }

    private void store(long v) {
        switch (key) {
            case PROMPT -> readPrompt = v;
            case COMPLETION -> readCompletion = v;
            case CACHED -> readCached = v;
            default -> { }
        }
    }

    private void closeObject() {
        if (depth == 2) {
            depth = 1;
            state = AFTER_VALUE;
            return;
        }
        usageSeen = true;
        promptTokens = readPrompt;
        completionTokens = readCompletion;
        cachedTokens = readCached;
        state = SEEK;
        matched = 0;
    }

    private static long needleWord() {
        long w = 0;
        for (int k = NEEDLE.length - 1; k >= 0; k--) {
            w = w << 8 | NEEDLE[k];
        }
        return w;
    }

    private static boolean whitespace(byte b) {
        return b == ' ' || b == '\n' || b == '\r' || b == '\t';
    }
}
