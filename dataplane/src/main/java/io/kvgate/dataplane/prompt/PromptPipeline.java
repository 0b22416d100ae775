package io.kvgate.dataplane.prompt;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.index.prompt.PromptException;
import io.kvgate.index.prompt.PromptRenderer;
import io.kvgate.index.prompt.RenderedPrompt;
import io.kvgate.control.config.ChatTemplateFile;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.engine.EngineProfiles;
import io.kvgate.dataplane.engine.TemplateRules;
import io.kvgate.index.tokenize.ChatTemplates;
import io.kvgate.index.tokenize.HfTokenizer;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;

/**
 * A rule's exact prompt pipeline: the chat template the rule's engine renders with, resolved as that engine resolves
 * it, rendered as transformers does, then the HF tokenizer, so the gateway hashes the same tokens the engine caches.
 * Runs on the I/O threads (before the routing ring: it must not serialize on one thread). Immutable and thread-safe;
 * the gateway's {@link TokenizerCache} shares one tokenizer per model directory across rules and across
 * configuration swaps that leave the directory unchanged.
 *
 * <p>Which template renders a chat request ({@link #forRule}; each engine's profile states its choices as
 * {@link TemplateRules}, this class makes them):
 * <ul>
 *   <li><b>vLLM</b> ({@code resolve_chat_template}, 4 levels): (1) the rule's {@code chat_template} (the engine's
 *       {@code --chat-template}, used as read); (2) unless the request has {@code tools}, the model's processor
 *       template ({@code chat_template.json}... of a directory with a processor, see
 *       {@link io.kvgate.index.tokenize.ChatTemplates#processor}); (3) the tokenizer's template, {@code tool_use}
 *       for a request with tools when it names one; (4) vLLM's bundled fallbacks per model type are not
 *       reproduced: a model without a template has none here (the rule then cannot render chat; set
 *       {@code chat_template}).</li>
 *   <li><b>SGLang</b> ({@code TemplateManager.load_chat_template}): the rule's {@code chat_template} (a
 *       {@code .jinja} file, loaded as SGLang does: newlines stripped at both ends, each literal {@code \n} turned
 *       into a newline) for every request; else the processor's template, which replaces the tokenizer's for every
 *       request; else the tokenizer's (with transformers' {@code tool_use} switch). SGLang's own conversation
 *       templates guessed from the model path are not reproduced: pin the template with {@code chat_template} (and
 *       launch SGLang with the same {@code --chat-template}) where the path would match one.</li>
 *   <li>Other engines: the tokenizer's template (with the {@code tool_use} switch).</li>
 * </ul>
 */
public final class PromptPipeline {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** Where the template in use came from, as the rule read-back names it. */
    public enum TemplateSource {
        /** The rule's {@code chat_template} file. */
        CHAT_TEMPLATE,
        /** The model directory's processor ({@code chat_template.json} or the template files, with a processor class). */
        PROCESSOR,
        /** The tokenizer ({@code tokenizer_config.json}, or {@code chat_template.jinja} / additional templates). */
        TOKENIZER;

        public String label() {
            return name().toLowerCase(java.util.Locale.ROOT);
        }
    }

    /** One chat template in use: its text, where it came from, its SHA-256 and its renderer. */
    public record Template(TemplateSource source, String text, String sha256, PromptRenderer renderer) {
        /** The names the template reads from its context (what vLLM keeps {@code chat_template_kwargs} to). */
        public java.util.Set<String> variables() {
            return renderer.templateVariables();
        }
    }

    private final HfTokenizer tokenizer;
    /** Renders completions (and chat when no template is in use): the tokenizer's specials, no template needed. */
    private final PromptRenderer renderer;
    /** The template for a chat request without {@code tools} (None), or null when there is none. */
    private final Template plain;
    /**
     * The template for a chat request with {@code tools} (present, not null: vLLM and SGLang pass None otherwise),
     * or null. transformers' {@code apply_chat_template} picks {@code tool_use} over {@code default} then, and vLLM
     * skips the processor's template, so a request with tools may get other text.
     */
    private final Template withTools;

    private PromptPipeline(HfTokenizer tokenizer, Template plain, Template withTools) {
        this.tokenizer = tokenizer;
        this.renderer = tokenizer == null ? null : plain != null ? plain.renderer() : renderer(tokenizer, null);
        this.plain = plain;
        this.withTools = withTools;
    }

    private static PromptRenderer renderer(HfTokenizer tokenizer, String template) {
        return new PromptRenderer(tokenizer::encode, template, tokenizer.config().bosToken(), tokenizer.config().eosToken());
    }

    private static Template template(HfTokenizer tokenizer, TemplateSource source, String text) {
        return text == null ? null : new Template(source, text, ChatTemplateFile.sha256(text), renderer(tokenizer, text));
    }

    /** The same template object for the same text (one compile), else a new one. */
    private static Template same(Template t, HfTokenizer tokenizer, TemplateSource source, String text) {
        return t != null && t.source() == source && t.text().equals(text) ? t : template(tokenizer, source, text);
    }

    /** The tokenizer's vocabulary size (added tokens included): the bound of a token id ({@code logit_bias} keys). */
    public int vocabSize() {
        return tokenizer == null ? 0 : tokenizer.vocabSize();
    }

    /**
     * The rules of {@code next} whose configuration is unchanged from {@code live}'s but whose prompt pipeline would
     * render differently now (one line each, for the reload's list of changes): a file of the tokenizer directory changed (tokenizer.json, tokenizer_config.json, the chat template files, a processor's
     * chat_template.json). The configuration check loaded such a directory afresh through {@code tokenizers}; a reload
     * rebuilds the rule.
     */
    public static List<String> changedOnDisk(io.kvgate.dataplane.route.RouteTable live,
                                             io.kvgate.control.config.GatewayConfig next, TokenizerCache tokenizers) {
        List<String> out = new java.util.ArrayList<>();
        for (RuleConfig rc : next.rules()) {
            io.kvgate.dataplane.route.Rule r = live.ruleByName(rc.name());
            if (r == null || !r.config().equals(rc) || rc.tokenizer() == null) {
                continue; // new or changed rules are rebuilt (and reported by the diff) anyway
            }
            PromptPipeline now = PromptPipeline.forRule(rc, tokenizers);
            if (!now.equals(r.requestStage())) {
                out.add("rules[name=" + rc.name() + "].tokenizer: files in " + rc.tokenizer() + " changed (prompt pipeline rebuilt)");
            }
        }
        return out;
    }

    /**
     * The pipeline of a rule: its tokenizer directory through {@code tokenizers} and the chat template its engine
     * would render with (see the class comment). No tokenizer: only token-id prompts are exact.
     */
    public static PromptPipeline forRule(RuleConfig rule, TokenizerCache tokenizers) {
        HfTokenizer tok = rule.tokenizer() == null ? null : tokenizers.load(rule.tokenizer());
        return resolve(EngineProfiles.of(rule).templates(), rule.chatTemplate(), tok);
    }

    /** As {@link #forRule(RuleConfig, TokenizerCache)}, loading the tokenizer afresh (tools and tests). */
    public static PromptPipeline forRule(RuleConfig rule) {
        HfTokenizer tok = rule.tokenizer() == null ? null : TokenizerCache.read(Path.of(rule.tokenizer()));
        return resolve(EngineProfiles.of(rule).templates(), rule.chatTemplate(), tok);
    }

    static PromptPipeline resolve(TemplateRules rules, ChatTemplateFile file, HfTokenizer tok) {
        if (tok == null) {
            return new PromptPipeline(null, null, null);
        }
        ChatTemplates tokenizerTemplates = tok.config().templates();
        ChatTemplates processor = tok.processorTemplates();
        if (file != null && rules.chatTemplateFile() != null) {
            Template t = template(tok, TemplateSource.CHAT_TEMPLATE, rules.chatTemplateFile().apply(file.source()));
            return new PromptPipeline(tok, t, t);
        }
        if (rules.processorFirst() && processor != null
            && (processor.defaultTemplate() != null || !processor.named().isEmpty())) {
            Template p = template(tok, TemplateSource.PROCESSOR, processor.select(false));
            return new PromptPipeline(tok, p, same(p, tok, TemplateSource.PROCESSOR, processor.select(true)));
        }
        String tokPlain = tokenizerTemplates == null ? null : tokenizerTemplates.select(false);
        String tokTools = tokenizerTemplates == null ? null : tokenizerTemplates.select(true);
        Template toolsT = template(tok, TemplateSource.TOKENIZER, tokTools);
        Template plainT;
        if (rules.processorForPlain() && processor != null && processor.select(false) != null) {
            plainT = template(tok, TemplateSource.PROCESSOR, processor.select(false));
        } else {
            plainT = same(toolsT, tok, TemplateSource.TOKENIZER, tokPlain);
        }
        return new PromptPipeline(tok, plainT, toolsT);
    }

    /** The template for {@code body}: the one for requests with tools when it has {@code tools}, else the plain one. */
    public Template templateFor(boolean tools) {
        return tools ? withTools : plain;
    }

    private Template chatTemplate(JsonNode body) {
        JsonNode tools = body.get("tools");
        return templateFor(tools != null && !tools.isNull());
    }

    /** The chat renderer for {@code body}, or null without a tokenizer (a template-less renderer refuses chat). */
    private PromptRenderer chatRenderer(JsonNode body) {
        if (renderer == null) {
            return null;
        }
        Template t = chatTemplate(body);
        return t == null ? renderer : t.renderer();
    }

    /**
     * Parameters of transformers' {@code apply_chat_template} (tokenization_utils_base.py): vLLM keeps a
     * {@code chat_template_kwargs} key named like one of them even when the template does not read it
     * ({@code resolve_chat_template_kwargs}: {@code _get_hf_base_chat_template_params}).
     */
    static final java.util.Set<String> APPLY_CHAT_TEMPLATE_PARAMS = java.util.Set.of("conversation", "tools", "documents",
        "chat_template", "add_generation_prompt", "continue_final_message", "tokenize", "padding", "truncation",
        "max_length", "return_tensors", "return_dict", "return_assistant_tokens_mask", "tokenizer_kwargs");

    /**
     * The {@code chat_template_kwargs} keys the template in use for the request does not declare (reads nowhere) and
     * that are not parameters of {@code apply_chat_template}: vLLM drops them without a word, SGLang hands them to
     * the template, which ignores them. Empty when every key is read, or when there is no template to judge by.
     *
     * @param keys  the request's {@code chat_template_kwargs} member names, in body order
     * @param tools whether the request has {@code tools} (present, not null)
     */
    public List<String> undeclaredKwargs(List<String> keys, boolean tools) {
        Template t = templateFor(tools);
        if (t == null || keys.isEmpty()) {
            return List.of();
        }
        java.util.Set<String> declared = t.variables();
        return distinctInOrder(keys, k -> !declared.contains(k) && !APPLY_CHAT_TEMPLATE_PARAMS.contains(k));
    }

    /**
     * The distinct {@code keys} that {@code wanted} accepts, in first-seen order: one hash lookup per key (B-6: a
     * list lookup per key made 100 k {@code chat_template_kwargs} keys take seconds of the I/O thread).
     */
    static <K> List<K> distinctInOrder(List<K> keys, java.util.function.Predicate<? super K> wanted) {
        java.util.Set<K> out = null;
        for (K k : keys) {
            if (wanted.test(k)) {
                if (out == null) {
                    out = new java.util.LinkedHashSet<>();
                }
                out.add(k);
            }
        }
        return out == null ? List.of() : List.copyOf(out);
    }

    /** The pipeline the gateway attached to {@code rule} when it built the table (loaded now if none was attached). */
    public static PromptPipeline of(io.kvgate.dataplane.route.Rule rule) {
        return rule.requestStage() instanceof PromptPipeline p ? p : forRule(rule.config());
    }

    /**
     * A pipeline over a model directory alone (no rule, no engine): the tokenizer's templates with transformers'
     * {@code tool_use} switch.
     *
     * @param modelDir the rule's {@code tokenizer} directory, or null: then only token-id prompts are exact
     */
    public static PromptPipeline forModelDir(String modelDir, TokenizerCache tokenizers) {
        return resolve(TemplateRules.TOKENIZER_ONLY, null, modelDir == null ? null : tokenizers.load(modelDir));
    }

    /** As {@link #forModelDir(String, TokenizerCache)}, loading the tokenizer afresh (tools and tests). */
    public static PromptPipeline forModelDir(String modelDir) {
        return resolve(TemplateRules.TOKENIZER_ONLY, null, modelDir == null ? null : TokenizerCache.read(Path.of(modelDir)));
    }

    /**
     * Whether this pipeline renders exactly as {@code other} does: the same tokenizer instance (the cache returns
     * the same one while the directory is unchanged) and the same template texts. A rule whose configuration did not
     * change keeps its old pipeline across a reload only when this holds for the one the reload would build.
     */
    public boolean sameAs(PromptPipeline other) {
        return other != null && tokenizer == other.tokenizer && sameText(plain, other.plain)
            && sameText(withTools, other.withTools);
    }

    /** {@link #sameAs}: the route table keeps a rule whose configuration and pipeline are both unchanged. */
    @Override
    public boolean equals(Object o) {
        return o instanceof PromptPipeline p && sameAs(p);
    }

    @Override
    public int hashCode() {
        return System.identityHashCode(tokenizer) * 31 + (plain == null ? 0 : plain.sha256().hashCode());
    }

    private static boolean sameText(Template a, Template b) {
        return a == null ? b == null : b != null && a.source() == b.source() && a.text().equals(b.text());
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

    /**
     * Whether {@code text} has more than {@code maxTokens} tokens by its length alone ({@link HfTokenizer#minTokens}:
     * an exact lower bound, so no prompt the engine accepts is refused here).
     */
    private boolean certainlyOver(String text, int maxTokens) {
        return tokenizer.certainlyMoreThan(text, maxTokens);
    }

    /**
     * The most prompt tokens the gateway tokenizes for a rule: its {@code max_prompt_tokens}, or its context length
     * when that is known and smaller (a longer prompt is refused by the engine anyway, so counting further only
     * costs the I/O thread time and merge scratch).
     *
     * @param contextLength the rule's known context length, 0 when unknown
     */
    public static int tokenBound(int maxPromptTokens, int contextLength) {
        return contextLength > 0 ? Math.min(maxPromptTokens, contextLength) : maxPromptTokens;
    }

    /**
     * The worst-case heap one request's tokenizing takes on the I/O thread of a rule whose tokenizer has the given
     * longest token, given its {@link #tokenBound} ({@link HfTokenizer#worstCaseScratchBytes}): e.g. 8192 tokens of
     * Qwen3 or Llama 3.1 (longest token 128 bytes) about 45 MiB. Each I/O thread may hold one such set at a time.
     */
    public static long worstCaseTokenizerScratchBytes(int tokenBound, int maxTokenBytes) {
        return HfTokenizer.worstCaseScratchBytes(tokenBound, maxTokenBytes);
    }
}
