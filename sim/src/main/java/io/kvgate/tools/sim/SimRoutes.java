package io.kvgate.tools.sim;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufInputStream;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import java.io.IOException;
import java.io.InputStream;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * The routes each dialect mounts, and what each answers. A path the dialect does not mount gets FastAPI's
 * {@code 404 {"detail":"Not Found"}}, a mounted path with another method {@code 405 {"detail":"Method Not
 * Allowed"}}, as the engines' FastAPI apps do. Engine-loop confined.
 */
final class SimRoutes {
    private static final JsonNodeFactory JSON = JsonNodeFactory.instance;

    /** One request being routed. */
    record Call(ChannelHandlerContext ctx, FullHttpRequest req, SimHttpHandler handler, String path,
                String requestId, boolean keepAlive) {}

    /** A mounted route; returns the generation when the answer is still in progress, else null. */
    @FunctionalInterface
    private interface Handler {
        Generation handle(Call call);
    }

    private record Route(Set<HttpMethod> methods, Handler handler) {}

    private static final Set<HttpMethod> GET = Set.of(HttpMethod.GET);
    private static final Set<HttpMethod> POST = Set.of(HttpMethod.POST);
    private static final Set<HttpMethod> GET_POST = Set.of(HttpMethod.GET, HttpMethod.POST);

    private final EngineSimulator engine;
    private final SimulatorConfig config;
    private final SimReplies replies;
    private final Map<String, Route> exact = new HashMap<>();

    SimRoutes(EngineSimulator engine) {
        this.engine = engine;
        this.config = engine.config;
        this.replies = engine.replies;
        Dialect dialect = config.dialect;
        if (config.pooling && dialect == Dialect.VLLM) {
            // --runner pooling: register_pooling_api_routers instead of the generation family (one per process).
            exact.put("/v1/embeddings", new Route(POST, this::embeddings));
        } else if (config.pooling) {
            // SGLang mounts every route at import time; an embedding model's scheduler cannot generate.
            // (The message is the simulator's: the write-up does not quote SGLang's words for this case.)
            Handler refuse = c -> {
                engine.stats.inc("generation_refused_pooling");
                throw SimError.badRequest("This model does not appear to be a generation model: it was launched with "
                    + "`--is-embedding`.");
            };
            exact.put("/v1/chat/completions", new Route(POST, refuse));
            exact.put("/v1/completions", new Route(POST, refuse));
        } else {
            exact.put("/v1/chat/completions", new Route(POST, c -> engine.generate(c, true)));
            exact.put("/v1/completions", new Route(POST, c -> engine.generate(c, false)));
        }
        exact.put("/v1/models", new Route(GET, config.llamaRouter ? this::llamaRouterModels : this::models));
        exact.put("/health", new Route(GET, switch (dialect) {
            case VLLM -> this::vllmHealth;
            case SGLANG -> this::sglangHealth;
            case TRTLLM -> this::trtllmHealth;
            case LLAMACPP -> this::llamaHealth;
        }));
        if (config.metricsMounted()) {
            exact.put("/metrics", new Route(GET, dialect == Dialect.TRTLLM ? this::trtllmIterationStats
                : config.llamaRouter ? c -> metrics(routedToModel(c)) : this::metrics));
        }
        if (dialect == Dialect.TRTLLM && config.enableMetrics) {
            // return_perf_metrics: OpenAIServer.mount_metrics serves prometheus_client's page here
            exact.put("/prometheus/metrics", new Route(GET, this::metrics));
        }
        if (dialect == Dialect.LLAMACPP) {
            exact.put("/slots", new Route(GET, this::llamaSlots));
            exact.put("/props", new Route(GET, this::llamaProps));
        } else if (dialect == Dialect.TRTLLM) {
            exact.put("/health_generate", new Route(GET, this::trtllmHealthGenerate));
            exact.put("/version", new Route(GET, c -> json(c, JSON.objectNode().put("version", "sim"))));
            exact.put("/kv_cache_events", new Route(POST, this::trtllmKvCacheEvents));
        } else if (dialect == Dialect.VLLM) {
            exact.put("/reset_prefix_cache", new Route(POST, this::resetPrefixCache));
            // /v1/embeddings is not mounted on a generation server: FastAPI's 404.
            // FastAPI publishes its route table (what a gateway reads to learn which routes this process serves).
            exact.put("/openapi.json", new Route(GET, this::openApi));
            // vLLM's own render routes (OpenAIServingRender, vllm PR #36166): the GenerateRequest it would run
            if (!config.pooling) {
                exact.put("/v1/chat/completions/render", new Route(POST, c -> vllmRender(c, true)));
                exact.put("/v1/completions/render", new Route(POST, c -> vllmRender(c, false)));
            }
        } else {
            // /server_info since sgl-project/sglang#21463; /get_server_info its deprecated alias (removed later)
            if (!config.serverInfoRoutes.equals("server_info")) {
                exact.put("/get_server_info", new Route(GET, this::serverInfo));
            }
            if (!config.serverInfoRoutes.equals("get_server_info")) {
                exact.put("/server_info", new Route(GET, this::serverInfo));
            }
            exact.put("/health_generate", new Route(GET, this::healthGenerate));
            exact.put("/flush_cache", new Route(GET_POST, this::resetPrefixCache));
            exact.put("/v1/embeddings", new Route(POST, config.pooling ? this::embeddings : c -> {
                engine.stats.inc("embeddings_requests");
                throw SimError.badRequest("This model does not appear to be an embedding model by default. "
                    + "Please add `--is-embedding` when launching the server or try another model.");
            }));
        }
        exact.put("/sim/stats", new Route(GET, c -> json(c, engine.statsJson())));
        exact.put("/sim/faults", new Route(POST, this::faults));
        exact.put("/sim/loaded", new Route(POST, c -> {
            engine.finishLoading();
            return json(c, JSON.objectNode().put("loaded", true));
        }));
        exact.put("/sim/restart", new Route(POST, c -> {
            engine.restartOnLoop();
            return json(c, JSON.objectNode().put("restarted", true));
        }));
    }

    Generation dispatch(ChannelHandlerContext ctx, FullHttpRequest req, SimHttpHandler handler, String requestId) {
        String uri = req.uri();
        int q = uri.indexOf('?');
        String path = q >= 0 ? uri.substring(0, q) : uri;
        Call call = new Call(ctx, req, handler, path, requestId, HttpUtil.isKeepAlive(req));
        try {
            Route route = exact.get(path);
            if (route == null && config.dialect == Dialect.SGLANG && path.startsWith("/v1/models/")) {
                // SGLang: @app.get("/v1/models/{model:path}"); vLLM mounts no retrieve route.
                route = new Route(GET, this::retrieveModel);
            }
            if (route == null) {
                engine.stats.inc("not_found");
                replies.detail(ctx, HttpResponseStatus.NOT_FOUND, "Not Found", requestId, call.keepAlive());
                return null;
            }
            if (!route.methods().contains(req.method())) {
                replies.detail(ctx, HttpResponseStatus.METHOD_NOT_ALLOWED, "Method Not Allowed", requestId,
                    call.keepAlive());
                return null;
            }
            return route.handler().handle(call);
        } catch (SimError e) {
            engine.stats.inc("errors_" + e.status);
            replies.error(ctx, e, requestId, call.keepAlive());
            return null;
        }
    }

    /**
     * vLLM's {@code POST /v1/chat/completions/render} and {@code /v1/completions/render}: the engine's own render, a
     * {@code GenerateRequest} ({@code request_id}, {@code token_ids}, {@code features}, {@code sampling_params}) for a
     * chat, a list of them (one per prompt) for completions; nothing is generated. Not the gateway's render shape
     * ({@code prompt}, {@code prompt_token_ids}, {@code block_keys}), which is why the gateway must not shadow these paths.
     */
    private Generation vllmRender(Call c, boolean chat) {
        engine.stats.inc("render_requests");
        CompletionRequest cr = CompletionRequest.parse(chat, parseJson(c.req(), engine.stats, config), config, engine.loras);
        cr.applyContext(engine.tokenizer, config);
        com.fasterxml.jackson.databind.node.ArrayNode out = JSON.arrayNode();
        for (int[] prompt : cr.prompts) {
            ObjectNode g = out.addObject();
            g.put("request_id", "render-" + c.requestId());
            com.fasterxml.jackson.databind.node.ArrayNode ids = g.putArray("token_ids");
            for (int t : prompt) {
                ids.add(t);
            }
            g.putNull("features");
            g.putObject("sampling_params").put("max_tokens", cr.maxTokens != null && cr.maxTokens.length > 0
                ? cr.maxTokens[0] : config.contextLen - prompt.length);
        }
        return json(c, chat ? out.get(0) : out);
    }

    /**
     * vLLM {@code GET /openapi.json}: FastAPI's schema of the app, whose {@code paths} are the routes this process
     * mounted (each with its methods; the operation objects are left empty here). The simulator's own
     * {@code /sim/*} routes are not listed.
     */
    private Generation openApi(Call c) {
        engine.stats.inc("openapi_requests");
        ObjectNode root = JSON.objectNode();
        root.put("openapi", "3.1.0");
        root.putObject("info").put("title", "FastAPI").put("version", "0.1.0");
        ObjectNode paths = root.putObject("paths");
        for (Map.Entry<String, Route> e : new java.util.TreeMap<>(exact).entrySet()) {
            if (e.getKey().startsWith("/sim/")) {
                continue;
            }
            ObjectNode ops = paths.putObject(e.getKey());
            for (HttpMethod m : e.getValue().methods()) {
                ops.putObject(m.name().toLowerCase(Locale.ROOT));
            }
        }
        return json(c, root);
    }

    /**
     * {@code POST /v1/embeddings} on a pooling model: one vector per input (a string or a list of strings), 8
     * dimensions derived from the input's tokens, L2-normalised, in OpenAI's list shape with usage.
     */
    private Generation embeddings(Call c) {
        engine.stats.inc("embeddings_requests");
        JsonNode body = parseJson(c.req(), engine.stats);
        JsonNode input = body.get("input");
        java.util.List<String> inputs = new java.util.ArrayList<>();
        if (input != null && input.isTextual()) {
            inputs.add(input.asText());
        } else if (input != null && input.isArray() && !input.isEmpty()) {
            for (JsonNode i : input) {
                if (!i.isTextual()) {
                    throw SimError.badRequest("input: entries must be strings", "input");
                }
                inputs.add(i.asText());
            }
        } else {
            throw SimError.badRequest("Field required: input (a string or a non-empty list of strings)", "input");
        }
        ObjectNode root = JSON.objectNode();
        root.put("object", "list");
        ArrayNode data = root.putArray("data");
        int tokens = 0;
        for (int i = 0; i < inputs.size(); i++) {
            int[] ids = engine.tokenizer.encodeText(inputs.get(i));
            tokens += ids.length;
            double[] v = new double[8];
            for (int k = 0; k < ids.length; k++) {
                v[(ids[k] + k) & 7] += 1 + (ids[k] % 13);
            }
            double norm = 0;
            for (double x : v) {
                norm += x * x;
            }
            norm = norm == 0 ? 1 : Math.sqrt(norm);
            ObjectNode e = data.addObject();
            e.put("object", "embedding");
            e.put("index", i);
            ArrayNode vec = e.putArray("embedding");
            for (double x : v) {
                vec.add(x / norm);
            }
        }
        root.put("model", body.path("model").isTextual() ? body.get("model").asText() : config.model);
        root.putObject("usage").put("prompt_tokens", tokens).put("total_tokens", tokens);
        return json(c, root);
    }

    private Generation json(Call c, JsonNode body) {
        replies.json(c.ctx(), HttpResponseStatus.OK, body, c.requestId(), c.keepAlive());
        return null;
    }

    private Generation empty(Call c, HttpResponseStatus status) {
        replies.bytes(c.ctx(), status, new byte[0], "application/json", c.requestId(), c.keepAlive());
        return null;
    }

    // ---------------------------------------------------------------------------------------------- models

    /**
     * {@code GET /v1/models}. vLLM: the base model with {@code max_model_len}, then one card per LoRA adapter with
     * {@code parent} = the base model (vllm/entrypoints/openai/models/serving.py). SGLang: the served model with
     * {@code max_model_len}; adapters are not listed.
     */
    private Generation models(Call c) {
        engine.stats.inc("models_requests");
        ObjectNode root = JSON.objectNode();
        root.put("object", "list");
        ArrayNode data = root.putArray("data");
        data.add(modelCard(config.model, config.model, null, true));
        if (config.dialect == Dialect.VLLM) {
            for (LoraAdapters.Adapter a : engine.loras.all()) {
                data.add(modelCard(a.name(), a.path(), config.model, false));
            }
        }
        return json(c, root);
    }

    /** SGLang {@code GET /v1/models/{model:path}}: the card, or its own OpenAI-shaped 404. */
    private Generation retrieveModel(Call c) {
        String id = URLDecoder.decode(c.path().substring("/v1/models/".length()), StandardCharsets.UTF_8);
        if (!id.equals(config.model)) {
            ObjectNode body = JSON.objectNode();
            ObjectNode e = body.putObject("error");
            String message = "The model '" + id + "' does not exist";
            e.put("message", message);
            e.put("type", "invalid_request_error");
            e.put("param", "model");
            e.put("code", "model_not_found");
            throw SimError.withBody(404, message, body);
        }
        return json(c, modelCard(id, id, null, true));
    }

    private ObjectNode modelCard(String id, String root, String parent, boolean base) {
        boolean vllm = config.dialect == Dialect.VLLM;
        ObjectNode m = JSON.objectNode();
        m.put("id", id);
        m.put("object", "model");
        m.put("created", config.epochSeconds.getAsLong());
        if (config.dialect == Dialect.TRTLLM) {
            // openai_protocol.ModelCard: id, object, created, owned_by — no context length to discover
            m.put("owned_by", "tensorrt_llm");
            return m;
        }
        m.put("owned_by", vllm ? "vllm" : "sglang");
        m.put("root", root);
        if (vllm) {
            if (parent != null) {
                m.put("parent", parent);
            } else {
                m.putNull("parent");
            }
        }
        if (base) {
            m.put("max_model_len", config.contextLen);
        } else {
            m.putNull("max_model_len");
        }
        if (vllm) {
            ObjectNode p = m.putArray("permission").addObject();
            p.put("id", "modelperm-" + Integer.toHexString(id.hashCode()));
            p.put("object", "model_permission");
            p.put("created", config.epochSeconds.getAsLong());
            p.put("allow_create_engine", false);
            p.put("allow_sampling", true);
            p.put("allow_logprobs", true);
            p.put("allow_search_indices", false);
            p.put("allow_view", true);
            p.put("allow_fine_tuning", false);
            p.put("organization", "*");
            p.putNull("group");
            p.put("is_blocking", false);
        }
        return m;
    }

    /**
     * SGLang's server info: its server args (which include {@code context_length} as launched; the simulator is
     * always launched with one), scheduler info and version. What a gateway reads to learn the page size, DP size
     * and P/D mode.
     */
    private Generation serverInfo(Call c) {
        engine.stats.inc("server_info_requests");
        if (c.path().equals("/get_server_info")) {
            engine.stats.inc("get_server_info_requests"); // the deprecated alias (SGLang logs a warning per call)
        }
        ObjectNode o = JSON.objectNode();
        o.put("model_path", config.model);
        o.put("served_model_name", config.model);
        o.put("page_size", engine.caches.blockSize());
        o.put("dp_size", config.dpRanks);
        o.put("context_length", config.contextLen);
        o.put("enable_lora", engine.loras.enabled());
        o.put("disaggregation_mode", config.role == SimulatorConfig.Role.BOTH ? "null"
            : config.role.name().toLowerCase(Locale.ROOT));
        if (engine.bootstrapPort() >= 0) {
            o.put("disaggregation_bootstrap_port", engine.bootstrapPort());
        }
        o.put("enable_metrics", config.enableMetrics);
        o.put("is_embedding", config.pooling);
        if (config.toolCallParser != null) {
            o.put("tool_call_parser", config.toolCallParser);
        } else {
            o.putNull("tool_call_parser");
        }
        if (config.speculativeAlgorithm != null) {
            o.put("speculative_algorithm", config.speculativeAlgorithm);
        } else {
            o.putNull("speculative_algorithm");
        }
        // The KV-event descriptor (describe_kv_events_publisher): where rank r publishes (port base + r), the topic,
        // the width subscribers must hash at (page_size x dcp_size) and the DP size; null without a publisher.
        SimulatorConfig.Endpoint kv = config.kvEventsEndpoint == null ? null : SimulatorConfig.Endpoint.parse(config.kvEventsEndpoint);
        if (kv == null) {
            o.putNull("kv_events");
        } else {
            o.putObject("kv_events").put("publisher", "zmq").put("endpoint_host", kv.host())
                .put("endpoint_port_base", kv.port()).put("topic", config.kvTopic).put("block_size", engine.caches.blockSize())
                .put("dp_size", config.dpRanks);
        }
        o.put("version", "sim");
        return json(c, o);
    }

    // ---------------------------------------------------------------------------------------------- health

    /** vLLM {@code /health}: {@code check_health()} of the engine core; 503 when it is dead. */
    private Generation vllmHealth(Call c) {
        engine.stats.inc("health_requests");
        return empty(c, engine.faults.unhealthy ? HttpResponseStatus.SERVICE_UNAVAILABLE : HttpResponseStatus.OK);
    }

    /**
     * SGLang {@code /health}: 200 as long as the HTTP server runs, without touching the scheduler, so a wedged
     * engine still answers 200 — unless the server runs with {@code SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION}
     * ({@code --health-generates}), which makes it the deep probe.
     */
    private Generation sglangHealth(Call c) {
        engine.stats.inc("health_requests");
        if (config.sglangHealthGenerates) {
            return healthGenerate(c);
        }
        return empty(c, HttpResponseStatus.OK);
    }

    /**
     * SGLang {@code /health_generate}: pushes a one-token request into the engine and answers 200 once the
     * scheduler produced output. With a free slot that takes one first-token delay; on a saturated engine the probe
     * waits for running work to finish (it queues behind live traffic); a wedged engine ({@code unhealthy} fault)
     * never answers it, and after {@code HEALTH_CHECK_TIMEOUT} ({@code --health-timeout-ms}) the probe gets 503.
     */
    private Generation healthGenerate(Call c) {
        engine.stats.inc("health_generate_requests");
        SimHttpHandler handler = c.handler();
        handler.defer();
        ScheduledFuture<?>[] timeout = new ScheduledFuture<?>[1];
        boolean[] answered = new boolean[1];
        Runnable ok = () -> {
            if (answered[0] || engine.faults.unhealthy) {
                return;
            }
            answered[0] = true;
            if (timeout[0] != null) {
                timeout[0].cancel(false);
            }
            if (c.ctx().channel().isActive()) {
                empty(c, HttpResponseStatus.OK);
            }
            handler.completeDeferred();
        };
        timeout[0] = engine.loop().schedule(() -> {
            if (answered[0]) {
                return;
            }
            answered[0] = true;
            engine.stats.inc("health_generate_timeouts");
            if (c.ctx().channel().isActive()) {
                empty(c, HttpResponseStatus.SERVICE_UNAVAILABLE);
            }
            handler.completeDeferred();
        }, config.healthTimeoutMs, TimeUnit.MILLISECONDS);
        if (engine.faults.unhealthy) {
            return null; // the scheduler never answers; the timeout does
        }
        if (engine.admission.hasFreeSlot()) {
            engine.loop().schedule(ok, engine.latency.firstTokenDelayNs(1), TimeUnit.NANOSECONDS);
        } else {
            engine.stats.inc("health_generate_queued");
            engine.admission.onProgress(ok);
        }
        return null;
    }

    /**
     * trtllm-serve {@code /health}: 200 with no body, or 503 with a plain-text reason when the executor is dead
     * ({@code unhealthy} fault).
     */
    private Generation trtllmHealth(Call c) {
        engine.stats.inc("health_requests");
        if (engine.faults.unhealthy) {
            return text(c, HttpResponseStatus.SERVICE_UNAVAILABLE,
                "LLM is unavailable. Please check the server logs for more details.");
        }
        return empty(c, HttpResponseStatus.OK);
    }

    /**
     * trtllm-serve {@code /health_generate}: runs a one-token chat request; 200 "Generation health check OK", or
     * 500 "Generation health check failed" when the engine cannot generate ({@code unhealthy} fault). Like SGLang's,
     * it waits for a free slot when the engine is saturated.
     */
    private Generation trtllmHealthGenerate(Call c) {
        engine.stats.inc("health_generate_requests");
        if (engine.faults.unhealthy) {
            return text(c, HttpResponseStatus.INTERNAL_SERVER_ERROR, "Generation health check failed");
        }
        SimHttpHandler handler = c.handler();
        handler.defer();
        Runnable ok = () -> {
            if (c.ctx().channel().isActive()) {
                text(c, HttpResponseStatus.OK, "Generation health check OK");
            }
            handler.completeDeferred();
        };
        if (engine.admission.hasFreeSlot()) {
            engine.loop().schedule(ok, engine.latency.firstTokenDelayNs(1), TimeUnit.NANOSECONDS);
        } else {
            engine.admission.onProgress(ok);
        }
        return null;
    }

    /**
     * llama-server {@code /health}: {@code {"status":"ok"}}, or 503 {@code unavailable_error} "Loading model" while
     * the model loads (not a failure: the server is up and will be ready).
     */
    private Generation llamaHealth(Call c) {
        engine.stats.inc("health_requests");
        if (engine.loading() && !config.llamaRouter) { // a router's /health is its own: up while a model loads
            replies.json(c.ctx(), HttpResponseStatus.SERVICE_UNAVAILABLE, SimReplies.llamaError(503, "Loading model"),
                c.requestId(), c.keepAlive());
            return null;
        }
        if (engine.faults.unhealthy) {
            replies.json(c.ctx(), HttpResponseStatus.INTERNAL_SERVER_ERROR, SimReplies.llamaError(500,
                "simulated server failure"), c.requestId(), c.keepAlive());
            return null;
        }
        return json(c, JSON.objectNode().put("status", "ok"));
    }

    /** llama-server {@code GET /slots} ({@code ?fail_on_no_slot=1}: 503 when every slot is busy). */
    private Generation llamaSlots(Call c) {
        if (config.llamaRouter) {
            routedToModel(c);
        }
        if (engine.loading()) {
            throw SimError.withBody(503, "Loading model", SimReplies.llamaError(503, "Loading model"));
        }
        if (c.req().uri().contains("fail_on_no_slot=1") && !engine.slots.anyIdle()) {
            throw SimError.withBody(503, "no slot available", SimReplies.llamaError(503, "no slot available"));
        }
        return json(c, engine.slots.toJson(config.model));
    }

    /**
     * llama-server {@code GET /props}: {@code default_generation_settings} (whose {@code n_ctx} is one slot's context,
     * what one request gets), {@code total_slots} and the model path (tools/server/README.md "GET /props"). 503 while
     * the model loads, as every route but {@code /health}.
     */
    private Generation llamaProps(Call c) {
        if (config.llamaRouter) {
            if (queryParam(c, "model") == null) {
                return llamaRouterProps(c);
            }
            routedToModel(c);
        }
        if (engine.loading()) {
            throw SimError.withBody(503, "Loading model", SimReplies.llamaError(503, "Loading model"));
        }
        engine.stats.inc("props_requests");
        ObjectNode o = JSON.objectNode();
        ObjectNode settings = o.putObject("default_generation_settings");
        settings.put("id", 0);
        settings.put("id_task", -1);
        settings.put("n_ctx", engine.slots.slotContext());
        settings.put("speculative", false);
        settings.put("is_processing", false);
        settings.putObject("params").put("n_predict", -1);
        o.put("total_slots", config.maxConcurrency);
        o.put("model_path", config.model);
        o.put("build_info", "sim");
        return json(c, o);
    }

    /** A query parameter of the request, null when absent. */
    private static String queryParam(Call c, String name) {
        var values = new io.netty.handler.codec.http.QueryStringDecoder(c.req().uri()).parameters().get(name);
        return values == null || values.isEmpty() ? null : values.get(0);
    }

    /**
     * A router's per-model GET route ({@code proxy_get}, tools/server/server-models.cpp {@code router_validate_model}):
     * the model must be named and known; with {@code autoload=false} it must be loaded. Returns the call for chaining.
     */
    private Call routedToModel(Call c) {
        String model = queryParam(c, "model");
        if (model == null || model.isEmpty()) {
            throw SimError.withBody(400, "model name is missing from the request",
                SimReplies.llamaError(400, "model name is missing from the request"));
        }
        if (!model.equals(config.model)) {
            String m = "model '" + model + "' not found";
            throw SimError.withBody(400, m, SimReplies.llamaError(400, m));
        }
        String autoload = queryParam(c, "autoload");
        if (engine.loading() && autoload != null && !autoload.equals("true") && !autoload.equals("1")) {
            throw SimError.withBody(400, "model is not loaded", SimReplies.llamaError(400, "model is not loaded"));
        }
        engine.stats.inc("router_model_requests");
        return c;
    }

    /** A router's own {@code GET /props} ({@code get_router_props} without {@code ?model=}): no context of its own. */
    private Generation llamaRouterProps(Call c) {
        engine.stats.inc("router_props_requests");
        ObjectNode o = JSON.objectNode();
        o.put("role", "router");
        o.put("max_instances", 4);
        o.put("models_autoload", true);
        o.put("model_alias", "llama-server");
        o.put("model_path", "none");
        ObjectNode settings = o.putObject("default_generation_settings");
        settings.putObject("params");
        settings.put("n_ctx", 0);
        o.put("build_info", "sim");
        return json(c, o);
    }

    /**
     * A router's {@code GET /v1/models} ({@code get_router_models}): every model it knows, each with a
     * {@code status} object whose {@code value} is {@code loading} or {@code loaded} here.
     */
    private Generation llamaRouterModels(Call c) {
        engine.stats.inc("models_requests");
        ObjectNode root = JSON.objectNode();
        ArrayNode data = root.putArray("data");
        ObjectNode m = data.addObject();
        m.put("id", config.model);
        m.putArray("aliases");
        m.putArray("tags");
        m.put("object", "model");
        m.put("owned_by", "llamacpp");
        m.put("created", config.epochSeconds.getAsLong());
        ObjectNode status = m.putObject("status");
        status.put("value", engine.loading() ? "loading" : "loaded");
        status.putArray("args");
        root.put("object", "list");
        return json(c, root);
    }

    /** trtllm-serve {@code POST /kv_cache_events}: drains the event buffer (each event is returned once). */
    private Generation trtllmKvCacheEvents(Call c) {
        engine.stats.inc("kv_cache_events_reads");
        return json(c, engine.caches.drainTrtllmEvents());
    }

    /**
     * trtllm-serve {@code /metrics}: a JSON list of iteration stats (not Prometheus), here one snapshot of the
     * fields a load-aware router reads: active and queued requests and the KV block pool.
     */
    private Generation trtllmIterationStats(Call c) {
        ArrayNode list = JSON.arrayNode();
        for (int r = 0; r < config.dpRanks; r++) {
            ObjectNode s = list.addObject();
            s.put("iter", engine.stats.get("generations_started"));
            s.put("timestamp", java.time.Instant.ofEpochSecond(config.epochSeconds.getAsLong()).toString());
            s.put("numActiveRequests", engine.admission.running(r));
            s.put("numQueuedRequests", engine.admission.waiting(r));
            s.put("maxNumActiveRequests", config.maxConcurrency);
            ObjectNode kv = s.putObject("kvCacheStats");
            int used = (int) Math.round(engine.caches.usage(r) * config.cacheBlocks);
            kv.put("maxNumBlocks", config.cacheBlocks);
            kv.put("freeNumBlocks", config.cacheBlocks - used);
            kv.put("usedNumBlocks", used);
            kv.put("tokensPerBlock", engine.caches.blockSize());
            if (config.dpRanks > 1) {
                s.put("attention_dp_rank", r);
            }
        }
        return json(c, list);
    }

    private Generation text(Call c, HttpResponseStatus status, String body) {
        replies.bytes(c.ctx(), status, body.getBytes(StandardCharsets.UTF_8), "text/plain; charset=utf-8",
            c.requestId(), c.keepAlive());
        return null;
    }

    private Generation metrics(Call c) {
        replies.bytes(c.ctx(), HttpResponseStatus.OK, engine.metrics.render().getBytes(StandardCharsets.UTF_8),
            "text/plain; version=0.0.4; charset=utf-8", c.requestId(), c.keepAlive());
        return null;
    }

    // ---------------------------------------------------------------------------------------------- admin

    /** vLLM {@code POST /reset_prefix_cache}, SGLang {@code /flush_cache}: cache emptied, AllBlocksCleared. */
    private Generation resetPrefixCache(Call c) {
        engine.resetPrefixCacheOnLoop();
        return empty(c, HttpResponseStatus.OK);
    }

    private Generation faults(Call c) {
        ChannelFuture change = engine.applyFaults(parseJson(c.req(), engine.stats));
        if (change == null) {
            return json(c, engine.faultsJson());
        }
        change.addListener(f -> replies.json(c.ctx(), HttpResponseStatus.OK, engine.faultsJson(), c.requestId(),
            c.keepAlive()));
        return null;
    }

    static JsonNode parseJson(FullHttpRequest req, SimStats stats, SimulatorConfig config) {
        try {
            return parseJson(req, stats);
        } catch (SimError e) {
            if (config.dialect != Dialect.TRTLLM) {
                throw e;
            }
            // trtllm-serve's RequestValidationError handler: 400 {"error": "<text>"}
            ObjectNode body = JSON.objectNode().put("error", e.getMessage());
            throw SimError.withBody(400, e.getMessage(), body);
        }
    }

    static JsonNode parseJson(FullHttpRequest req, SimStats stats) {
        ByteBuf content = req.content();
        if (content.readableBytes() == 0) {
            throw SimError.badRequest("request body is empty: expected a JSON object");
        }
        try (InputStream in = new ByteBufInputStream(content.duplicate())) {
            JsonNode node = SimReplies.MAPPER.readTree(in);
            if (node == null || !node.isObject()) {
                throw SimError.badRequest("request body must be a JSON object");
            }
            return node;
        } catch (JsonProcessingException e) {
            stats.inc("malformed_json");
            throw SimError.badRequest("malformed JSON body: " + e.getOriginalMessage());
        } catch (IOException e) {
            throw SimError.badRequest("unreadable body: " + e.getMessage());
        }
    }
}
