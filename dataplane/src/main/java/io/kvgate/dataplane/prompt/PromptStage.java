package io.kvgate.dataplane.prompt;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.exchange.RequestContext;
import io.kvgate.dataplane.metrics.GatewayMetrics;
import io.kvgate.dataplane.metrics.StageTimers.Stage;
import io.kvgate.dataplane.request.ContextBudget;
import io.kvgate.dataplane.request.Problem;
import io.kvgate.dataplane.request.Refusal;
import io.kvgate.dataplane.request.RequestValidator;
import io.kvgate.dataplane.request.RequestFields;
import io.kvgate.dataplane.request.RoutingInputs;
import io.kvgate.dataplane.route.Rule;
import io.kvgate.dataplane.route.RulePolicies;
import io.kvgate.dataplane.trace.RequestTrace;
import io.kvgate.index.block.BlockIndexConfig;
import io.kvgate.index.prompt.PromptException;
import io.netty.buffer.ByteBuf;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaders;
import io.netty.handler.codec.http.cookie.Cookie;
import io.netty.handler.codec.http.cookie.ServerCookieDecoder;

/**
 * The prompt stage, on the request's I/O thread before the routing ring: the rule's {@code max_prompt_tokens} bound,
 * then render + tokenize for rules whose policy reads the prompt, and the session key for session rules.
 * <ul>
 *   <li>Token-id prompts are counted while the body streams in (no parse needed): over the bound → 400
 *       {@code context_length_exceeded} on every rule.</li>
 *   <li>Text and chat prompts are bounded where the gateway tokenizes them: refused by length alone when it proves
 *       the bound is crossed, else while tokenizing, before the rest of the text is merged.</li>
 *   <li>At most the index's lookup depth ({@link BlockIndexConfig#DEFAULT_MAX_PROMPT_BLOCKS} blocks) of tokens goes
 *       to the routing stage: lookups never read further, so the routing thread never hashes more.</li>
 *   <li>A rule with a known context length ({@link Rule#contextLength()}) checks prompt + completion budget against
 *       it ({@link ContextBudget}): the 400, or the budget rewritten in the body. Its prompt is counted from the
 *       tokens routing uses, else from the body stage's token-id count, else (a rule with a tokenizer whose policy
 *       does not read the prompt) by a render + tokenize that stops at the context length.</li>
 * </ul>
 * A prompt the pipeline cannot render is not the gateway's error to report (the engine judges the request): it is
 * routed by the fallback and counted. The tokenizer keeps its scratch and caches per thread. Stateless.
 */
public final class PromptStage {
    private PromptStage() {}

    /**
     * Runs the stage over the request in {@code rc} (its rule, head, body and fields; {@code limits.max_body_bytes}
     * of the configuration captured at its head). Writes the routing inputs into the context (and the body, when a
     * lowered budget needed more room than the buffer had: a larger copy, the old buffer released).
     *
     * @return the refusal ({@code context_length_exceeded}...), or null
     */
    public static Refusal run(RequestContext rc, GatewayMetrics metrics, NanoClock clock) {
        Problem p = inputs(rc, metrics, clock);
        return p == null ? null : Refusal.of(p);
    }

    private static Problem inputs(RequestContext rc, GatewayMetrics metrics, NanoClock clock) {
        Rule rule = rc.rule();
        RequestFields fields = rc.fields();
        boolean chat = rc.chat();
        RequestTrace trace = rc.trace();
        RuleConfig ruleConfig = rule.config();
        int contextLen = rule.contextLength();
        // Token-id prompts were already bounded by the body stage. Text is counted only up to the context length
        // when it is known: the engine refuses a longer prompt, and (B-5) counting 1 Mi tokens of a one-word
        // prompt cost seconds and an OutOfMemoryError of merge scratch on the I/O thread.
        int maxTokens = PromptPipeline.tokenBound(ruleConfig.maxPromptTokens(), contextLen);
        String session = RulePolicies.needsSessionKey(ruleConfig) ? sessionKey(ruleConfig.session(), rc.head().headers(), fields) : null;
        if (!rule.needsPromptTokens()) {
            rc.inputs(session == null ? RoutingInputs.NONE : new RoutingInputs(null, null, session));
            return contextLen == 0 ? null : countOnly(rc, contextLen, metrics, clock);
        }
        PromptPipeline pipeline = PromptPipeline.of(rule);
        if (!pipeline.hasTokenizer() && (chat || !fields.promptIsTokenIds)) {
            long textKey = textPrefixKey(ruleConfig, fields, chat);
            if (textKey == RoutingInputs.NO_TEXT_KEY) {
                metrics.shed("kv_no_tokenizer_text_prompt");
            }
            rc.inputs(new RoutingInputs(null, null, session, textKey));
            return null;
        }
        int routedOn = rule.promptTokensRoutedOn();
        if (!chat && fields.promptIds.decides(routedOn, contextLen != 0)) {
            return tokenIdPrompt(rc, contextLen, routedOn, session, metrics);
        }
        long t0 = clock.nanoTime();
        JsonNode tree;
        try {
            tree = PromptPipeline.parse(rc.body());
        } catch (PromptException e) {
            metrics.shed("kv_render_failed");
            rc.inputs(new RoutingInputs(null, null, session));
            return null;
        }
        long t1 = clock.nanoTime();
        metrics.stages.recordNs(Stage.PARSE, t1 - t0);
        if (trace != null) {
            trace.stage("kvgate.parse_prompt", t0, t1);
        }
        String salt = tree.path("cache_salt").isTextual() ? tree.get("cache_salt").asText() : null;
        int[] tokens;
        int longest;
        try {
            if (chat) {
                String text = pipeline.renderChatText(tree);
                long t2 = clock.nanoTime();
                metrics.stages.recordNs(Stage.RENDER, t2 - t1);
                tokens = pipeline.chatTokens(text, maxTokens);
                long t3 = clock.nanoTime();
                metrics.stages.recordNs(Stage.TOKENIZE, t3 - t2);
                if (trace != null) {
                    trace.stage("kvgate.render", t1, t2);
                    trace.stage("kvgate.tokenize", t2, t3);
                }
                longest = tokens == null || tokens == PromptPipeline.TOO_LONG ? -1 : tokens.length;
            } else {
                tokens = pipeline.firstCompletionTokens(tree, maxTokens);
                longest = tokens == null || tokens == PromptPipeline.TOO_LONG || contextLen == 0 ? -1
                    : pipeline.longestCompletionPrompt(tree, tokens.length, contextLen);
                long t3 = clock.nanoTime();
                metrics.stages.recordNs(Stage.TOKENIZE, t3 - t1);
                if (trace != null) {
                    trace.stage("kvgate.tokenize", t1, t3);
                }
            }
        } catch (PromptException | RuntimeException e) {
            metrics.shed("kv_render_failed");
            rc.inputs(new RoutingInputs(null, null, session));
            return null;
        }
        if (tokens == PromptPipeline.TOO_LONG) {
            rc.inputs(RoutingInputs.NONE);
            if (maxTokens < ruleConfig.maxPromptTokens()) {
                // Over the context length (the tighter bound): the context verdict names it, as the engine would.
                return budget(rc, contextLen, contextLen, false, metrics);
            }
            return RequestValidator.contextLengthExceeded(chat ? "messages" : "prompt",
                "more than " + maxTokens + " tokens", rule.name(), maxTokens);
        }
        rc.inputs(new RoutingInputs(routingPrefix(tokens, routedOn), salt, session));
        if (tokens != null && (chat || fields.promptCount <= 1)) {
            rc.promptTokenCount(tokens.length); // a tenant's reservation holds exactly this (one prompt: the whole count)
        }
        if (trace != null && tokens != null) {
            trace.promptTokens(tokens.length);
        }
        if (contextLen == 0 || longest == -1) {
            return null;
        }
        return budget(rc, contextLen, longest == PromptPipeline.OVER ? contextLen : longest, longest != PromptPipeline.OVER,
            metrics);
    }

    /**
     * A token-id prompt, from the ids the body stage kept ({@link io.kvgate.dataplane.request.PromptIds}): the same
     * verdict as the tree reading above gives the same prompt, without parsing the body again. An invalid first
     * prompt is what that reading refuses (the fallback routes it). The context check counts from the body stage's
     * count of the longest list.
     */
    private static Problem tokenIdPrompt(RequestContext rc, int contextLen, int routedOn, String session,
                                         GatewayMetrics metrics) {
        RequestFields fields = rc.fields();
        if (!fields.promptIds.firstValid()) {
            metrics.shed("kv_render_failed");
            rc.inputs(new RoutingInputs(null, null, session));
            return null;
        }
        rc.inputs(new RoutingInputs(fields.promptIds.first(routedOn), fields.cacheSalt, session));
        if (contextLen == 0) {
            return null;
        }
        int longest = fields.promptTokenIdsMax;
        boolean over = longest > contextLen;
        return budget(rc, contextLen, over ? contextLen : longest, !over, metrics);
    }

    /**
     * The context check of a rule that does not route on the prompt: token-id prompts were counted by the body stage
     * (every rule); text is rendered and tokenized only when the rule has a tokenizer, at most up to the context
     * length (more proves the overflow). Without a count the engine judges the request and its answer is normalised.
     */
    private static Problem countOnly(RequestContext rc, int contextLen, GatewayMetrics metrics, NanoClock clock) {
        Rule rule = rc.rule();
        RequestFields fields = rc.fields();
        boolean chat = rc.chat();
        if (!chat && fields.promptIsTokenIds && fields.promptTokenIdsMax > 0) {
            return budget(rc, contextLen, fields.promptTokenIdsMax, true, metrics);
        }
        PromptPipeline pipeline = PromptPipeline.of(rule);
        if (!pipeline.hasTokenizer()) {
            return null;
        }
        int bound = PromptPipeline.tokenBound(rule.config().maxPromptTokens(), contextLen);
        long t0 = clock.nanoTime();
        int longest;
        try {
            JsonNode tree = PromptPipeline.parse(rc.body());
            if (chat) {
                String text = pipeline.renderChatText(tree);
                if (fitsByLength(rc, pipeline, text, contextLen, bound)) {
                    return null; // it fits however it tokenizes: no count needed (#42: 100 KB prompts cost ms each)
                }
                int[] tokens = pipeline.chatTokens(text, bound);
                longest = tokens == null ? -1 : tokens == PromptPipeline.TOO_LONG ? PromptPipeline.OVER : tokens.length;
            } else {
                longest = pipeline.longestCompletionPrompt(tree, 0, bound);
            }
        } catch (PromptException | RuntimeException e) {
            metrics.shed("context_count_failed");
            return null;
        } finally {
            long t1 = clock.nanoTime();
            metrics.stages.recordNs(Stage.TOKENIZE, t1 - t0);
            if (rc.trace() != null) {
                rc.trace().stage("kvgate.tokenize", t0, t1); // render included: counted for the context check only
            }
        }
        if (longest == -1) {
            return null;
        }
        if (longest == PromptPipeline.OVER && bound < contextLen) {
            // Over the rule's own bound, which is below the context: the max_prompt_tokens refusal.
            return RequestValidator.contextLengthExceeded(chat ? "messages" : "prompt",
                "more than " + bound + " tokens", rule.name(), bound);
        }
        return budget(rc, contextLen, longest == PromptPipeline.OVER ? bound : longest, longest != PromptPipeline.OVER,
            metrics);
    }

    /**
     * Whether a rendered chat prompt passes the context check whatever its exact count: its UTF-8 length bounds its
     * ids from above ({@link io.kvgate.index.tokenize.HfTokenizer#maxTokens}), that bound is within the rule's own
     * bound and leaves room, and the verdict at the bound sends the request unchanged. The verdict only gets harsher
     * as the prompt grows (a refusal or a lowered budget needs more tokens, never fewer), so the real, smaller count
     * would pass too. A rule that does not route on the prompt then never tokenizes an ordinary one.
     */
    static boolean fitsByLength(RequestContext rc, PromptPipeline pipeline, String text, int contextLen, int bound) {
        if (text == null) {
            return false;
        }
        long most = pipeline.tokenizer().maxTokens(text);
        if (most < 0 || most > bound || most + 2 > contextLen) {
            return false; // nothing proved; or the bound is where a refusal or SGLang's one-free-token rule starts
        }
        Rule rule = rc.rule();
        ContextBudget.Verdict v = ContextBudget.decide(contextLen, (int) most, true,
            ContextBudget.requested(rc.fields(), true), true, rule.profile().refusesExactContextFill(),
            rule.config().clampsContextOverflow());
        return v.passes();
    }

    /**
     * Applies the context verdict: the problem, the lowered budget written into the body (a larger copy replaces the
     * context's body, the old buffer released), or the request unchanged.
     */
    private static Problem budget(RequestContext rc, int contextLen, int promptTokens, boolean exact,
                                  GatewayMetrics metrics) {
        Rule rule = rc.rule();
        RequestFields fields = rc.fields();
        boolean chat = rc.chat();
        int requested = ContextBudget.requested(fields, chat);
        ContextBudget.Verdict v = ContextBudget.decide(contextLen, promptTokens, exact, requested, chat,
            rule.profile().refusesExactContextFill(), rule.config().clampsContextOverflow());
        if (v.problem() != null) {
            return v.problem();
        }
        if (v.budget() > 0) {
            ByteBuf edited = ContextBudget.lowerBudget(rc.body(), fields, v.budget(), requested == ContextBudget.ABSENT,
                rc.config().limits().maxBodyBytes());
            if (edited != null) {
                metrics.contextClamped(rule.name());
                rc.body(edited);
            }
        }
        return null;
    }

    /**
     * A {@code chwbl} rule without a tokenizer keys on the request text's first {@code chwbl.prefix_chars}
     * characters, as the body stage captured them (chat: message contents; completions: the prompt): no second parse.
     * {@link RoutingInputs#NO_TEXT_KEY} for other policies and for requests without text (the fallback routes them).
     */
    static long textPrefixKey(RuleConfig rc, RequestFields fields, boolean chat) {
        if (rc.policyKind() != RuleConfig.Policy.CHWBL || fields.textPrefixFromMessages != chat) {
            return RoutingInputs.NO_TEXT_KEY;
        }
        return RoutingInputs.textPrefixKey(fields.textPrefix, rc.chwbl().prefixChars());
    }

    /** The tokens the routing stage can use ({@link RulePolicies#promptTokensRoutedOn}): nothing past them. */
    static int[] routingPrefix(int[] tokens, int routedOn) {
        if (tokens == null) {
            return null;
        }
        return tokens.length <= routedOn ? tokens : java.util.Arrays.copyOf(tokens, routedOn);
    }

    static String sessionKey(RuleConfig.SessionConfig s, HttpHeaders headers, RequestFields fields) {
        return switch (s.key()) {
            case "user" -> fields.user != null ? fields.user : headers.get("x-conversation-id");
            case "conversation" -> headers.get("x-conversation-id");
            case "header" -> headers.get(s.header());
            case "cookie" -> {
                String raw = headers.get(HttpHeaderNames.COOKIE);
                if (raw == null) {
                    yield null;
                }
                for (Cookie c : ServerCookieDecoder.LAX.decode(raw)) {
                    if (c.name().equals(s.cookie())) {
                        yield c.value();
                    }
                }
                yield null;
            }
            default -> null;
        };
    }
}
