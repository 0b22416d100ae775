package io.kvgate.dataplane.http;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.dataplane.exchange.RequestContext;
import io.kvgate.dataplane.metrics.GatewayMetrics;
import io.kvgate.dataplane.metrics.StageTimers.Stage;
import io.kvgate.dataplane.prompt.PromptPipeline;
import io.kvgate.dataplane.prompt.TemplateWarnings;
import io.kvgate.dataplane.request.PriorityInputs;
import io.kvgate.dataplane.request.Problem;
import io.kvgate.dataplane.request.Refusal;
import io.kvgate.dataplane.request.RequestFieldExtractor;
import io.kvgate.dataplane.request.RequestFields;
import io.kvgate.dataplane.request.RequestValidator;
import io.kvgate.dataplane.request.ToolChoiceCheck;
import io.kvgate.dataplane.route.AdapterDirectory;
import io.kvgate.dataplane.route.RouteTable;
import io.kvgate.dataplane.route.Rule;
import io.kvgate.dataplane.trace.RequestTrace;
import io.netty.handler.codec.http.HttpRequest;

/**
 * The validate stage: the body scanned once, in place, into typed fields and checked against the OpenAI contract,
 * the rule of its model resolved (from the table captured at the head), then the rule's own bounds. {@link #rule}
 * is what every body route needs (render routes stop there); {@link #generation} adds what only a request that will
 * generate needs: greedy {@code n}, sampling, tool choice, an endpoint serving the route, the priority headers, and
 * the explain and warning the answer carries. Each returns the refusal or null. Event-loop only; no channel needed.
 */
final class ValidateStage {
    private final GatewayMetrics metrics;
    private final NanoClock clock;
    /** The discovered LoRA adapter a model names on a table, or null (the routing stage's adapter directory). */
    private final AdapterLookup adapters;

    /** Where the names of discovered LoRA adapters are looked up. */
    @FunctionalInterface
    interface AdapterLookup {
        AdapterDirectory.Served lookup(RouteTable table, String model);
    }

    ValidateStage(GatewayMetrics metrics, NanoClock clock, AdapterLookup adapters) {
        this.metrics = metrics;
        this.clock = clock;
        this.adapters = adapters;
    }

    /** The body validated and its model's rule resolved and bounded: the context's rule is set when this passes. */
    Refusal rule(RequestContext rc) {
        RouteTable table = rc.table();
        RequestFields fields = rc.fields();
        RequestFieldExtractor extractor = rc.extractor();
        // Only the text some rule of this table keys on is decoded (none without a chwbl rule), and only the token ids
        // some rule routes on are kept; the rest of the content is validated by the lexer's skip. The rule comes from
        // the same table.
        extractor.textPrefixChars(table.textPrefixChars()).promptIdsKept(table.promptIdsKept());
        Problem problem = RequestValidator.validate(extractor, fields, rc.chat());
        if (problem != null) {
            return Refusal.of(problem);
        }
        Rule rule = table.ruleForModel(fields.model);
        AdapterDirectory.Served discovered = null;
        if (rule == null) {
            // Not a configured name: maybe a LoRA adapter some vLLM endpoints list (discovered from GET /v1/models).
            discovered = adapters.lookup(table, fields.model);
            rule = discovered == null ? null : discovered.rule();
        }
        if (rule == null || rc.tenant() != null && !rc.tenant().allows(fields.model)) {
            // A model outside the tenant's allow-list gets the answer of a model that does not exist: whether it does
            // is none of the tenant's business.
            return Refusal.model("model_not_found", "The model `" + fields.model + "` does not exist.", "model_not_found");
        }
        rc.rule(rule, discovered);
        rc.access().rule = rule.name();
        problem = RequestValidator.withinRule(fields, rc.chat(), rule.name(), rule.config().maxN(),
            rule.config().maxPromptTokens());
        return problem == null ? null : Refusal.of(problem);
    }

    /** The checks of a request that generates (chat, completions), after {@link #rule}. */
    Refusal generation(RequestContext rc) {
        Rule rule = rc.rule();
        RequestFields fields = rc.fields();
        Problem p = RequestValidator.greedyN(fields, rule.config().greedyN()); // generation only: render routes render
        if (p != null) {
            return Refusal.of(p);
        }
        p = RequestValidator.sampling(fields, rule.name(), rule.config().speculative(), rule.config().maxLogitBias(),
            rule.requestStage() instanceof PromptPipeline pipeline ? pipeline.vocabSize() : 0);
        if (fields.hasLogitBias && fields.logitBiasEntries > 0) {
            metrics.logitBias(rule.name(), p == null ? "accepted" : "refused");
        }
        if (p != null) {
            return Refusal.of(p);
        }
        p = rc.chat() ? ToolChoiceCheck.problem(fields, rule.config()) : null;
        if (p != null) {
            return Refusal.of(p);
        }
        int[] serving = servingEndpoints(rule, rc.chat(), rc.discovered());
        if (serving != null && serving.length == 0) {
            return routeNotServed(rc);
        }
        rc.servingEndpoints(serving);
        long parsedNs = clock.nanoTime();
        metrics.stages.recordNs(Stage.PARSE, parsedNs - rc.startNs());
        RequestTrace trace = rc.trace();
        if (trace != null) {
            trace.stage("kvgate.parse", rc.startNs(), parsedNs);
            trace.request(fields.model, rule.name(), rule.profile().name(),
                fields.hasMaxCompletionTokens ? fields.maxCompletionTokens : fields.hasMaxTokens ? fields.maxTokens : 0,
                fields.n, fields.stream, rc.requestId());
        }
        HttpRequest head = rc.head();
        // X-Kvgate-Explain shows endpoints, their load and (kv_exact) what they cache for this prompt: a cross-tenant
        // cache oracle unless the caller holds the admin token (a rule with explain: true explains every request).
        rc.explain(explainAsked(head) && ApiKeyAuth.adminTokenPresented(rc.config().adminToken(), head.headers()));
        p = PriorityInputs.problem(head.headers());
        if (p != null) {
            return Refusal.of(p);
        }
        rc.warning(rc.chat() ? TemplateWarnings.forRequest(rule, fields) : null);
        return null;
    }

    /**
     * The only endpoints that may take this request (sorted ids), or null for any: those listing its discovered LoRA
     * adapter, and of those the ones that mount its route when some endpoint of the rule is known not to (review row
     * 27: a pooling-only vLLM, an SGLang embedding server). Empty when none does. Allocates only when both apply.
     */
    private static int[] servingEndpoints(Rule rule, boolean chat, AdapterDirectory.Served discovered) {
        int[] byRoute = rule.endpointsServing(chat);
        int[] byAdapter = discovered == null ? null : discovered.endpointIds();
        if (byRoute == null || byAdapter == null) {
            return byRoute == null ? byAdapter : byRoute;
        }
        return java.util.Arrays.stream(byAdapter).filter(id -> java.util.Arrays.binarySearch(byRoute, id) >= 0).toArray();
    }

    /**
     * No endpoint of the rule serves the request's route: OpenAI's answer for a model used on a route it does not
     * support (404 {@code invalid_request_error}, {@code param} model), with the gateway's code, before any engine.
     */
    private static Refusal routeNotServed(RequestContext rc) {
        String p = io.kvgate.dataplane.ready.EngineRoutes.route(rc.chat());
        return Refusal.model("route_not_served", "The model `" + rc.fields().model + "` is not served on " + p
            + ": no endpoint of rule '" + rc.rule().name() + "' mounts that route (its engines serve another task, e.g."
            + " a pooling model).", "route_not_served");
    }

    private static boolean explainAsked(HttpRequest req) {
        String v = req.headers().get("x-kvgate-explain");
        return "1".equals(v) || "true".equalsIgnoreCase(v);
    }
}
