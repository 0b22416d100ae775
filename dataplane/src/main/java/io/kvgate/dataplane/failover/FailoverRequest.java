package io.kvgate.dataplane.failover;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * One request's side of mid-stream failover (issue #41): whether it may be continued elsewhere at all, and the body
 * that continues it. The client's body (as the gateway sends it to engines) is read once, when the request starts.
 *
 * <p><b>Refused</b> (the stream ends with today's error frame): {@code n} &gt; 1 or {@code best_of} &gt; 1 (choices
 * that already diverged cannot be resumed as one), several prompts in one completions request, guided decoding
 * ({@code response_format} other than text, {@code guided_*}, {@code structured_outputs}: the grammar's state is the
 * engine's), logprobs ({@code logprobs}, {@code top_logprobs}, {@code prompt_logprobs}: the continued part would be
 * scored against another prefix), {@code echo}, and the client's opt-out {@code X-Kvgate-Failover: off}. At the
 * moment of the failure a tool call in progress and a token-id prompt whose generated ids the engine did not report
 * are refused too ({@link #continuation}).
 *
 * <p><b>The continuation</b>: the original prompt plus everything generated so far, with the remaining budget
 * ({@code max_tokens} / {@code max_completion_tokens} lowered by the tokens generated): for completions the generated
 * token ids appended to the prompt's ids when the engine reported both ({@code return_token_ids}), else the generated
 * text appended to a text prompt; for chat an assistant message holding the generated text with
 * {@code continue_final_message: true} and {@code add_generation_prompt: false} (vLLM, SGLang).
 */
public final class FailoverRequest {
    /** The request header that turns failover off for one request. */
    public static final String OPT_OUT_HEADER = "x-kvgate-failover";
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final List<String> GUIDED = List.of("guided_json", "guided_regex", "guided_choice", "guided_grammar",
        "guided_decoding_backend", "guided_whitespace_pattern", "structured_outputs", "regex", "ebnf", "json_schema");

    private final ObjectNode body;
    private final boolean chat;
    private final String refusal;

    private FailoverRequest(ObjectNode body, boolean chat, String refusal) {
        this.body = body;
        this.chat = chat;
        this.refusal = refusal;
    }

    /**
     * Reads the request: {@code engineContinuesChat} says whether the rule's engines continue an assistant message
     * ({@code continue_final_message}); {@code optOutHeader} is the request's {@link #OPT_OUT_HEADER} value or null.
     */
    public static FailoverRequest of(byte[] bodyBytes, boolean chat, String optOutHeader, boolean engineContinuesChat) {
        if (optOutHeader != null && optOutHeader.trim().equalsIgnoreCase("off")) {
            return new FailoverRequest(null, chat, "opted_out");
        }
        JsonNode n;
        try {
            n = JSON.readTree(bodyBytes);
        } catch (IOException e) {
            return new FailoverRequest(null, chat, "unreadable_body");
        }
        if (!(n instanceof ObjectNode o)) {
            return new FailoverRequest(null, chat, "unreadable_body");
        }
        return new FailoverRequest(o, chat, refusalOf(o, chat, engineContinuesChat));
    }

    /** Whether the client asked for a stream ({@code "stream": true}); false when the body was not read. */
    public boolean streamed() {
        return body != null && body.path("stream").asBoolean(false);
    }

    private static String refusalOf(ObjectNode o, boolean chat, boolean engineContinuesChat) {
        if (o.path("n").asInt(1) > 1 || o.path("best_of").asInt(1) > 1) {
            return "n_gt_1";
        }
        JsonNode prompt = o.get("prompt");
        if (!chat && prompt != null && prompt.isArray() && !prompt.isEmpty() && !prompt.get(0).isIntegralNumber()) {
            return prompt.size() > 1 ? "several_prompts" : null;
        }
        JsonNode rf = o.get("response_format");
        if (rf != null && rf.isObject() && !"text".equals(rf.path("type").asText("text"))) {
            return "guided_decoding";
        }
        for (String g : GUIDED) {
            if (o.hasNonNull(g)) {
                return "guided_decoding";
            }
        }
        JsonNode lp = o.get("logprobs");
        if ((lp != null && (lp.asBoolean(false) || (lp.isNumber() && lp.asInt() > 0))) || o.hasNonNull("top_logprobs")
            && o.get("top_logprobs").asInt(0) > 0 || o.hasNonNull("prompt_logprobs")) {
            return "logprobs";
        }
        if (o.path("echo").asBoolean(false)) {
            return "echo";
        }
        if (chat && !engineContinuesChat) {
            return "engine_cannot_continue_chat";
        }
        return null;
    }

    /** Why this request is never continued (a metric label), or null: it may be. */
    public String refusal() {
        return refusal;
    }

    /**
     * The body that continues the generation after {@code generatedText} ({@code generatedIds} the ids of the same
     * tokens, null when the engine did not report them all; {@code promptIds} the prompt's, null when not reported),
     * {@code generatedTokens} tokens of the budget used. Null when this request has no form that can carry it (a
     * token-id prompt without the generated ids); the caller then refuses. Nothing generated yet (the engine failed
     * after its response head, before its first token): the request as the client sent it.
     */
    public byte[] continuation(String generatedText, int[] promptIds, int[] generatedIds, int generatedTokens) {
        if (generatedTokens == 0 && generatedText.isEmpty()) {
            return bytes(body);
        }
        ObjectNode next = body.deepCopy();
        if (!lowerBudget(next, generatedTokens)) {
            return null;
        }
        if (chat) {
            ArrayNode messages = (ArrayNode) next.get("messages");
            JsonNode last = messages.isEmpty() ? null : messages.get(messages.size() - 1);
            if (body.path("continue_final_message").asBoolean(false) && last != null
                && "assistant".equals(last.path("role").asText()) && last.path("content").isTextual()) {
                // The client continued its own assistant prefix already: the generated text extends it.
                ((ObjectNode) last).put("content", last.get("content").asText() + generatedText);
            } else {
                messages.addObject().put("role", "assistant").put("content", generatedText);
            }
            next.put("continue_final_message", true);
            next.put("add_generation_prompt", false);
        } else {
            JsonNode prompt = next.get("prompt");
            JsonNode single = prompt != null && prompt.isArray() && prompt.size() == 1 && !prompt.get(0).isIntegralNumber()
                ? prompt.get(0) : prompt;
            if (promptIds != null && generatedIds != null) {
                ArrayNode ids = next.putArray("prompt");
                for (int t : promptIds) {
                    ids.add(t);
                }
                for (int t : generatedIds) {
                    ids.add(t);
                }
            } else if (single != null && single.isTextual()) {
                next.put("prompt", single.asText() + generatedText);
            } else {
                return null; // token ids without the generated ids: text cannot be appended to them
            }
        }
        return bytes(next);
    }

    private static byte[] bytes(ObjectNode request) {
        try {
            return JSON.writeValueAsString(request).getBytes(StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Lowers the request's token budget by what was generated; false when nothing would be left. */
    private boolean lowerBudget(ObjectNode next, int used) {
        for (String field : new String[] {"max_completion_tokens", "max_tokens"}) {
            JsonNode v = next.get(field);
            if (v != null && v.isIntegralNumber() && v.asInt() > 0 && (field.equals("max_tokens") || chat)) {
                int left = v.asInt() - used;
                if (left < 1) {
                    return false;
                }
                next.put(field, left);
                if (field.equals("max_completion_tokens")) {
                    return true; // engines read max_completion_tokens first
                }
            }
        }
        return true;
    }
}
