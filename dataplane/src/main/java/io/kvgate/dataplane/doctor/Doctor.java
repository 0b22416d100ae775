package io.kvgate.dataplane.doctor;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.control.config.EndpointConfig;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.kv.KvState;
import io.kvgate.dataplane.kv.ParityProbe;
import io.kvgate.dataplane.load.EngineLoadScraper;
import io.kvgate.dataplane.ready.ContextDiscovery;
import io.kvgate.dataplane.ready.EngineRoutes;
import io.kvgate.dataplane.ready.ServerInfoChecks;
import io.kvgate.dataplane.ready.SglangServerInfo;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.Rule;
import io.kvgate.ingest.zmq.SubscriberStatus;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;

/**
 * {@code ctl doctor} / {@code GET /control/v1/doctor} (issue #36): checks, per rule and endpoint, everything the
 * gateway assumes about the engine and says what does not match, with the fix. Each check reads what the gateway
 * already learned (the engines' KV events, their {@code /v1/models}, {@code /metrics} and SGLang's
 * {@code /server_info}) except the hash check, which runs the parity probe now: a short never-seen prompt whose
 * block keys must come back in the engine's own events.
 *
 * <ul>
 *   <li>{@code hash.hash_contract}, {@code hash.chat_pipeline}: seed, hash algorithm, block size, tokenizer and template
 *       (the parity probe; on a mismatch the seed the engine uses, when one of the candidates explains it);</li>
 *   <li>{@code block_size}: the block size the engine's stored events carry against the rule's;</li>
 *   <li>{@code kv_cache_groups}: a hybrid model hashed finer than the rule hashes (exact keys cannot match);</li>
 *   <li>{@code bigram_keys}: SGLang EAGLE token-pair pages, which the gateway does not hash;</li>
 *   <li>{@code dp_ranks}: a publisher on every DP rank's port (port + r);</li>
 *   <li>{@code server_info.*}: SGLang's self-description (KV-event port, topic, block size, DP size, EAGLE);</li>
 *   <li>{@code metrics}: the engine's metrics page ({@code /metrics}; TensorRT-LLM {@code /prometheus/metrics})
 *       carries the load families the gateway reads;</li>
 *   <li>{@code tokens_per_block}: the block size that page states (TensorRT-LLM) against the rule's;</li>
 *   <li>{@code context_length}: the engine states one (or the rule sets {@code max_model_len}) and they agree;</li>
 *   <li>{@code routes}: the engine mounts the completion routes its rule proxies.</li>
 * </ul>
 * A status is {@code ok}, {@code mismatch} (with a fix) or {@code unknown} (nothing to judge yet, e.g. no stored
 * event). Thread-safe: every call reads the current route table; the probe blocks the caller up to its timeout.
 */
public final class Doctor {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final Supplier<List<Rule>> rules;
    private final Supplier<KvState> kv;
    private final ParityProbe parity;
    private final ServerInfoChecks serverInfo;
    private final EngineLoadScraper load;

    /** One row of the report. */
    public record Check(String rule, String endpoint, String check, String status, String found, String expected,
                        String fix) {
        static Check ok(Rule r, EndpointState ep, String check, String found) {
            return new Check(r.name(), ep == null ? null : ep.key(), check, "ok", found, null, null);
        }

        static Check unknown(Rule r, EndpointState ep, String check, String why) {
            return new Check(r.name(), ep == null ? null : ep.key(), check, "unknown", why, null, null);
        }

        static Check mismatch(Rule r, EndpointState ep, String check, String found, String expected, String fix) {
            return new Check(r.name(), ep == null ? null : ep.key(), check, "mismatch", found, expected, fix);
        }
    }

    public Doctor(Supplier<List<Rule>> rules, Supplier<KvState> kv, ParityProbe parity, ServerInfoChecks serverInfo,
                  EngineLoadScraper load) {
        this.rules = rules;
        this.kv = kv;
        this.parity = parity;
        this.serverInfo = serverInfo;
        this.load = load;
    }

    /** Runs every check of {@code only} (every rule when null); the parity probe waits up to {@code probeTimeoutMs}. */
    public List<Check> examine(String only, long probeTimeoutMs) {
        List<Check> out = new ArrayList<>();
        KvState k = kv.get();
        for (Rule r : rules.get()) {
            if (only != null && !only.equals(r.name())) {
                continue;
            }
            if (k != null && r.endpoints().stream().anyMatch(ep -> ep.config().kvEvents() != null)) {
                hash(out, k, r, probeTimeoutMs);
            }
            context(out, r);
            for (EndpointState ep : r.endpoints()) {
                if (k != null && ep.config().kvEvents() != null && ep.id() < KvState.MAX_ENDPOINTS) {
                    events(out, k, r, ep);
                }
                serverInfo(out, r, ep);
                metrics(out, r, ep);
                routes(out, r, ep);
            }
        }
        return out;
    }

    /** Whether {@code rule} is a rule of the current table. */
    public boolean hasRule(String rule) {
        return rules.get().stream().anyMatch(r -> r.name().equals(rule));
    }

    private void hash(List<Check> out, KvState k, Rule r, long timeoutMs) {
        RuleConfig c = r.config();
        String expected = "the gateway's keys (" + c.hashAlgo() + ", hash_seed " + c.hashSeed() + ", block_size "
            + c.blockSize() + ", " + c.kvKeyMode() + " keys)";
        for (ParityProbe.Result p : parity.probe(k, r, timeoutMs)) {
            EndpointState ep = r.endpoints().stream().filter(e -> e.key().equals(p.endpoint())).findFirst().orElse(null);
            String check = "hash." + p.check();
            switch (p.verdict()) {
                case "match" -> out.add(Check.ok(r, ep, check, p.matchedBlocks() + " of " + p.expectedBlocks()
                    + " probe blocks stored under the gateway's keys"));
                case "mismatch" -> out.add(Check.mismatch(r, ep, check, p.detail(), expected,
                    p.hashSeed() != null && !p.hashSeed().equals(c.hashSeed())
                        ? "set the rule's hash_seed: \"" + p.hashSeed() + "\" (or hash_seed: auto)"
                        : "make the rule hash as the engine does: block_size (vLLM --block-size x DCP, SGLang page size x"
                            + " DCP), hash_algo (vLLM --prefix-caching-hash-algo sha256_cbor), hash_seed (the engine's"
                            + " PYTHONHASHSEED, vllm-none-hash when unset), tokenizer and chat_template"));
                case "no_events" -> out.add(Check.mismatch(r, ep, check, "no_events: " + p.detail(), "the probe's blocks in the engine's"
                    + " KV events", "check that the engine publishes KV events (vLLM/SGLang --kv-events-config) on the"
                    + " endpoint's kv_events port (+ DP rank) and kv_topic, with prefix caching on"));
                default -> out.add(Check.unknown(r, ep, check, p.verdict() + ": " + p.detail()));
            }
        }
    }

    private void events(List<Check> out, KvState k, Rule r, EndpointState ep) {
        var sizes = k.ingest().blockSizes();
        int seen = sizes.lastEventBlockSize(ep.id());
        int want = r.config().blockSize();
        if (seen == 0) {
            out.add(Check.unknown(r, ep, "block_size", "no stored KV event yet"));
        } else if (seen != want) {
            out.add(Check.mismatch(r, ep, "block_size", "events carry block_size " + seen, "block_size " + want,
                "set the rule's block_size: " + seen));
        } else {
            out.add(Check.ok(r, ep, "block_size", "events carry block_size " + seen));
        }
        var groups = k.ingest().cacheGroups();
        if (groups.groups(ep.id()) > 0) {
            String found = groups.groups(ep.id()) + " KV-cache group(s), hashed every " + groups.hashUnit(ep.id())
                + " tokens; " + groups.skippedBlocks(ep.id()) + " blocks of non-full-attention groups not indexed";
            out.add(groups.granularityMismatched(ep.id())
                ? Check.mismatch(r, ep, "kv_cache_groups", found, "exact keys hashed every " + want + " tokens",
                    "set the rule's kv_key_mode: learned (a hybrid model hashed every " + groups.hashUnit(ep.id())
                        + " tokens cannot be matched by exact keys at block_size " + want + ")")
                : Check.ok(r, ep, "kv_cache_groups", found));
        }
        long bigram = sizes.bigramEvents(ep.id());
        if (bigram > 0) {
            out.add(Check.mismatch(r, ep, "bigram_keys", bigram + " stored events with token-pair cells (SGLang EAGLE)",
                "one token per cell", "run the rule's SGLang engines without EAGLE speculative decoding, or route the"
                    + " rule by another policy"));
        }
        List<SubscriberStatus> ranks = k.status().stream().filter(s -> s.endpointId() == ep.id()).toList();
        EndpointConfig e = ep.config();
        if (e.kvEventsOverHttp()) {
            return; // drained over HTTP: one route serves every rank
        }
        List<String> silent = new ArrayList<>();
        for (SubscriberStatus s : ranks) {
            if (!s.connected() && s.events() == 0) {
                silent.add("rank " + s.rank() + " (" + s.uri() + ")");
            }
        }
        if (ranks.isEmpty()) {
            out.add(Check.unknown(r, ep, "dp_ranks", "not subscribed"));
        } else if (silent.isEmpty()) {
            out.add(Check.ok(r, ep, "dp_ranks", ranks.size() + " rank(s), each connected to a publisher"));
        } else {
            out.add(Check.mismatch(r, ep, "dp_ranks", "no publisher on " + String.join(", ", silent),
                "dp_ranks " + e.dpRanks() + " publishing on kv_events port + rank", "set dp_ranks to the engine's DP size"
                    + " (vLLM --data-parallel-size, SGLang --dp-size) and kv_events to its base port"));
        }
    }

    private void serverInfo(List<Check> out, Rule r, EndpointState ep) {
        if (!SglangServerInfo.PATH.equals(r.profile().routesPath()) || serverInfo == null) {
            return;
        }
        var findings = serverInfo.findings(r.name(), ep.key());
        if (findings == null) {
            out.add(Check.unknown(r, ep, "server_info", "GET " + SglangServerInfo.PATH + " not answered yet"));
            return;
        }
        if (findings.isEmpty()) {
            out.add(Check.ok(r, ep, "server_info", "GET " + serverInfo.answeredAt(ep.key()) + " agrees with the configuration"));
        }
        for (SglangServerInfo.Finding f : findings) {
            out.add(Check.mismatch(r, ep, "server_info." + f.field(), f.engine(), f.configured(), f.fix()));
        }
    }

    private void metrics(List<Check> out, Rule r, EndpointState ep) {
        if (load == null || r.profile().loadMetrics() == null) {
            return; // no Prometheus load page to scrape
        }
        String key = ep.key();
        String path = load.pathOf(key);
        if (path == null) {
            path = r.profile().loadMetrics().path();
        }
        long ok = load.scrapes(key, EngineLoadScraper.Result.OK);
        long none = load.scrapes(key, EngineLoadScraper.Result.NO_METRICS) + load.scrapes(key, EngineLoadScraper.Result.NOT_FOUND);
        if (ok > 0) {
            out.add(Check.ok(r, ep, "metrics", path + " carries the load families (" + ok + " scrapes)"));
        } else if (none > 0) {
            out.add(Check.mismatch(r, ep, "metrics", path + " has no load family (" + none + " scrapes)",
                "the engine's running and waiting request gauges", r.profile().metricsFix()));
        } else {
            out.add(Check.unknown(r, ep, "metrics", "not scraped yet (load.scrape_interval_ms, or load scraping off)"));
        }
        int stated = load.tokensPerBlock(key);
        int want = r.config().blockSize();
        if (stated > 0 && stated != want) {
            out.add(Check.mismatch(r, ep, "tokens_per_block", path + " states " + stated + " tokens per KV-cache block",
                "block_size " + want, "set the rule's block_size: " + stated));
        } else if (stated > 0) {
            out.add(Check.ok(r, ep, "tokens_per_block", path + " states " + stated + " tokens per KV-cache block"));
        }
    }

    private void context(List<Check> out, Rule r) {
        String problem = ContextDiscovery.problem(r);
        if (problem != null) {
            out.add(Check.mismatch(r, null, "context_length", problem, "one context length every endpoint serves",
                r.config().maxModelLen() > 0 ? "lower the rule's max_model_len to what every endpoint serves"
                    : "start the endpoints with the same --max-model-len (context length)"));
        } else if (r.contextLength() > 0) {
            out.add(Check.ok(r, null, "context_length", r.contextLength() + " tokens"));
        } else {
            out.add(Check.mismatch(r, null, "context_length", "no endpoint states one", "a context length",
                "set the rule's max_model_len (TensorRT-LLM's model cards state none)"));
        }
    }

    private void routes(List<Check> out, Rule r, EndpointState ep) {
        int unmounted = ep.facts().unmountedRoutes();
        if (unmounted != 0) {
            out.add(Check.mismatch(r, ep, "routes", "does not mount " + EngineRoutes.describe(unmounted),
                "both completion routes", "start the engine as a generation model (vLLM without --runner pooling,"
                    + " SGLang without --is-embedding), or send those requests to another rule"));
        }
    }

    /** The report: {@code ok} (no mismatch), the mismatch count and every check. */
    public static ObjectNode toJson(List<Check> checks) {
        ObjectNode root = JSON.createObjectNode();
        long mismatches = checks.stream().filter(c -> "mismatch".equals(c.status())).count();
        root.put("ok", mismatches == 0);
        root.put("mismatches", mismatches);
        ArrayNode a = root.putArray("checks");
        for (Check c : checks) {
            ObjectNode n = a.addObject();
            n.put("rule", c.rule());
            n.put("endpoint", c.endpoint());
            n.put("check", c.check());
            n.put("status", c.status());
            n.put("found", c.found());
            if (c.expected() != null) {
                n.put("expected", c.expected());
            }
            if (c.fix() != null) {
                n.put("fix", c.fix());
            }
        }
        return root;
    }
}
