package io.kvgate.dataplane.http;

import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.exchange.RequestContext;
import io.kvgate.dataplane.metrics.GatewayMetrics;
import io.kvgate.dataplane.request.AnswerRewrite;
import io.kvgate.dataplane.request.EngineDialect;
import io.kvgate.dataplane.request.EngineFieldStripper;
import io.kvgate.dataplane.request.JsonMembers;
import io.kvgate.dataplane.request.RequestEdits;
import io.kvgate.dataplane.request.RequestFields;
import io.kvgate.dataplane.route.RulePolicies;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;

/**
 * The forward-body stage: the body the engine gets. {@link #stripEngineFields} removes what only engines may set,
 * before the prompt stage reads the body; {@link #run} then puts the request in the rule's engine's dialect, applies
 * the edits the answer rewrite needs, and gives SGLang its LoRA form. A request that needs no edit keeps its body
 * buffer as it is (the byte-for-byte path: no copy). Refuses nothing. Event-loop only; no channel needed.
 */
final class ForwardBody {
    private final GatewayMetrics metrics;

    ForwardBody(GatewayMetrics metrics) {
        this.metrics = metrics;
    }

    /**
     * Removes the client's engine-internal members, in place; on a rule whose index counts each copy an engine
     * announces, also vLLM's {@code kv_cache_report_mode} (a client's {@code "full"} would leak "held" blocks).
     */
    void stripEngineFields(RequestContext rc) {
        RequestFields fields = rc.fields();
        if (fields.engineFieldRangeCount > 0) {
            if (!countsEngineCopies(rc.rule().config())) {
                fields.keepReportModeXarg();
            }
            metrics.engineFieldsRemoved.add(EngineFieldStripper.strip(rc.body(), fields));
        }
    }

    /**
     * The edits that put the request in the rule's engine's dialect ({@link EngineDialect}: temperature floor, the
     * stop-string switch's spelling, an empty logit_bias) and those of the answer rewrite this request needs (model
     * alias, greedy {@code n}, forced usage), spliced into the body in one pass over the recorded field ranges (read
     * again first when an earlier stage changed the body: the engine-field strip, the context clamp); then SGLang's
     * LoRA form.
     */
    void run(RequestContext rc, ByteBufAllocator alloc) {
        RequestFields fields = rc.fields();
        RequestEdits edits = rc.edits();
        EngineDialect.plan(fields, rc.rule().profile(), rc.body(), edits);
        fields.answerRewrite = AnswerRewrite.plan(fields, rc.rule().config(), rc.body(), edits);
        if (!edits.isEmpty()) {
            rc.body(edits.apply(rc.body(), fields, alloc));
            edits.reset();
        }
        if (rc.rule().profile().namesAdapterInLoraPath()) {
            // After the prompt stage: its in-place edits (a clamped budget) use the offsets the body stage recorded.
            sglangLoraForm(rc, alloc);
        }
    }

    /**
     * SGLang's LoRA form: the request keeps the client's {@code model} (SGLang then echoes the adapter name, as vLLM
     * does) and gets {@code "lora_path": "<adapter>"} as its last member, which SGLang's {@code _resolve_lora_path}
     * reads when {@code model} has no {@code base:adapter} colon (rule names never do on SGLang). A base-model request
     * that carries a client {@code lora_path} gets {@code "lora_path": null} last: the engine must run exactly what
     * the gateway routed and hashed for.
     */
    private static void sglangLoraForm(RequestContext rc, ByteBufAllocator alloc) {
        RequestFields fields = rc.fields();
        String adapter = rc.rule().config().entryFor(fields.model) == null ? fields.model : null;
        if (adapter == null && !fields.hasLoraPath) {
            return;
        }
        ByteBuf body = rc.body();
        ByteBuf edited = JsonMembers.append(body, "lora_path", adapter == null ? "null" : JsonMembers.quote(adapter), alloc);
        body.release();
        rc.body(edited);
    }

    /**
     * Whether the rule routes on an index that counts each copy vLLM announces ({@code kv_exact}, or a P/D rule whose
     * prefill leg is): there a client's {@code vllm_xargs.kv_cache_report_mode: "full"} would leak "held" blocks.
     */
    private static boolean countsEngineCopies(RuleConfig rule) {
        return rule.policyKind() == RuleConfig.Policy.KV_EXACT || RulePolicies.prefillKvExact(rule);
    }
}
