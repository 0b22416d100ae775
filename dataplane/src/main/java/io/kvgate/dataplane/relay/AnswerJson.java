package io.kvgate.dataplane.relay;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import io.netty.buffer.ByteBuf;
import java.io.IOException;
import java.nio.charset.StandardCharsets;

/**
 * One engine answer object (a JSON completion body, or one SSE chunk's payload) read with Jackson's streaming parser
 * for what an {@link io.kvgate.dataplane.request.AnswerRewrite} changes, and written back as the engine's own bytes with only those values spliced:
 * the top-level {@code model}, each choice's {@code index} (greedy replication copies each choice n times), and
 * {@code usage}'s {@code completion_tokens}, {@code total_tokens} and {@code completion_tokens_details} counts
 * (×n). No tree is built and nothing else is re-serialized; member order, spacing and every other field stay the
 * engine's. Reused for every payload of one answer (its arrays grow to the largest choice count). Event-loop only.
 */
public final class AnswerJson {
    private static final JsonFactory FACTORY = JsonFactory.builder().build();

    // ---- what the last scan found (offsets into the scanned array) ----
    int modelStart;
    int modelEnd;
    boolean error;
    int choicesStart;
    int choicesEnd;
    int choiceCount;
    int[] choiceStart = new int[4];
    int[] choiceEnd = new int[4];
    int[] indexStart = new int[4];
    int[] indexEnd = new int[4];
    int[] indexValue = new int[4];
    int usageStart;
    int usageEnd;
    int promptStart;
    int promptEnd;
    long prompt;
    int completionStart;
    int completionEnd;
    long completion;
    int totalStart;
    int totalEnd;
    int detailCount;
    int[] detailStart = new int[4];
    int[] detailEnd = new int[4];
    long[] detailValue = new long[4];

    private byte[] src;
    private int base;
    private int end;

    /**
     * Scans {@code bytes[off, off+len)} as one JSON object. Returns false when it is not one (nothing is rewritten
     * then: the caller forwards it as it came).
     */
    boolean scan(byte[] bytes, int off, int len) {
        reset();
        src = bytes;
        base = off;
        end = off + len;
        try (JsonParser p = FACTORY.createParser(bytes, off, len)) {
            if (p.nextToken() != JsonToken.START_OBJECT) {
                return false;
            }
            JsonToken t;
            while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
                String name = p.currentName();
                JsonToken v = p.nextToken();
                switch (name) {
                    case "model" -> {
                        modelStart = -1;
                        if (v == JsonToken.VALUE_STRING) {
                            p.finishToken();
                            modelStart = at(p);
                            modelEnd = end(p);
                        }
                    }
                    case "error" -> {
                        error = v != JsonToken.VALUE_NULL;
                        p.skipChildren();
                    }
                    case "choices" -> choices(p, v);
                    case "usage" -> usage(p, v);
                    default -> p.skipChildren();
                }
            }
            return t == JsonToken.END_OBJECT && p.nextToken() == null;
        } catch (IOException e) {
            return false;
        }
    }

    private void reset() {
        modelStart = -1;
        error = false;
        choicesStart = -1;
        choiceCount = 0;
        usageStart = -1;
        resetUsage();
    }

    private void resetUsage() {
        promptStart = -1;
        completionStart = -1;
        totalStart = -1;
        detailCount = 0;
        prompt = 0;
        completion = 0;
    }

    private int at(JsonParser p) {
        return base + (int) p.currentTokenLocation().getByteOffset();
    }

    /** Just past the current token (strings: call {@code finishToken} first; the parser reads them lazily). */
    private int end(JsonParser p) {
        return base + (int) p.currentLocation().getByteOffset();
    }

    private void choices(JsonParser p, JsonToken v) throws IOException {
        choicesStart = -1;
        choiceCount = 0;
        if (v != JsonToken.START_ARRAY) {
            p.skipChildren();
            return;
        }
        int start = at(p);
        JsonToken e;
        while ((e = p.nextToken()) != JsonToken.END_ARRAY) {
            if (e == null) {
                throw new IOException("unterminated choices");
            }
            grow();
            int c = choiceCount++;
            choiceStart[c] = at(p);
            indexStart[c] = -1;
            if (e == JsonToken.START_OBJECT) {
                while (p.nextToken() == JsonToken.FIELD_NAME) {
                    String name = p.currentName();
                    JsonToken cv = p.nextToken();
                    if (name.equals("index") && cv == JsonToken.VALUE_NUMBER_INT) {
                        indexStart[c] = at(p);
                        indexEnd[c] = end(p);
                        indexValue[c] = p.getIntValue();
                    } else {
                        p.skipChildren();
                    }
                }
                choiceEnd[c] = at(p) + 1;
            } else if (e == JsonToken.START_ARRAY) {
                p.skipChildren();
                choiceEnd[c] = at(p) + 1;
            } else {
                p.finishToken();
                choiceEnd[c] = end(p);
            }
        }
        choicesStart = start;
        choicesEnd = at(p) + 1;
    }

    private void usage(JsonParser p, JsonToken v) throws IOException {
        usageStart = -1;
        resetUsage();
        if (v != JsonToken.START_OBJECT) {
            p.skipChildren();
            return;
        }
        int start = at(p);
        while (p.nextToken() == JsonToken.FIELD_NAME) {
            String name = p.currentName();
            JsonToken uv = p.nextToken();
            boolean integer = uv == JsonToken.VALUE_NUMBER_INT;
            switch (name) {
                case "prompt_tokens" -> {
                    if (integer) {
                        promptStart = at(p);
                        promptEnd = end(p);
                        prompt = p.getLongValue();
                    }
                }
                case "completion_tokens" -> {
                    if (integer) {
                        completionStart = at(p);
                        completionEnd = end(p);
                        completion = p.getLongValue();
                    }
                }
                case "total_tokens" -> {
                    if (integer) {
                        totalStart = at(p);
                        totalEnd = end(p);
                    }
                }
                case "completion_tokens_details" -> {
                    if (uv == JsonToken.START_OBJECT) {
                        while (p.nextToken() == JsonToken.FIELD_NAME) {
                            if (p.nextToken() == JsonToken.VALUE_NUMBER_INT) {
                                growDetails();
                                detailStart[detailCount] = at(p);
                                detailEnd[detailCount] = end(p);
                                detailValue[detailCount++] = p.getLongValue();
                            } else {
                                p.skipChildren();
                            }
                        }
                    } else {
                        p.skipChildren();
                    }
                }
                default -> p.skipChildren();
            }
        }
        usageStart = start;
        usageEnd = at(p) + 1;
    }

    private void grow() {
        if (choiceCount == choiceStart.length) {
            int n = choiceCount * 2;
            choiceStart = java.util.Arrays.copyOf(choiceStart, n);
            choiceEnd = java.util.Arrays.copyOf(choiceEnd, n);
            indexStart = java.util.Arrays.copyOf(indexStart, n);
            indexEnd = java.util.Arrays.copyOf(indexEnd, n);
            indexValue = java.util.Arrays.copyOf(indexValue, n);
        }
    }

    private void growDetails() {
        if (detailCount == detailStart.length) {
            int n = detailCount * 2;
            detailStart = java.util.Arrays.copyOf(detailStart, n);
            detailEnd = java.util.Arrays.copyOf(detailEnd, n);
            detailValue = java.util.Arrays.copyOf(detailValue, n);
        }
    }

    /** A usage-only chunk: {@code "choices": []} with a usage object (the stream's final usage chunk). */
    boolean usageOnly() {
        return choicesStart >= 0 && choiceCount == 0 && usageStart >= 0;
    }

    // ---- writing ---------------------------------------------------------------------------------------------

    private static final int MODEL = 0;
    private static final int NUMBER = 1;
    private static final int CHOICES = 2;
    private int spliceCount;
    private int[] spliceStart = new int[8];
    private int[] spliceEnd = new int[8];
    private int[] spliceKind = new int[8];
    private long[] spliceValue = new long[8];

    /**
     * Writes the scanned object to {@code out} with these edits, every other byte as scanned:
     *
     * @param clientModel      the {@code model} value to write (a JSON string), or null to keep the engine's
     * @param n                copies per engine choice
     * @param replica          ≥ 0: this is copy {@code replica} of a chunk, each choice index {@code j} written as
     *                         {@code j·n + replica}; -1: indices unchanged
     * @param replicateChoices a JSON answer: its choices array is written with the n copies of each choice in place
     *                         of each one (indices {@code j·n .. j·n+n−1})
     * @param usageFactor      usage's completion counts are multiplied by it, {@code total_tokens} recomputed with
     *                         the prompt counted once (1: unchanged). Only whole-answer usage is multiplied: a
     *                         chunk's continuous usage counts one choice, which each copy is
     */
    void write(ByteBuf out, byte[] clientModel, int n, int replica, boolean replicateChoices, int usageFactor) {
        spliceCount = 0;
        if (clientModel != null && modelStart >= 0) {
            splice(modelStart, modelEnd, MODEL, 0);
        }
        if (replicateChoices && n > 1 && choicesStart >= 0) {
            splice(choicesStart, choicesEnd, CHOICES, 0);
        } else if (replica >= 0) {
            for (int c = 0; c < choiceCount; c++) {
                if (indexStart[c] >= 0) {
                    splice(indexStart[c], indexEnd[c], NUMBER, (long) indexValue[c] * n + replica);
                }
            }
        }
        if (usageFactor > 1 && usageStart >= 0) {
            if (completionStart >= 0) {
                splice(completionStart, completionEnd, NUMBER, completion * usageFactor);
            }
            if (totalStart >= 0 && promptStart >= 0) {
                splice(totalStart, totalEnd, NUMBER, prompt + completion * usageFactor); // the prompt counts once
            }
            for (int d = 0; d < detailCount; d++) {
                splice(detailStart[d], detailEnd[d], NUMBER, detailValue[d] * usageFactor);
            }
        }
        sortSplices();
        int from = base;
        for (int i = 0; i < spliceCount; i++) {
            out.writeBytes(src, from, spliceStart[i] - from);
            switch (spliceKind[i]) {
                case MODEL -> out.writeBytes(clientModel);
                case NUMBER -> writeLong(out, spliceValue[i]);
                default -> writeReplicatedChoices(out, n);
            }
            from = spliceEnd[i];
        }
        out.writeBytes(src, from, end - from);
    }

    private void splice(int start, int stop, int kind, long value) {
        if (spliceCount == spliceStart.length) {
            int n = spliceCount * 2;
            spliceStart = java.util.Arrays.copyOf(spliceStart, n);
            spliceEnd = java.util.Arrays.copyOf(spliceEnd, n);
            spliceKind = java.util.Arrays.copyOf(spliceKind, n);
            spliceValue = java.util.Arrays.copyOf(spliceValue, n);
        }
        spliceStart[spliceCount] = start;
        spliceEnd[spliceCount] = stop;
        spliceKind[spliceCount] = kind;
        spliceValue[spliceCount++] = value;
    }

    /** Insertion sort by start: a handful of splices, mostly in order already. */
    private void sortSplices() {
        for (int i = 1; i < spliceCount; i++) {
            for (int j = i; j > 0 && spliceStart[j - 1] > spliceStart[j]; j--) {
                swap(spliceStart, j);
                swap(spliceEnd, j);
                swap(spliceKind, j);
                long v = spliceValue[j];
                spliceValue[j] = spliceValue[j - 1];
                spliceValue[j - 1] = v;
            }
        }
    }

    private static void swap(int[] a, int j) {
        int t = a[j];
        a[j] = a[j - 1];
        a[j - 1] = t;
    }

    private void writeReplicatedChoices(ByteBuf out, int n) {
        out.writeByte('[');
        for (int c = 0; c < choiceCount; c++) {
            for (int i = 0; i < n; i++) {
                if (c > 0 || i > 0) {
                    out.writeByte(',');
                }
                if (indexStart[c] < 0) {
                    out.writeBytes(src, choiceStart[c], choiceEnd[c] - choiceStart[c]);
                } else {
                    out.writeBytes(src, choiceStart[c], indexStart[c] - choiceStart[c]);
                    writeLong(out, (long) indexValue[c] * n + i);
                    out.writeBytes(src, indexEnd[c], choiceEnd[c] - indexEnd[c]);
                }
            }
        }
        out.writeByte(']');
    }

    /**
     * A whole JSON answer (non-streamed) with the rewrite applied: {@code model} written back, the choices array
     * replicated, usage ×n. Not a JSON object, or an error body: returned as it is.
     */
    public static String rewriteAnswer(String json, io.kvgate.dataplane.request.AnswerRewrite rw) {
        byte[] bytes = json.getBytes(StandardCharsets.UTF_8);
        AnswerJson a = new AnswerJson();
        if (!a.scan(bytes, 0, bytes.length) || a.error) {
            return json;
        }
        ByteBuf out = io.netty.buffer.Unpooled.buffer(bytes.length * Math.max(1, Math.min(rw.replicas(), 64)) + 64);
        try {
            a.write(out, rw.clientModelJson(), rw.replicas(), -1, true, rw.replicas());
            return out.toString(StandardCharsets.UTF_8);
        } finally {
            out.release();
        }
    }

    private static void writeLong(ByteBuf out, long v) {
        out.writeCharSequence(Long.toString(v), StandardCharsets.US_ASCII);
    }
}
