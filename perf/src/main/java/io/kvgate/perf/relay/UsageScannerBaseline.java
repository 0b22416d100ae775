package io.kvgate.perf.relay;

import io.netty.buffer.ByteBuf;
import io.netty.util.ByteProcessor;
import java.nio.charset.StandardCharsets;

/**
 * BASELINE for {@code UsageScanBench}: the usage scanner as it was at 14d541a (a Netty {@code indexOf} per quote and
 * a {@code forEachByte} walk from it), kept verbatim but for its name and package (and a
 * javadoc link made plain text) so the bench measures old and new in one run.
 *
 * <p>The token usage of an engine's answer, read from the bytes on their way to the client (issue #13 item 5,
 * {@code kvgate_tokens_total}): a byte-at-a-time state machine that finds a {@code "usage": {…}} member and reads
 * its {@code prompt_tokens}, {@code completion_tokens} and {@code prompt_tokens_details.cached_tokens}, whatever way
 * the bytes are split into chunks (it stops and resumes at any byte). The last complete usage object wins: a
 * stream's final usage chunk (cumulative) comes after any per-chunk usage, and a JSON answer has one.
 *
 * <p>Why a hand-written scanner: it runs on the relay's byte-for-byte path, which must not parse JSON or allocate
 * per request; the scanner holds a few primitives (the response object carries it, {@code ClientResponse} extends
 * it) and touches each byte once. It is not a JSON validator: bytes it does not expect send it back to looking for
 * the next {@code "usage"}. {@code "usage"} followed by {@code :} can only be a member name: inside a JSON string
 * every quote is escaped, so the quote after {@code usage} would be preceded by a backslash. Event-loop only.
 */
final class UsageScannerBaseline implements ByteProcessor {
    private static final byte[] NEEDLE = "\"usage\"".getBytes(StandardCharsets.US_ASCII);
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
    private long readCached;

    private boolean usageSeen;
    private long promptTokens;
    private long completionTokens;
    private long cachedTokens;

    /**
     * Feeds the readable bytes of {@code buf} (its indices are not moved). While looking for the needle with nothing
     * of it matched, only a quote can start it, so the scan jumps to the next quote (Netty's {@code indexOf} reads
     * eight bytes at a time) instead of visiting every byte of the answer's text: {@link #process} stops the walk
     * whenever it is back in that state.
     */
    final void scanUsage(ByteBuf buf) {
        int i = buf.readerIndex();
        int end = buf.writerIndex();
        while (i < end) {
            if (state == SEEK && matched == 0) {
                i = buf.indexOf(i, end, (byte) '"');
                if (i < 0) {
                    return;
                }
            }
            int stopped = buf.forEachByte(i, end - i, this);
            if (stopped < 0) {
                return;
            }
            i = stopped + 1;
        }
    }

    final void scanUsage(byte[] bytes, int off, int len) {
        for (int i = off; i < off + len; i++) {
            process(bytes[i]);
        }
    }

    /** Whether a complete usage object was read. */
    final boolean usageSeen() {
        return usageSeen;
    }

    final long promptTokens() {
        return promptTokens;
    }

    final long completionTokens() {
        return completionTokens;
    }

    /** {@code prompt_tokens_details.cached_tokens}, 0 when the engine did not report it. */
    final long cachedTokens() {
        return cachedTokens;
    }

    @Override
    public final boolean process(byte b) {
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
                        readCached = 0;
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
        return state != SEEK || matched != 0; // false: the caller may jump to the next quote
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

    private static boolean whitespace(byte b) {
        return b == ' ' || b == '\n' || b == '\r' || b == '\t';
    }
}
