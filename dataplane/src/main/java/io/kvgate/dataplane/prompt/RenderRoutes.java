package io.kvgate.dataplane.prompt;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.dataplane.openai.OpenAiErrors;
import io.kvgate.dataplane.request.RequestValidator;
import io.kvgate.dataplane.route.Rule;
import io.kvgate.dataplane.route.RuleHasher;
import io.kvgate.index.prompt.PromptException;
import io.kvgate.index.prompt.RenderedPrompt;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpResponseStatus;
import java.util.List;

/**
 * The render routes ({@code POST /kvgate/v1/chat/completions/render}, {@code /kvgate/v1/completions/render}, and the
 * {@code /v1/*}{@code /render} aliases on rules whose engine does not serve them itself, i.e. not vLLM): what the engine will
 * see for a body — rendered prompt, token ids, block keys — without sending it anywhere. They run the prompt stage's
 * pipeline under the same bounds as a real request ({@code max_prompt_tokens}; API key, method, Content-Type and
 * {@code max_n} were checked by the front door, which calls {@link #answer}). Stateless; any I/O thread.
 */
public final class RenderRoutes {
    private static final ObjectMapper JSON = new ObjectMapper();

    private RenderRoutes() {
    }

    /**
     * The answer to a render route for a validated body whose model resolved to {@code rule}: 200 with what
     * {@link #render} builds, or the OpenAI 400 that names what cannot be rendered. {@code body} is borrowed (not
     * released here).
     */
    public static FullHttpResponse answer(ByteBufAllocator alloc, boolean chat, ByteBuf body, Rule rule) {
        try {
            ObjectNode out = render(rule, PromptPipeline.parse(body), chat);
            return OpenAiErrors.jsonResponse(alloc, HttpResponseStatus.OK, out.toString());
        } catch (PromptTooLongException e) {
            return OpenAiErrors.response(alloc, HttpResponseStatus.BAD_REQUEST, e.problem.message(), e.problem.param(),
                e.problem.openAiCode());
        } catch (PromptException e) {
            return OpenAiErrors.response(alloc, HttpResponseStatus.BAD_REQUEST, e.getMessage(), e.param(), null);
        }
    }

    /** A prompt over {@code max_prompt_tokens}: carries the 400 {@code context_length_exceeded} problem. */
    public static final class PromptTooLongException extends Exception {
        private static final long serialVersionUID = 1L;
        final transient io.kvgate.dataplane.request.Problem problem;

        PromptTooLongException(io.kvgate.dataplane.request.Problem problem) {
            super(problem.message(), null, false, false); // a client error: no stack trace
            this.problem = problem;
        }
    }

    /**
     * {@code {"prompt": text|null, "prompt_token_ids": [...], "block_keys": [...]}} (plus "prompts" for a batch).
     * Also what the admin lookup and explain routes render.
     */
    public static ObjectNode render(Rule rule, JsonNode body, boolean chat) throws PromptException, PromptTooLongException {
        PromptPipeline p = PromptPipeline.of(rule);
        if (!p.hasTokenizer() && (chat || !isTokenIdPrompt(body))) {
            throw new PromptException("model", "rule '" + rule.name() + "' has no tokenizer configured: only token-id "
                + "completions prompts can be rendered (set rules[].tokenizer to the model directory)");
        }
        // The request path's bound (B-5): no further than the context length when it is known.
        int maxPromptTokens = rule.config().maxPromptTokens();
        int max = PromptPipeline.tokenBound(maxPromptTokens, rule.contextLength());
        List<RenderedPrompt> all = p.renderAllAtMost(chat, body, max);
        if (all == null) {
            throw new PromptTooLongException(max < maxPromptTokens
                ? io.kvgate.dataplane.request.ContextBudget.overflow(max, max, false,
                    io.kvgate.dataplane.request.ContextBudget.ABSENT, chat)
                : RequestValidator.contextLengthExceeded(chat ? "messages" : "prompt", "more than " + max + " tokens",
                    rule.name(), max));
        }
        if (all.isEmpty()) {
            throw new PromptException(chat ? "messages" : "prompt", "nothing to render");
        }
        String salt = body.path("cache_salt").isTextual() ? body.get("cache_salt").asText() : null;
        // A model name that is not one of the rule's base models is a LoRA adapter of it (configured or discovered):
        // its block keys carry the adapter name where the engine puts it (vLLM), as kv_exact hashes them.
        String model = body.path("model").isTextual() ? body.get("model").asText() : null;
        String lora = model != null && rule.config().entryFor(model) == null ? model : null;
        RuleHasher hasher = new RuleHasher(rule.config(), 0);
        ObjectNode out = one(all.get(0), hasher, salt, lora);
        if (all.size() > 1) {
            ArrayNode batch = out.putArray("prompts");
            for (RenderedPrompt rp : all) {
                batch.add(one(rp, hasher, salt, lora));
            }
        }
        return out;
    }

    private static ObjectNode one(RenderedPrompt rp, RuleHasher hasher, String salt, String lora) {
        ObjectNode o = JSON.createObjectNode();
        if (rp.text() == null) {
            o.putNull("prompt");
        } else {
            o.put("prompt", rp.text());
        }
        ArrayNode ids = o.putArray("prompt_token_ids");
        for (int t : rp.tokenIds()) {
            ids.add(t);
        }
        long[] keys = new long[rp.tokenIds().length / hasher.blockSize() + 1];
        int n = hasher.hash(rp.tokenIds(), salt, lora, keys, Integer.MAX_VALUE);
        ArrayNode bk = o.putArray("block_keys");
        for (int i = 0; i < n; i++) {
            bk.addRawValue(new com.fasterxml.jackson.databind.util.RawValue(hasher.format(keys[i])));
        }
        return o;
    }

    private static boolean isTokenIdPrompt(JsonNode body) {
        JsonNode p = body.get("prompt");
        return p != null && p.isArray() && p.size() > 0 && (p.get(0).isIntegralNumber() || p.get(0).isArray());
    }
}
