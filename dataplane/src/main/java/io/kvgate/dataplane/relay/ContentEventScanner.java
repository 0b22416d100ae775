package io.kvgate.dataplane.relay;

import io.netty.buffer.ByteBuf;
import io.netty.util.ByteProcessor;
import java.nio.charset.StandardCharsets;

/**
 * Counts the SSE events of a stream that carry generated output, for time to first token and inter-token latency:
 * an event whose JSON has a non-empty string {@code "content"}, {@code "text"} or {@code "reasoning_content"}, or a
 * non-empty {@code "tool_calls"} array. The role-only first chunk ({@code "content": ""} or {@code null}), the usage
 * chunk, error events, comments and {@code [DONE]} are not output.
 *
 * <p>A byte-at-a-time state machine that stops and resumes at any byte, so an event split anywhere across reads is
 * counted once, when its blank line arrives. It tracks JSON strings from their opening quote (keys and values
 * alike, escapes skipped), so a member name is only ever matched as a name: text inside a value cannot look like one.
 * A raw newline cannot occur inside a JSON string, so every line starts outside one (a malformed event cannot
 * desynchronize the next). Allocates nothing; one per exchange. Event-loop only.
 */
final class ContentEventScanner implements ByteProcessor {
    private static final byte[][] STRING_KEYS = {
        "content".getBytes(StandardCharsets.US_ASCII),
        "text".getBytes(StandardCharsets.US_ASCII),
        "reasoning_content".getBytes(StandardCharsets.US_ASCII),
    };
    private static final byte[] TOOL_CALLS = "tool_calls".getBytes(StandardCharsets.US_ASCII);
    private static final int MAX_KEY = 17;

    private static final int SEEK = 0;
    private static final int STRING = 1;
    private static final int STRING_ESCAPE = 2;
    private static final int COLON = 3;
    private static final int VALUE = 4;
    private static final int FIRST_CHAR = 5;
    private static final int ARRAY_FIRST = 6;

    private int state = SEEK;
    /** The string being read may be a member name: its first {@link #MAX_KEY} bytes are kept. */
    private final byte[] key = new byte[MAX_KEY];
    private int keyLength;
    /** What the matched name's value must be: 1 a non-empty string, 2 a non-empty array. */
    private int wanted;
    private boolean eventHasOutput;
    /** The current line is empty so far (a second newline ends the event). */
    private boolean lineEmpty = true;
    private int completed;

    /** Scans {@code buf}'s readable bytes (not consumed); returns the output events that ended in them. */
    int scan(ByteBuf buf) {
        completed = 0;
        if (buf.isReadable()) {
            buf.forEachByte(this);
        }
        return completed;
    }

    @Override
    public boolean process(byte b) {
        if (b == '\n') {
            if (lineEmpty) {
                if (eventHasOutput) {
                    completed++;
                }
                eventHasOutput = false;
            }
            lineEmpty = true;
            state = SEEK;
            return true;
        }
        if (b != '\r') {
            lineEmpty = false;
        }
        switch (state) {
            case SEEK -> {
                if (b == '"') {
                    state = STRING;
                    keyLength = 0;
                }
            }
            case STRING -> {
                if (b == '\\') {
                    state = STRING_ESCAPE;
                    keyLength = MAX_KEY + 1; // an escaped name is none of ours
                } else if (b == '"') {
                    wanted = matchedKey();
                    state = wanted == 0 ? SEEK : COLON;
                } else if (keyLength < MAX_KEY) {
                    key[keyLength++] = b;
                } else {
                    keyLength = MAX_KEY + 1;
                }
            }
            case STRING_ESCAPE -> state = STRING;
            case COLON -> {
                if (b == ':') {
                    state = VALUE;
                } else if (!space(b)) {
                    state = b == '"' ? STRING : SEEK; // it was a value: this quote opens the next string
                    keyLength = 0;
                }
            }
            case VALUE -> {
                if (space(b)) {
                    return true;
                }
                if (b == '"') {
                    state = wanted == 1 ? FIRST_CHAR : STRING;
                    keyLength = MAX_KEY + 1;
                } else if (b == '[' && wanted == 2) {
                    state = ARRAY_FIRST;
                } else {
                    state = SEEK;
                }
            }
            case FIRST_CHAR -> {
                if (b == '"') {
                    state = SEEK; // "": nothing generated
                } else {
                    eventHasOutput = true;
                    state = b == '\\' ? STRING_ESCAPE : STRING; // the rest of the string is skipped as any string
                    keyLength = MAX_KEY + 1;
                }
            }
            case ARRAY_FIRST -> {
                if (!space(b)) {
                    eventHasOutput |= b != ']';
                    state = b == '"' ? STRING : SEEK;
                    keyLength = MAX_KEY + 1;
                }
            }
            default -> throw new IllegalStateException("state " + state);
        }
        return true;
    }

    private static boolean space(byte b) {
        return b == ' ' || b == '\t' || b == '\r';
    }

    /** 1 when the string just read names a string member we look for, 2 for tool_calls, else 0. */
    private int matchedKey() {
        if (keyLength > MAX_KEY) {
            return 0;
        }
        for (byte[] k : STRING_KEYS) {
            if (same(k)) {
                return 1;
            }
        }
        return same(TOOL_CALLS) ? 2 : 0;
    }

    private boolean same(byte[] k) {
        if (k.length != keyLength) {
            return false;
        }
        for (int i = 0; i < keyLength; i++) {
            if (key[i] != k[i]) {
                return false;
            }
        }
        return true;
    }
}
