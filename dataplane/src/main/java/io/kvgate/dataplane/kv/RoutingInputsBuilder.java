package io.kvgate.dataplane.kv;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.request.RequestFields;
import io.kvgate.dataplane.metrics.GatewayMetrics;
import io.kvgate.dataplane.metrics.StageTimers.Stage;
import io.kvgate.dataplane.request.RoutingInputs;
import io.kvgate.dataplane.route.Rule;
import io.kvgate.dataplane.route.RulePolicies;
import io.kvgate.index.prompt.PromptException;
import io.kvgate.index.prompt.RenderedPrompt;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaders;
import io.netty.handler.codec.http.cookie.Cookie;
import io.netty.handler.codec.http.cookie.ServerCookieDecoder;

/**
 * Computes a request's {@link RoutingInputs} on its I/O thread, before the routing ring: render + tokenize only for
 * rules whose policy needs the prompt, the session key only for session rules. A prompt the pipeline cannot render
 * is not an error here (the engine will judge the request): the request is routed by the fallback and counted.
 * Stateless; any I/O thread.
 */
public final class RoutingInputsBuilder {
    private RoutingInputsBuilder() {}

    public static RoutingInputs build(Rule rule, HttpHeaders headers, ByteBuf body, RequestFields fields, boolean chat,
                                      GatewayMetrics metrics, NanoClock clock) {
        JsonNode tree = null;
        if (rule.needsPromptTokens() && (PromptPipeline.of(rule).hasTokenizer() || (!chat && fields.promptIsTokenIds))) {
            long t0 = clock.nanoTime();
            try {
                tree = PromptPipeline.parse(ByteBufUtil.getBytes(body));
            } catch (PromptException e) {
                metrics.shed("kv_render_failed");
            }
            metrics.stages.recordNs(Stage.PARSE, clock.nanoTime() - t0);
        }
        return build(rule, headers, tree, fields, chat, metrics, clock);
    }

    /** As above, for a body the caller already parsed (P/D edits it as a tree anyway); null = unparseable. */
    public static RoutingInputs build(Rule rule, HttpHeaders headers, JsonNode tree, RequestFields fields, boolean chat,
                                      GatewayMetrics metrics, NanoClock clock) {
        RuleConfig rc = rule.config();
        String session = RulePolicies.needsSessionKey(rc) ? sessionKey(rc.session(), headers, fields) : null;
        if (!rule.needsPromptTokens()) {
            return session == null ? RoutingInputs.NONE : new RoutingInputs(null, null, session);
        }
        if (!PromptPipeline.of(rule).hasTokenizer() && (chat || !fields.promptIsTokenIds)) {
            metrics.shed("kv_no_tokenizer_text_prompt");
            return new RoutingInputs(null, null, session);
        }
        if (tree == null) {
            return new RoutingInputs(null, null, session);
        }
        return fromTree(rule, tree, chat, session, metrics, clock);
    }

    private static RoutingInputs fromTree(Rule rule, JsonNode tree, boolean chat, String session, GatewayMetrics metrics,
                                          NanoClock clock) {
        PromptPipeline p = PromptPipeline.of(rule);
        try {
            String salt = tree.path("cache_salt").isTextual() ? tree.get("cache_salt").asText() : null;
            long t1 = clock.nanoTime();
            int[] tokens;
            if (chat) {
                String text = p.renderChatText(tree);
                long t2 = clock.nanoTime();
                metrics.stages.recordNs(Stage.RENDER, t2 - t1);
                tokens = p.encodeChat(text);
                metrics.stages.recordNs(Stage.TOKENIZE, clock.nanoTime() - t2);
            } else {
                RenderedPrompt rp = p.renderCompletion(tree);
                metrics.stages.recordNs(Stage.TOKENIZE, clock.nanoTime() - t1);
                tokens = rp == null ? null : rp.tokenIds();
            }
            return new RoutingInputs(tokens, salt, session);
        } catch (PromptException | RuntimeException e) {
            metrics.shed("kv_render_failed");
            return new RoutingInputs(null, null, session);
        }
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
