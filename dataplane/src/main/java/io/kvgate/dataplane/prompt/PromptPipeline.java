package io.kvgate.dataplane.prompt;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.index.prompt.PromptException;
import io.kvgate.index.prompt.PromptRenderer;
import io.kvgate.index.prompt.RenderedPrompt;
import io.kvgate.index.tokenize.HfTokenizer;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;

/**
 * A rule's exact prompt pipeline: the model's own chat template rendered as transformers does, then the HF
 * tokenizer, so the gateway hashes the same tokens the engine caches. Runs on the I/O threads (before the routing
 * ring: it must not serialize on one thread). Immutable and thread-safe; the gateway's {@link TokenizerCache} shares
 * one tokenizer per model directory across rules and across configuration swaps that leave the directory unchanged.
 */
public final class PromptPipeline {
    private static final ObjectMapper JSON = new ObjectMapper();

    private final HfTokenizer tokenizer;
    private final PromptRenderer renderer;
    /**
     * The tokenizer's named {@code tool_use} template, or null. transformers' {@code apply_chat_template} renders
     * with it instead of {@code default} whenever {@code tools} is not None, and vLLM and SGLang pass the request's
     * {@code tools} through (None when the field is absent or null), so a request with tools gets other text.
     */
    private final PromptRenderer toolUseRenderer;

    private PromptPipeline(HfTokenizer tokenizer) {
        this.tokenizer = tokenizer;
        this.renderer = tokenizer == null ? null : renderer(tokenizer, tokenizer.config().chatTemplate());
        String toolUse = tokenizer == null ? null : tokenizer.config().namedTemplate("tool_use");
        this.toolUseRenderer = toolUse == null ? null : renderer(tokenizer, toolUse);
    }

    private static PromptRenderer renderer(HfTokenizer tokenizer, String template) {
        return new PromptRenderer(tokenizer::encode, template, tokenizer.config().bosToken(), tokenizer.config().eosToken());
    }

    /** The chat renderer for {@code body}: {@code tool_use} when it has {@code tools} and the model names one. */
    private PromptRenderer chatRenderer(JsonNode body) {
        if (toolUseRenderer != null) {
            JsonNode tools = body.get("tools");
            if (tools != null && !tools.isNull()) {
                return toolUseRenderer;
            }
        }
        return renderer;
    }

    /** The pipeline the gateway attached to {@code rule} when it built the table (loaded now if none was attached). */
    public static PromptPipeline of(io.kvgate.dataplane.route.Rule rule) {
        return rule.requestStage() instanceof PromptPipeline p ? p : forModelDir(rule.config().tokenizer());
    }

    /** @param modelDir the rule's {@code tokenizer} directory, or null: then only token-id prompts are exact */
    public static PromptPipeline forModelDir(String modelDir, TokenizerCache tokenizers) {
        return new PromptPipeline(modelDir == null ? null : tokenizers.load(modelDir));
    }

    /** As {@link #forModelDir(String, TokenizerCache)}, loading the tokenizer afresh (tools and tests). */
    public static PromptPipeline forModelDir(String modelDir) {
        return new PromptPipeline(modelDir == null ? null : TokenizerCache.read(Path.of(modelDir)));
    }

    public boolean hasTokenizer() {
        return tokenizer != null;
    }

    public HfTokenizer tokenizer() {
        return tokenizer;
    }

    /** Parses a request body held in a buffer (its reader index is left where it was). */
    public static JsonNode parse(io.netty.buffer.ByteBuf body) throws PromptException {
        try {
            if (body.hasArray()) {
                return JSON.readTree(body.array(), body.arrayOffset() + body.readerIndex(), body.readableBytes());
            }
            return JSON.readTree((java.io.InputStream) new io.netty.buffer.ByteBufInputStream(body.duplicate()));
        } catch (IOException e) {
            throw new PromptException("body", "request body is not valid JSON: " + e.getMessage());
        }
    }

    public static JsonNode parse(byte[] body) throws PromptException {
        try {
            return JSON.readTree(body);
        } catch (IOException e) {
            throw new PromptException("body", "request body is not valid JSON: " + e.getMessage());
        }
    }

    /**
     * The prompt of a chat or completions body as the engine will see it. For a batch of completions prompts the
     * first one stands for the request (they share a routing decision). Token-id prompts are used as given; text
     * needs a tokenizer (null is returned without one: the rule's fallback routes it).
     */
    public RenderedPrompt render(boolean chat, JsonNode body) throws PromptException {
        if (chat) {
            return renderer == null ? null : chatRenderer(body).renderChat(body);
        }
        return renderCompletion(body);
    }

    /** The chat template's output for a chat body (null without a tokenizer/template). */
    public String renderChatText(JsonNode body) throws PromptException {
        return renderer == null ? null : chatRenderer(body).renderChatText(body);
    }

    /** Chat prompts are tokenized without special tokens: the template already wrote them. */
    public int[] encodeChat(String text) {
        return tokenizer.encode(text, false);
    }

    /** The first prompt of a completions body (token ids as given, text tokenized with special tokens). */
    public RenderedPrompt renderCompletion(JsonNode body) throws PromptException {
        JsonNode p = body.get("prompt");
        boolean ids = p != null && p.isArray() && p.size() > 0 && (p.get(0).isIntegralNumber() || p.get(0).isArray());
        if (renderer == null && !ids) {
            return null;
        }
        if (renderer == null) {
            JsonNode first = p.get(0).isArray() ? p.get(0) : p;
            int[] out = new int[first.size()];
            for (int i = 0; i < out.length; i++) {
                JsonNode t = first.get(i);
                if (!t.isIntegralNumber()) {
                    throw new PromptException("prompt", "token-id prompts must contain only integers");
                }
                out[i] = t.intValue();
            }
            return new RenderedPrompt(null, out);
        }
        List<RenderedPrompt> all = renderer.renderCompletion(body);
        return all.isEmpty() ? null : all.get(0);
    }

    /** {@link #longestCompletionPrompt}: some prompt has more tokens than the bound. */
    public static final int OVER = Integer.MAX_VALUE;

    /**
     * The token count of the longest prompt of a completions body (every prompt of a batch must fit the context),
     * each counted up to {@code bound}: token ids as given, text tokenized with special tokens.
     *
     * @param firstCount the first prompt's count when the caller already has it (0: count it too)
     * @return the count, {@link #OVER} when a prompt has more than {@code bound} tokens, or -1 when a text prompt
     *         cannot be counted (no tokenizer)
     */
    public int longestCompletionPrompt(JsonNode body, int firstCount, int bound) throws PromptException {
        JsonNode p = body.get("prompt");
        if (p == null || p.isNull()) {
            throw new PromptException("prompt", "prompt is required");
        }
        if (firstCount > bound) {
            return OVER;
        }
        int longest = firstCount;
        boolean batch = isBatch(p);
        int n = batch ? p.size() : 1;
        for (int i = firstCount > 0 ? 1 : 0; i < n; i++) {
            int[] ids = completionTokens(batch ? p.get(i) : p, bound);
            if (ids == TOO_LONG) {
                return OVER;
            }
            if (ids == null) {
                return -1;
            }
            longest = Math.max(longest, ids.length);
        }
        return longest;
    }

    /** Returned by the bounded methods below when the prompt has more tokens than allowed (compare by identity). */
    public static final int[] TOO_LONG = new int[0];

    /**
     * A rendered chat prompt's token ids as the engine will see them, at most {@code maxTokens} of them (tokenized
     * without special tokens: the template wrote them). An over-long rendering is refused by length before
     * tokenizing when its length alone proves it (no token is longer than {@link HfTokenizer#maxTokenBytes()}
     * bytes), else while tokenizing.
     *
     * @param text {@link #renderChatText}'s output (null without a tokenizer/template)
     * @return the ids, {@link #TOO_LONG}, or null when {@code text} is null
     */
    public int[] chatTokens(String text, int maxTokens) {
        if (text == null) {
            return null;
        }
        if (certainlyOver(text, maxTokens)) {
            return TOO_LONG;
        }
        int[] ids = tokenizer.encodeAtMost(text, false, maxTokens);
        return ids == null ? TOO_LONG : ids;
    }

    /**
     * The first prompt of a completions body (a batch shares one routing decision), at most {@code maxTokens} ids:
     * token ids as given, text tokenized with special tokens (as the engines do).
     *
     * @return the ids, {@link #TOO_LONG}, or null for a text prompt without a tokenizer
     */
    public int[] firstCompletionTokens(JsonNode body, int maxTokens) throws PromptException {
        JsonNode p = body.get("prompt");
        if (p == null || p.isNull()) {
            throw new PromptException("prompt", "prompt is required");
        }
        return completionTokens(isBatch(p) ? p.get(0) : p, maxTokens);
    }

    /**
     * Every prompt of a completions body (a batch renders each) or the one chat prompt, each at most
     * {@code maxTokens} ids: what the render routes show.
     *
     * @return the prompts, or null when one of them has more than {@code maxTokens} ids
     */
    public List<RenderedPrompt> renderAllAtMost(boolean chat, JsonNode body, int maxTokens) throws PromptException {
        if (chat) {
            String text = renderChatText(body);
            if (text == null) {
                return List.of();
            }
            int[] ids = chatTokens(text, maxTokens);
            return ids == TOO_LONG ? null : List.of(new RenderedPrompt(text, ids));
        }
        JsonNode p = body.get("prompt");
        if (p == null || p.isNull()) {
            throw new PromptException("prompt", "prompt is required");
        }
        List<RenderedPrompt> out = new java.util.ArrayList<>();
        for (JsonNode one : isBatch(p) ? p : List.of(p)) {
            int[] ids = completionTokens(one, maxTokens);
            if (ids == TOO_LONG) {
                return null;
            }
            if (ids == null) {
                return List.of();
            }
            out.add(new RenderedPrompt(one.isTextual() ? one.textValue() : null, ids));
        }
        return out;
    }

    /** A list of prompts (strings or token-id lists) rather than one token-id list. */
    private static boolean isBatch(JsonNode p) {
        return p.isArray() && !p.isEmpty() && (p.get(0).isTextual() || p.get(0).isArray());
    }

    /** One completions prompt: a string (tokenized with special tokens) or a token-id list; null: text, no tokenizer. */
    private int[] completionTokens(JsonNode first, int maxTokens) throws PromptException {
        if (first.isTextual()) {
            if (tokenizer == null) {
                return null;
            }
            String text = first.textValue();
            if (certainlyOver(text, maxTokens)) {
                return TOO_LONG;
            }
            int[] ids = tokenizer.encodeAtMost(text, true, maxTokens);
            return ids == null ? TOO_LONG : ids;
        }
        if (!first.isArray() || first.isEmpty()) {
            throw new PromptException("prompt", "prompt must be a string, an array of strings, an array of token ids "
                + "or an array of token-id arrays, and not empty");
        }
        if (first.size() > maxTokens) {
            return TOO_LONG;
        }
        int[] out = new int[first.size()];
        for (int i = 0; i < out.length; i++) {
            JsonNode t = first.get(i);
            if (!t.isIntegralNumber() || !t.canConvertToInt() || t.intValue() < 0) {
                throw new PromptException("prompt", "token-id prompts must contain only non-negative integers");
            }
            out[i] = t.intValue();
        }
        return out;
    }

    /** Whether {@code text} has more than {@code maxTokens} tokens by its length alone (UTF-16 units ≤ UTF-8 bytes). */
    private boolean certainlyOver(String text, int maxTokens) {
        return (long) text.length() > (long) maxTokens * tokenizer.maxTokenBytes();
    }

    /** All prompts of a completions batch (render routes show every one). */
    public List<RenderedPrompt> renderAll(boolean chat, JsonNode body) throws PromptException {
        if (chat || renderer == null) {
            RenderedPrompt one = render(chat, body);
            return one == null ? List.of() : List.of(one);
        }
        return renderer.renderCompletion(body);
    }
}
