package io.kvgate.dataplane.relay;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import java.io.IOException;
import java.nio.charset.StandardCharsets;

/**
 * Mid-stream failover's view of a relayed SSE stream (issue #41), on the complete events {@link SseFramer} releases,
 * before anything else reads them. It keeps what a continuation needs (the generated text, the token ids when the
 * engine reports them, how many tokens were generated, whether a tool call is open or the choice finished) and turns
 * the streams of several engines into the one stream the client sees:
 * <ul>
 *   <li>the first engine's events pass byte for byte; an in-stream error event (and whatever follows it) is held
 *       back and reported ({@link #wantsContinuation}) instead of reaching the client, as is the end of a stream that
 *       neither finished its choice nor sent {@code [DONE]};</li>
 *   <li>a continuing engine's events get the first engine's {@code id}, {@code created} and {@code model}; its chat
 *       role chunk and its {@code prompt_token_ids} (the prompt it saw is the original plus the carried text) are
 *       dropped; a {@code usage} object counts the carried tokens in {@code completion_tokens} and the original
 *       prompt in {@code prompt_tokens} (its ids' count when reported, else the continuation's prompt minus the
 *       carried tokens); its {@code [DONE]} is the stream's one.</li>
 * </ul>
 * Each event is read with Jackson (a rule with failover pays a parse per event; a rule without has no stitch).
 * Single choice only (requests with {@code n} &gt; 1 are never continued). Event-loop only; one per stream.
 */
public final class StreamStitch {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final byte[] DATA = "data: ".getBytes(StandardCharsets.US_ASCII);

    private final boolean chat;
    private String id;
    private JsonNode created;
    private String model;
    private final StringBuilder text = new StringBuilder();
    private int[] ids = new int[64];
    private int idCount;
    /** Every output event so far carried its token ids (vLLM {@code return_token_ids}). */
    private boolean idsComplete = true;
    private int[] promptIds;
    /** Tokens generated on earlier legs (carried into the continuation). */
    private int carried;
    /** This leg: events with output, ids reported, the last usage's completion tokens (continuous usage), or -1. */
    private int legOutputEvents;
    private int legIds;
    private long legUsageCompletion = -1;
    private int leg;
    private boolean finished;
    private boolean toolCall;
    private boolean engineError;
    private String engineErrorText;
    private boolean endedEarly;
    private boolean done;

    public StreamStitch(boolean chat) {
        this.chat = chat;
    }

    /** The complete events of the current leg, as they go on to the client (takes over {@code events}). */
    public ByteBuf onEvents(ByteBufAllocator alloc, ByteBuf events) {
        if (!events.isReadable()) {
            return events;
        }
        if (engineError) {
            events.release();
            return Unpooled.EMPTY_BUFFER;
        }
        ByteBuf out = alloc.buffer(events.readableBytes() + 64);
        int from = events.readerIndex();
        int to = events.writerIndex();
        while (from < to) {
            int next = from + firstEventEnd(events, from, to);
            onEvent(events, from, next, out);
            from = next;
            if (engineError) {
                break;
            }
        }
        events.release();
        return out;
    }

    /** The end of the first event starting at {@code from} (relative to {@code from}), or to-from when unterminated. */
    private static int firstEventEnd(ByteBuf b, int from, int to) {
        for (int i = from; i + 1 < to; i++) {
            if (b.getByte(i) == '\n' && b.getByte(i + 1) == '\n') {
                return i + 2 - from;
            }
            if (i + 3 < to && b.getByte(i) == '\r' && b.getByte(i + 1) == '\n' && b.getByte(i + 2) == '\r'
                && b.getByte(i + 3) == '\n') {
                return i + 4 - from;
            }
        }
        return to - from;
    }

    private void onEvent(ByteBuf events, int from, int to, ByteBuf out) {
        String event = events.toString(from, to - from, StandardCharsets.UTF_8);
        String data = dataOf(event);
        if (data == null) {
            out.writeBytes(events, from, to - from); // a comment or a blank: as it came
            return;
        }
        if (data.equals("[DONE]")) {
            done = true;
            out.writeBytes(events, from, to - from);
            return;
        }
        JsonNode n;
        try {
            n = JSON.readTree(data);
        } catch (IOException e) {
            out.writeBytes(events, from, to - from);
            return;
        }
        if (!(n instanceof ObjectNode o)) {
            out.writeBytes(events, from, to - from);
            return;
        }
        if (o.has("error") || "error".equals(o.path("object").asText())) {
            engineError = true;
            engineErrorText = data;
            return;
        }
        observe(o);
        if (leg == 0) {
            out.writeBytes(events, from, to - from);
            return;
        }
        if (rewriteContinued(o)) {
            out.writeBytes(DATA).writeBytes(o.toString().getBytes(StandardCharsets.UTF_8)).writeByte('\n').writeByte('\n');
        }
    }

    /** The event's data (its {@code data:} lines joined), or null when it has none. */
    private static String dataOf(String event) {
        StringBuilder sb = null;
        for (String line : event.split("\r?\n")) {
            if (line.startsWith("data:")) {
                String v = line.substring(5);
                if (v.startsWith(" ")) {
                    v = v.substring(1);
                }
                if (sb == null) {
                    sb = new StringBuilder(v);
                } else {
                    sb.append('\n').append(v);
                }
            }
        }
        return sb == null ? null : sb.toString();
    }

    private void observe(ObjectNode o) {
        if (leg == 0) {
            if (id == null && o.hasNonNull("id")) {
                id = o.get("id").asText();
                created = o.get("created");
                model = o.hasNonNull("model") ? o.get("model").asText() : null;
            }
            if (promptIds == null && o.path("prompt_token_ids").isArray()) {
                promptIds = intArray(o.get("prompt_token_ids"));
            }
        }
        JsonNode usage = o.get("usage");
        if (usage != null && usage.isObject() && usage.path("completion_tokens").canConvertToLong()) {
            legUsageCompletion = usage.get("completion_tokens").asLong();
        }
        for (JsonNode c : o.path("choices")) {
            if (leg == 0 && promptIds == null && c.path("prompt_token_ids").isArray()) {
                promptIds = intArray(c.get("prompt_token_ids"));
            }
            String piece = chat ? textOf(c.path("delta").get("content")) : textOf(c.get("text"));
            if (chat && c.path("delta").path("tool_calls").isArray() && !c.path("delta").path("tool_calls").isEmpty()) {
                toolCall = true;
            }
            JsonNode tokenIds = c.get("token_ids");
            if (tokenIds != null && tokenIds.isArray()) {
                for (JsonNode t : tokenIds) {
                    addId(t.asInt());
                }
                legIds += tokenIds.size();
            } else if (!piece.isEmpty()) {
                idsComplete = false;
            }
            if (!piece.isEmpty()) {
                text.append(piece);
                legOutputEvents++;
            }
            if (c.hasNonNull("finish_reason")) {
                finished = true;
            }
        }
    }

    /** A continuing leg's event made into the client's stream; false when it is dropped. */
    private boolean rewriteContinued(ObjectNode o) {
        JsonNode choices = o.get("choices");
        if (chat && choices != null && choices.size() == 1) {
            JsonNode c = choices.get(0);
            JsonNode d = c.path("delta");
            boolean roleOnly = d.has("role") && !d.path("role").isNull() && textOf(d.get("content")).isEmpty()
                && !c.hasNonNull("finish_reason") && !(d.path("tool_calls").isArray() && !d.get("tool_calls").isEmpty());
            if (roleOnly && !o.path("usage").isObject()) {
                return false; // the client had its role chunk from the first engine
            }
        }
        if (id != null) {
            o.put("id", id);
        }
        if (created != null) {
            o.set("created", created);
        }
        if (model != null) {
            o.put("model", model);
        }
        o.remove("prompt_token_ids");
        if (choices != null) {
            for (JsonNode c : choices) {
                if (c instanceof ObjectNode co) {
                    co.remove("prompt_token_ids");
                }
            }
        }
        JsonNode usage = o.get("usage");
        if (usage instanceof ObjectNode u && u.path("completion_tokens").canConvertToLong()) {
            long completion = u.get("completion_tokens").asLong() + carried;
            long prompt = promptIds != null ? promptIds.length
                : Math.max(0, u.path("prompt_tokens").asLong() - carried);
            u.put("prompt_tokens", prompt);
            u.put("completion_tokens", completion);
            u.put("total_tokens", prompt + completion);
        }
        return true;
    }

    private static String textOf(JsonNode v) {
        return v != null && v.isTextual() ? v.asText() : "";
    }

    private void addId(int t) {
        if (idCount == ids.length) {
            ids = java.util.Arrays.copyOf(ids, ids.length * 2);
        }
        ids[idCount++] = t;
    }

    private static int[] intArray(JsonNode a) {
        int[] out = new int[a.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = a.get(i).asInt();
        }
        return out;
    }

    /** The leg's stream ended (its last bytes were passed in): without [DONE] or a finished choice it ended early. */
    public void onLegEnd() {
        if (!done && !finished && !engineError) {
            endedEarly = true;
        }
    }

    /** The current leg failed in-stream (an error event, or an early end): the exchange decides whether to continue. */
    public boolean wantsContinuation() {
        return engineError || endedEarly;
    }

    /** Whether the leg's failure was an error event (else an early end). */
    public boolean engineError() {
        return engineError;
    }

    /** The engine's error event's data (for the error frame when the stream is not continued), or null. */
    public String engineErrorText() {
        return engineErrorText;
    }

    /** Whether the choice finished (nothing is left to continue). */
    public boolean finished() {
        return finished;
    }

    /** Whether a tool call was being streamed (its parsing state is the engine's: never continued). */
    public boolean toolCallOpen() {
        return toolCall;
    }

    /** The text generated so far, across legs. */
    public String generatedText() {
        return text.toString();
    }

    /** The generated tokens' ids across legs, or null when some output came without ids. */
    public int[] generatedIds() {
        return idsComplete && idCount > 0 ? java.util.Arrays.copyOf(ids, idCount) : null;
    }

    /** The prompt's ids as the first engine reported them, or null. */
    public int[] promptIds() {
        return promptIds == null ? null : promptIds.clone();
    }

    /** Tokens generated so far across legs: usage when the engine streamed it, else ids, else output events. */
    public int generatedTokens() {
        return carried + legTokens();
    }

    private int legTokens() {
        if (legUsageCompletion >= 0) {
            return (int) legUsageCompletion;
        }
        return idsComplete && legIds > 0 ? legIds : legOutputEvents;
    }

    /** Whether the current leg has produced output (text or token ids) yet. */
    public boolean legHasOutput() {
        return legOutputEvents > 0 || legIds > 0;
    }

    /** Which leg the stream is on (0: the first engine's). */
    public int leg() {
        return leg;
    }

    /** The stream continues on another engine: what was generated is carried, the new leg starts clean. */
    public void nextLeg() {
        carried += legTokens();
        legOutputEvents = 0;
        legIds = 0;
        legUsageCompletion = -1;
        engineError = false;
        engineErrorText = null;
        endedEarly = false;
        done = false;
        leg++;
    }
}
