package io.kvgate.dataplane.kv;

import io.kvgate.dataplane.prompt.PromptPipeline;
import io.kvgate.dataplane.prompt.RenderRoutes;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.dataplane.admin.AdminApi;
import io.kvgate.dataplane.openai.OpenAiErrors;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.RouterPort;
import io.kvgate.dataplane.route.Rule;
import io.kvgate.dataplane.route.RuleHasher;
import io.kvgate.dataplane.route.SessionKeys;
import io.kvgate.index.block.BlockIndexReader;
import io.kvgate.index.prompt.PromptException;
import io.kvgate.index.prompt.RenderedPrompt;
import io.kvgate.ingest.zmq.SubscriberStatus;
import io.netty.handler.codec.http.HttpResponseStatus;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * What the gateway shows about the KV inventory without sending anything to an engine: the admin routes
 * ({@code GET /admin/v1/inventory}, {@code POST /admin/v1/lookup}, {@code POST /admin/v1/explain}); the render
 * routes are {@link RenderRoutes}. Thread-safe:
 * every call builds its own hasher and index reader.
 */
public final class KvRoutes {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final io.kvgate.dataplane.route.RoutingStage router;
    private final java.util.function.Supplier<KvState> kvState;
    /**
     * Explain decisions are delivered by whoever runs the routing stage (a direct executor: the routing thread, or the
     * I/O event loop with {@code router.thread: io}): the admin thread waits for the answer, so delivering on its own
     * event loop could never run.
     */
    private final RouterPort explainPort;

    /** @param kvState the gateway's KV inventory (null while no endpoint publishes KV events) */
    public KvRoutes(io.kvgate.dataplane.route.RoutingStage router, java.util.function.Supplier<KvState> kvState) {
        this.router = router;
        this.kvState = kvState;
        this.explainPort = router.port(Runnable::run);
    }

    /** Registers the admin routes on the gateway's admin API. */
    public void registerAdmin(AdminApi admin) {
        admin.register("GET /admin/v1/inventory", r -> AdminApi.Reply.json(200, inventory().toPrettyString()));
        admin.register("POST /admin/v1/lookup", r -> withRule(r.body(), this::lookup));
        admin.register("POST /admin/v1/explain", r -> withRule(r.body(), this::explain));
        admin.register("POST /admin/v1/parity", r -> parity(r.query()));
    }

    private final ParityProbe parity = new ParityProbe();
    /** SGLang endpoints' /server_info findings (set by the gateway once its model probe exists), or null. */
    private volatile io.kvgate.dataplane.ready.ServerInfoChecks serverInfo;

    /** Where the inventory reads SGLang's /server_info findings from. */
    public void serverInfo(io.kvgate.dataplane.ready.ServerInfoChecks checks) {
        this.serverInfo = checks;
    }

    public ParityProbe parityProbe() {
        return parity;
    }

    /** Runs the parity probe for {@code rule=NAME} (every KV rule when absent); blocks up to the timeout. */
    private AdminApi.Reply parity(String query) {
        String only = null;
        long timeoutMs = 5_000;
        for (String kv : query.split("&")) {
            if (kv.startsWith("rule=")) {
                only = java.net.URLDecoder.decode(kv.substring(5), java.nio.charset.StandardCharsets.UTF_8);
            } else if (kv.startsWith("timeout_ms=")) {
                timeoutMs = Math.max(100, Math.min(60_000, Long.parseLong(kv.substring(11))));
            }
        }
        KvState kv = kvState.get();
        if (kv == null) {
            return AdminApi.Reply.json(409, OpenAiErrors.json("no endpoint publishes KV events (set kv_events on endpoints)",
                "invalid_request_error", null, null));
        }
        ArrayNode results = JSON.createArrayNode();
        boolean found = false;
        for (Rule r : router.table().rules()) {
            if (only != null && !only.equals(r.name())) {
                continue;
            }
            found = true;
            results.addAll(parity.toJson(parity.probe(kv, r, timeoutMs)));
        }
        if (!found) {
            return AdminApi.Reply.json(404, OpenAiErrors.json("no rule named '" + only + "'", "invalid_request_error", "rule", null));
        }
        ObjectNode out = JSON.createObjectNode();
        out.set("results", results);
        return AdminApi.Reply.json(200, out.toPrettyString());
    }

    // ---- admin -----------------------------------------------------------------------------------------------

    ObjectNode inventory() {
        ObjectNode root = JSON.createObjectNode();
        ArrayNode rules = root.putArray("rules");
        KvState kv = kvState.get();
        List<SubscriberStatus> subs = kv == null ? List.of() : kv.status();
        for (Rule r : router.table().rules()) {
            ObjectNode rn = rules.addObject();
            rn.put("name", r.name());
            rn.put("policy", r.config().policy());
            rn.put("block_size", r.config().blockSize());
            rn.put("hash_algo", r.config().hashAlgo());
            rn.put("kv_key_mode", r.config().kvKeyMode());
            rn.put("hash_seed", r.config().hashSeed());
            ParityProbe.SeedState seed = parity.seedState(r.name());
            boolean fromAuto = seed != null && "resolved".equals(seed.state()) && seed.seed().equals(r.config().hashSeed())
                && seed.hashAlgo().equals(r.config().hashAlgo());
            if (r.config().hashSeedAuto() || fromAuto) {
                // hash_seed: auto — where the search for the engines' seed stands (unresolved: no KV scores yet)
                ObjectNode a = rn.putObject("hash_seed_auto");
                a.put("state", fromAuto ? "resolved" : seed == null ? "unresolved" : seed.state());
                if (seed != null && seed.seed() != null) {
                    a.put("seed", seed.seed());
                }
                a.put("detail", seed == null ? "waiting for the first parity probe round (the rule is routed without KV scores)"
                    : seed.detail());
                if (seed != null) {
                    a.put("at_epoch_ms", seed.atEpochMs());
                }
            }
            ArrayNode eps = rn.putArray("endpoints");
            for (EndpointState ep : r.endpoints()) {
                ObjectNode e = eps.addObject();
                e.put("url", ep.config().url());
                if (ep.config().role() != null) {
                    e.put("role", ep.config().role());
                }
                e.put("blocks", kv == null ? 0 : kv.index().blocks(ep.id()));
                if (kv != null && ep.config().kvEvents() != null) {
                    // What the engine says it keys at (its stored events), against this rule's block_size.
                    var sizes = kv.ingest().blockSizes();
                    e.put("event_block_size", sizes.lastEventBlockSize(ep.id()));
                    e.put("block_size_mismatches", sizes.mismatches(ep.id()));
                    if (sizes.mismatched(ep.id())) {
                        e.put("block_size_warning", "the engine's KV events carry block_size " + sizes.lastEventBlockSize(ep.id())
                            + " but this rule keys at " + r.config().blockSize() + ": no prefix can match; set block_size: "
                            + sizes.lastEventBlockSize(ep.id()));
                    }
                    // Hybrid models: only the full-attention group is indexed; the other groups' blocks are counted.
                    var groups = kv.ingest().cacheGroups();
                    ObjectNode g = e.putObject("kv_cache_groups");
                    g.put("groups", groups.groups(ep.id()));
                    g.put("hash_unit", groups.hashUnit(ep.id()));
                    g.put("skipped_blocks", groups.skippedBlocks(ep.id()));
                    if (groups.granularityMismatched(ep.id())) {
                        g.put("warning", "the engine's KV-cache groups hash every " + groups.hashUnit(ep.id())
                            + " tokens but this rule hashes every " + r.config().blockSize()
                            + ": no exact key can match; set kv_key_mode: learned");
                    }
                    long bigram = sizes.bigramEvents(ep.id());
                    e.put("bigram_events", bigram);
                    if (bigram > 0) {
                        e.put("bigram_warning", "the engine keys pages by token pairs (SGLang EAGLE bigram keys), which"
                            + " the gateway does not hash: no prefix can match");
                    }
                }
                var info = serverInfo;
                var findings = info == null ? null : info.findings(r.name(), ep.key());
                if (findings != null) {
                    // SGLang's /server_info against this rule and endpoint (issue #36 item 8)
                    ObjectNode si = e.putObject("server_info");
                    si.put("path", info.answeredAt(ep.key()));
                    ArrayNode fs = si.putArray("mismatches");
                    for (var f : findings) {
                        fs.addObject().put("field", f.field()).put("engine", f.engine()).put("configured", f.configured())
                            .put("fix", f.fix());
                    }
                }
                ArrayNode sn = e.putArray("subscribers");
                for (SubscriberStatus s : subs) {
                    if (s.endpointId() != ep.id()) {
                        continue;
                    }
                    ObjectNode so = sn.addObject();
                    so.put("rank", s.rank());
                    so.put("uri", s.uri());
                    so.put("state", s.state());
                    so.put("last_error", s.lastError());
                    ObjectNode errs = so.putObject("errors");
                    s.errors().forEach(errs::put);
                    ObjectNode dropped = so.putObject("dropped_events");
                    s.droppedEvents().forEach(dropped::put);
                    so.put("connected", s.connected());
                    so.put("last_seq", s.lastSeq());
                    so.put("gaps", s.gaps());
                    so.put("reconnects", s.reconnects());
                    so.put("decode_errors", s.decodeErrors());
                    so.put("restarts", s.restarts());
                    so.put("clears", s.clears());
                    so.put("replays", s.replays());
                    so.put("events", s.events());
                    so.put("block_ops", s.blockOps());
                    so.put("other_drainer", s.otherDrainer());
                    so.put("other_drainer_episodes", s.otherDrainerEpisodes());
                }
            }
        }
        if (kv != null) {
            ObjectNode idx = root.putObject("index");
            idx.put("distinct_blocks", kv.index().size());
            idx.put("memberships", kv.index().memberships());
            idx.put("capacity_blocks", kv.index().config().capacityBlocks());
            idx.put("evictions", kv.index().evictions());
            idx.put("clears", kv.index().clears());
            idx.put("reclaimed", kv.index().reclaimed());
            idx.put("bytes", kv.index().sizeBytes());
            ObjectNode ing = root.putObject("ingest");
            ing.put("agent_errors", kv.ingest().agentErrors());
            ing.put("io_thread_errors", kv.ingest().ioThreadErrors());
            ing.put("context_rebuilds", kv.ingest().contextRebuilds());
            ing.put("refused_frames", kv.ingest().refusedFrames());
            ing.put("sessions_ended", kv.ingest().sessionsEnded());
            ing.put("last_agent_error", kv.ingest().lastAgentError());
            ing.put("pending_changes", kv.ingest().pendingChanges());
            ing.put("zap_allowed", kv.ingest().zapAllowed());
            ing.put("zap_denied", kv.ingest().zapDenied());
        }
        return root;
    }

    private interface RuleQuery {
        AdminApi.Reply apply(Rule rule, JsonNode body, boolean chat) throws Exception;
    }

    private AdminApi.Reply withRule(String text, RuleQuery q) {
        try {
            JsonNode body = JSON.readTree(text);
            if (body == null || !body.isObject() || !body.path("model").isTextual()) {
                return AdminApi.Reply.json(400, OpenAiErrors.json("body must be a chat or completions request with a 'model'",
                    "invalid_request_error", "model", null));
            }
            Rule rule = router.table().ruleForModel(body.get("model").asText());
            if (rule == null) {
                return AdminApi.Reply.json(404, OpenAiErrors.modelNotFoundJson(body.get("model").asText()));
            }
            boolean chat = body.has("messages");
            if (!chat && !body.has("prompt") && body.has("prompt_token_ids")) {
                ((ObjectNode) body).set("prompt", body.get("prompt_token_ids"));
            }
            return q.apply(rule, body, chat);
        } catch (PromptException e) {
            return AdminApi.Reply.json(400, OpenAiErrors.json(e.getMessage(), "invalid_request_error", e.param(), null));
        } catch (RenderRoutes.PromptTooLongException e) {
            return AdminApi.Reply.json(400, OpenAiErrors.json(e.getMessage(), "invalid_request_error", null, "context_length_exceeded"));
        } catch (Exception e) {
            return AdminApi.Reply.json(400, OpenAiErrors.json("bad request: " + e.getMessage(), "invalid_request_error", null, null));
        }
    }

    /** Cached prefix length per endpoint of the rule (blocks and tokens), from the index alone. */
    private AdminApi.Reply lookup(Rule rule, JsonNode body, boolean chat) throws PromptException, RenderRoutes.PromptTooLongException {
        ObjectNode rendered = RenderRoutes.render(rule, body, chat);
        int[] tokens = JSON.convertValue(rendered.get("prompt_token_ids"), int[].class);
        KvState kv = kvState.get();
        RuleHasher hasher = new RuleHasher(rule.config(), 0);
        long[] keys = new long[tokens.length / hasher.blockSize() + 1];
        String salt = body.path("cache_salt").isTextual() ? body.get("cache_salt").asText() : null;
        int n = hasher.hash(tokens, salt, keys);
        List<EndpointState> eps = rule.endpoints();
        int[] ids = new int[eps.size()];
        int[] matched = new int[eps.size()];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = eps.get(i).id();
        }
        if (kv != null && n > 0) {
            BlockIndexReader reader = kv.index().newReader(Math.max(1, ids.length), kv.index().config().maxPromptBlocks());
            reader.longestPrefix(keys, n, ids, ids.length, matched, null);
        }
        ObjectNode out = JSON.createObjectNode();
        out.put("rule", rule.name());
        out.put("prompt_tokens", tokens.length);
        out.put("prompt_blocks", n);
        out.put("block_size", hasher.blockSize());
        ArrayNode arr = out.putArray("endpoints");
        for (int i = 0; i < ids.length; i++) {
            ObjectNode e = arr.addObject();
            e.put("url", eps.get(i).config().url());
            e.put("cached_blocks", matched[i]);
            e.put("cached_tokens", matched[i] * hasher.blockSize());
        }
        return AdminApi.Reply.json(200, out.toPrettyString());
    }

    /** The routing stage's decision for this body, made as for a real request but without sending it. */
    private AdminApi.Reply explain(Rule rule, JsonNode body, boolean chat) throws Exception {
        int[] tokens = null;
        try {
            RenderedPrompt rp = PromptPipeline.of(rule).render(chat, body);
            tokens = rp == null ? null : rp.tokenIds();
        } catch (PromptException e) {
            tokens = null;
        }
        String salt = body.path("cache_salt").isTextual() ? body.get("cache_salt").asText() : null;
        String user = body.path("user").isTextual() ? body.get("user").asText() : null;
        DryRunRequest req = new DryRunRequest(rule, tokens, salt, SessionKeys.hash(user));
        boolean published;
        synchronized (explainPort) { // one publisher at a time per port
            published = req.publish(explainPort);
        }
        if (!published) {
            return AdminApi.Reply.json(503, OpenAiErrors.json("routing ring full", "server_error", null, null));
        }
        DryRunRequest.Decided r = req.result().get(5, TimeUnit.SECONDS);
        ObjectNode out = JSON.createObjectNode();
        out.put("rule", rule.name());
        out.put("policy", rule.config().policy());
        out.put("endpoint", r.endpointUrl());
        out.put("explanation", r.explanation());
        out.put("prompt_tokens", tokens == null ? 0 : tokens.length);
        return AdminApi.Reply.json(200, out.toPrettyString());
    }
}
