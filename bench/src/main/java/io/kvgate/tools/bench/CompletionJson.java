package io.kvgate.tools.bench;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import java.io.IOException;

/**
 * Reads what the load generator needs from one OpenAI completion object — a whole non-streaming body or one SSE
 * chunk — with Jackson's streaming parser (no tree, no strings unless reply text is wanted): whether it is an error
 * object, whether it has {@code choices}, how much generated text it carries, and the {@code usage} counts.
 *
 * <p>Generated text is any string named {@code content}, {@code text} or {@code reasoning_content} inside a
 * {@code choices} element (chat {@code delta}/{@code message}, completions {@code text}); reasoning tokens count as
 * output because the engine spent decode steps on them. An error is a top-level {@code error} object (OpenAI shape,
 * also what vLLM and the gateway put in a mid-stream error frame) or {@code "object":"error"} (older engines).
 *
 * <p>Threading: single owner; {@link #inspect} fills the caller's {@link Result} and keeps no state between calls.
 */
public final class CompletionJson {
    /** What one JSON object said. Reused by the caller; {@link #clear()} is called by {@link #inspect}. */
    public static final class Result {
        public boolean error;
        public boolean hasChoices;
        public int choiceCount;
        public int contentChars;
        public long promptTokens = -1;
        public long completionTokens = -1;
        public long cachedTokens = -1;
        /** Non-null when the caller wants the generated text (multi-turn history); appended to, never cleared here. */
        public StringBuilder text;

        void clear() {
            error = false;
            hasChoices = false;
            choiceCount = 0;
            contentChars = 0;
            promptTokens = -1;
            completionTokens = -1;
            cachedTokens = -1;
        }

        public boolean hasUsage() {
            return promptTokens >= 0;
        }
    }

    private static final JsonFactory FACTORY = JsonFactory.builder()
        .streamReadConstraints(StreamReadConstraints.builder().maxNestingDepth(64).build())
        .build();

    private CompletionJson() {}

    /**
     * Parses {@code bytes[offset..offset+length)} as one JSON object.
     *
     * @return false when the input is not a single well-formed JSON object (the caller counts it as invalid_json)
     */
    public static boolean inspect(byte[] bytes, int offset, int length, Result out) {
        out.clear();
        try (JsonParser p = FACTORY.createParser(bytes, offset, length)) {
            if (p.nextToken() != JsonToken.START_OBJECT) {
                return false;
            }
            readTop(p, out);
            return p.nextToken() == null;
        } catch (IOException | RuntimeException e) {
            return false;
        }
    }

    private static void readTop(JsonParser p, Result out) throws IOException {
        JsonToken t;
        while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
            String name = p.currentName();
            JsonToken v = p.nextToken();
            switch (name) {
                case "error" -> {
                    if (v != JsonToken.VALUE_NULL) {
                        out.error = true;
                    }
                    p.skipChildren();
                }
                case "object" -> {
                    if (v == JsonToken.VALUE_STRING && "error".equals(p.getText())) {
                        out.error = true;
                    }
                }
                case "choices" -> {
                    if (v == JsonToken.START_ARRAY) {
                        out.hasChoices = true;
                        readChoices(p, out);
                    } else {
                        p.skipChildren();
                    }
                }
                case "usage" -> {
                    if (v == JsonToken.START_OBJECT) {
                        readUsage(p, out);
                    } else {
                        p.skipChildren();
                    }
                }
                default -> p.skipChildren();
            }
        }
        if (t != JsonToken.END_OBJECT) {
            throw new IOException("truncated object");
        }
    }

    private static void readChoices(JsonParser p, Result out) throws IOException {
        JsonToken t;
        while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
            if (t == null) {
                throw new IOException("truncated array");
            }
            out.choiceCount++;
            if (t == JsonToken.START_OBJECT) {
                readTextFields(p, out, 0);
            } else {
                p.skipChildren();
            }
        }
    }

    /** Walks a choice (and its delta/message objects, bounded depth) collecting generated text. */
    private static void readTextFields(JsonParser p, Result out, int depth) throws IOException {
        JsonToken t;
        while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
            String name = p.currentName();
            JsonToken v = p.nextToken();
            if (v == JsonToken.VALUE_STRING
                && (name.equals("content") || name.equals("text") || name.equals("reasoning_content"))) {
                int n = p.getTextLength();
                out.contentChars += n;
                if (out.text != null && n > 0 && !name.equals("reasoning_content")) {
                    out.text.append(p.getTextCharacters(), p.getTextOffset(), n);
                }
            } else if (v == JsonToken.START_OBJECT && depth < 2
                && (name.equals("delta") || name.equals("message"))) {
                readTextFields(p, out, depth + 1);
            } else {
                p.skipChildren();
            }
        }
        if (t != JsonToken.END_OBJECT) {
            throw new IOException("truncated object");
        }
    }

    private static void readUsage(JsonParser p, Result out) throws IOException {
        JsonToken t;
        while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
            String name = p.currentName();
            JsonToken v = p.nextToken();
            if (v == JsonToken.VALUE_NUMBER_INT && name.equals("prompt_tokens")) {
                out.promptTokens = p.getLongValue();
            } else if (v == JsonToken.VALUE_NUMBER_INT && name.equals("completion_tokens")) {
                out.completionTokens = p.getLongValue();
            } else if (v == JsonToken.START_OBJECT && name.equals("prompt_tokens_details")) {
                JsonToken d;
                while ((d = p.nextToken()) == JsonToken.FIELD_NAME) {
                    String detail = p.currentName();
                    JsonToken dv = p.nextToken();
                    if (dv == JsonToken.VALUE_NUMBER_INT && detail.equals("cached_tokens")) {
                        out.cachedTokens = p.getLongValue();
                    } else {
                        p.skipChildren();
                    }
                }
                if (d != JsonToken.END_OBJECT) {
                    throw new IOException("truncated object");
                }
            } else {
                p.skipChildren();
            }
        }
        if (t != JsonToken.END_OBJECT) {
            throw new IOException("truncated object");
        }
    }
}
