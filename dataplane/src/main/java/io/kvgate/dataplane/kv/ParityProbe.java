package io.kvgate.dataplane.kv;

import io.kvgate.dataplane.prompt.PromptPipeline;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.Rule;
import io.kvgate.dataplane.route.RuleHasher;
import io.kvgate.index.block.BlockIndexReader;
import io.kvgate.index.prompt.RenderedPrompt;
import io.kvgate.ingest.zmq.SubscriberStatus;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import io.kvgate.index.hash.HashAlgo;

/**
 * The one check that proves the gateway and a live engine agree on tokenizer, chat template, seed, block size and
 * hash algorithm: send the engine a short never-seen prompt, then wait for the engine's own {@code BlockStored}
 * events to put exactly the keys the gateway computed for it into the index. Two probes per endpoint: a token-id
 * completions prompt (the hash contract alone) and, when the rule has a tokenizer, a chat prompt (template +
 * tokenizer + hash). Verdicts: {@code match}, {@code mismatch} (the engine stored blocks, not ours), {@code no_events}
 * (nothing arrived: events not configured or not reaching us), {@code error} (the engine refused the probe).
 * Thread-safe; probes run on the caller's thread (admin) and block up to the timeout.
 */
public final class ParityProbe {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int PROBE_BLOCKS = 4;

    /**
     * One verdict. {@code hashSeed}: on a vLLM exact-key rule, the seed whose keys the engine published (the
     * configured one on a match; another candidate on a mismatch the seed explains; the found one for
     * {@code hash_seed: auto}); null when none did or the rule has no seed.
     */
    public record Result(String rule, String endpoint, String check, String verdict, int expectedBlocks, int matchedBlocks,
                         String detail, String hashSeed) {
        public Result(String rule, String endpoint, String check, String verdict, int expectedBlocks, int matchedBlocks,
                      String detail) {
            this(rule, endpoint, check, verdict, expectedBlocks, matchedBlocks, detail, null);
        }
    }

    /**
     * Where a rule's {@code hash_seed: auto} stands: {@code resolved} (every probed endpoint published the keys of
     * {@code seed}), {@code conflict} (endpoints disagree: nothing applied) or {@code unresolved} (no probe found it yet).
     */
    public record SeedState(String rule, String hashAlgo, String state, String seed, String detail, long atEpochMs) {}

    private final Map<String, Result> latest = new ConcurrentHashMap<>();
    private final Map<String, SeedState> seeds = new ConcurrentHashMap<>();
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    private volatile io.kvgate.dataplane.tls.UpstreamTls tls = new io.kvgate.dataplane.tls.UpstreamTls();

    /** How {@code https://} endpoints are reached (set once at start-up). */
    public void upstreamTls(io.kvgate.dataplane.tls.UpstreamTls tls) {
        this.tls = tls;
    }
    /** Told the rule name when an {@code auto} seed is resolved: the gateway applies it through a reload. */
    private volatile Consumer<String> onSeedResolved = rule -> { };

    /** Sets who applies a resolved {@code hash_seed: auto} (the gateway, through its reload path). */
    public void onSeedResolved(Consumer<String> listener) {
        this.onSeedResolved = listener;
    }

    /**
     * The seed {@code hash_seed: auto} resolved to for {@code rule} with {@code hashAlgo}, or null. The gateway
     * substitutes it whenever a configuration naming the rule with {@code auto} is applied, so a reload of an
     * unchanged file keeps the resolved seed.
     */
    public String resolvedSeed(String rule, String hashAlgo) {
        SeedState st = seeds.get(rule);
        return st != null && "resolved".equals(st.state()) && st.hashAlgo().equals(hashAlgo) ? st.seed() : null;
    }

    /** Where {@code rule}'s {@code hash_seed: auto} stands, or null when it never was {@code auto} or never probed. */
    public SeedState seedState(String rule) {
        return seeds.get(rule);
    }

    public List<Result> probe(KvState kv, Rule rule, long timeoutMs) {
        List<CompletableFuture<List<Result>>> all = new ArrayList<>();
        for (EndpointState ep : rule.endpoints()) {
            if (ep.config().kvEvents() == null) {
                continue;
            }
            all.add(CompletableFuture.supplyAsync(() -> probeEndpoint(kv, rule, ep, timeoutMs)));
        }
        List<Result> out = new ArrayList<>();
        for (CompletableFuture<List<Result>> f : all) {
            out.addAll(f.join());
        }
        for (Result r : out) {
            latest.put(r.rule() + "|" + r.endpoint() + "|" + r.check(), r);
        }
        if (rule.config().hashSeedAuto() && hashesWithSeed(rule.config())) {
            resolveSeed(rule.config(), out);
        }
        return out;
    }

    /**
     * Settles {@code hash_seed: auto} from one probe round: the seed is found when every endpoint that published
     * keys published those of the same candidate (an endpoint that did not answer or sent nothing does not veto: its
     * blocks simply score nothing until it is probed again).
     */
    private void resolveSeed(io.kvgate.control.config.RuleConfig rc, List<Result> out) {
        java.util.Set<String> found = new java.util.TreeSet<>();
        for (Result r : out) {
            if ("match".equals(r.verdict()) && r.hashSeed() != null) {
                found.add(r.hashSeed());
            }
        }
        long now = System.currentTimeMillis();
        if (found.size() == 1) {
            String seed = found.iterator().next();
            seeds.put(rc.name(), new SeedState(rc.name(), rc.hashAlgo(), "resolved", seed,
                "the engines published the keys of hash_seed '" + seed + "'", now));
            onSeedResolved.accept(rc.name());
        } else if (found.size() > 1) {
            seeds.put(rc.name(), new SeedState(rc.name(), rc.hashAlgo(), "conflict", null,
                "the endpoints hash with different seeds " + found + ": start them alike (PYTHONHASHSEED) or split the rule", now));
        } else {
            String why = out.isEmpty() ? "no endpoint of the rule has kv_events" : out.get(0).verdict() + ": " + out.get(0).detail();
            seeds.put(rc.name(), new SeedState(rc.name(), rc.hashAlgo(), "unresolved", null,
                "no candidate " + quoted(io.kvgate.control.config.RuleConfig.AUTO_HASH_SEED_CANDIDATES)
                    + " matched the engines' events yet (" + why + ")", now));
        }
    }

    /** Whether the rule's keys depend on a seed (vLLM exact keys): only there are seed candidates worth trying. */
    private static boolean hashesWithSeed(io.kvgate.control.config.RuleConfig rc) {
        return !"learned".equals(rc.kvKeyMode()) && !io.kvgate.dataplane.route.RuleHasher.isTrtllmV1(rc)
            && HashAlgo.parse(rc.hashAlgo()).isVllm();
    }

    /**
     * The key sets to look for, first the rule's own: for {@code auto}, one per candidate seed; for a configured
     * vLLM seed, the configured one then the other candidates (so a mismatch can say which seed the engine uses).
     */
    private static List<Candidate> candidates(io.kvgate.control.config.RuleConfig rc) {
        List<Candidate> out = new ArrayList<>();
        if (!hashesWithSeed(rc)) {
            out.add(new Candidate(null, new RuleHasher(rc, 0)));
            return out;
        }
        if (!rc.hashSeedAuto()) {
            out.add(new Candidate(rc.hashSeed(), new RuleHasher(rc, 0)));
        }
        for (String seed : io.kvgate.control.config.RuleConfig.AUTO_HASH_SEED_CANDIDATES) {
            if (seed.equals(rc.hashSeed())) {
                continue;
            }
            try {
                out.add(new Candidate(seed, new RuleHasher(rc.withHashSeed(seed), 0)));
            } catch (IllegalArgumentException notHashableWithThisAlgo) {
                // "vllm-none-hash" under xxhash_cbor: no engine can hash it, nothing to look for
            }
        }
        return out;
    }

    private record Candidate(String seed, RuleHasher hasher) {}

    private static String quoted(List<String> seeds) {
        List<String> q = new ArrayList<>();
        for (String s : seeds) {
            q.add("'" + s + "'");
        }
        return String.join(", ", q);
    }

    private List<Result> probeEndpoint(KvState kv, Rule rule, EndpointState ep, long timeoutMs) {
        List<Result> out = new ArrayList<>();
        List<Candidate> candidates = candidates(rule.config());
        int bs = rule.config().blockSize();
        int[] ids = new int[PROBE_BLOCKS * bs + 3];
        ThreadLocalRandom rnd = ThreadLocalRandom.current();
        for (int i = 0; i < ids.length; i++) {
            ids[i] = 1000 + rnd.nextInt(20_000); // ordinary vocabulary ids in every tokenizer we know
        }
        ObjectNode body = JSON.createObjectNode();
        body.put("model", rule.config().modelEntries().get(0).engineName());
        ArrayNode prompt = body.putArray("prompt");
        for (int t : ids) {
            prompt.add(t);
        }
        body.put("max_tokens", 1);
        out.add(check(kv, rule, ep, "hash_contract", "/v1/completions", body, ids, candidates, timeoutMs));
        PromptPipeline p = PromptPipeline.of(rule);
        if (p.hasTokenizer()) {
            ObjectNode chat = JSON.createObjectNode();
            chat.put("model", rule.config().modelEntries().get(0).engineName());
            chat.put("max_tokens", 1);
            StringBuilder text = new StringBuilder("kvgate parity probe");
            for (int i = 0; i < 24 * Math.max(1, bs / 4); i++) {
                text.append(' ').append(Long.toString(rnd.nextLong() & Long.MAX_VALUE, 36));
            }
            chat.putArray("messages").addObject().put("role", "user").put("content", text.toString());
            try {
                RenderedPrompt rp = p.render(true, chat);
                out.add(check(kv, rule, ep, "chat_pipeline", "/v1/chat/completions", chat, rp.tokenIds(), candidates, timeoutMs));
            } catch (Exception e) {
                out.add(new Result(rule.name(), ep.key(), "chat_pipeline", "error", 0, 0, "cannot render the probe: " + e.getMessage()));
            }
        }
        return out;
    }

    private Result check(KvState kv, Rule rule, EndpointState ep, String check, String path, ObjectNode body, int[] tokens,
                         List<Candidate> candidates, long timeoutMs) {
        boolean auto = rule.config().hashSeedAuto() && hashesWithSeed(rule.config());
        long[][] keys = new long[candidates.size()][];
        int n = 0;
        for (int c = 0; c < keys.length; c++) {
            keys[c] = new long[tokens.length / rule.config().blockSize() + 1];
            n = candidates.get(c).hasher().hash(tokens, null, keys[c]);
        }
        long opsBefore = blockOps(kv, ep);
        try {
            HttpResponse<String> r = tls.httpClient(ep.config(), http).send(HttpRequest.newBuilder(URI.create(ep.config().url() + path))
                .timeout(Duration.ofMillis(timeoutMs)).header("content-type", "application/json")
                .header("x-request-id", "kvgate-parity-" + Long.toHexString(System.nanoTime()))
                .POST(HttpRequest.BodyPublishers.ofString(body.toString())).build(), HttpResponse.BodyHandlers.ofString());
            if (r.statusCode() != 200) {
                return new Result(rule.name(), ep.key(), check, "error", n, 0,
                    "engine answered HTTP " + r.statusCode() + ": " + abbreviate(r.body()));
            }
        } catch (Exception e) {
            return new Result(rule.name(), ep.key(), check, "error", n, 0, "engine unreachable: " + e);
        }
        BlockIndexReader reader = kv.index().newReader(1, kv.index().config().maxPromptBlocks());
        int[] one = {ep.id()};
        int[] matched = new int[1];
        int ownMatched = 0;
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        do {
            for (int c = 0; c < keys.length; c++) {
                reader.longestPrefix(keys[c], n, one, 1, matched, null);
                if (c == 0 && !auto) {
                    ownMatched = matched[0];
                }
                if (matched[0] != n || n == 0) {
                    continue;
                }
                String seed = candidates.get(c).seed();
                if (auto) {
                    return new Result(rule.name(), ep.key(), check, "match", n, n, "hash_seed auto: the engine published"
                        + " exactly the " + n + " block keys of hash_seed '" + seed + "'", seed);
                }
                if (c == 0) {
                    return new Result(rule.name(), ep.key(), check, "match", n, n,
                        "the engine published exactly the " + n + " block keys the gateway computed", seed);
                }
                return new Result(rule.name(), ep.key(), check, "mismatch", n, ownMatched, "the engine published the"
                    + " keys of hash_seed '" + seed + "', not of the configured '" + rule.config().hashSeed() + "': set"
                    + " hash_seed: \"" + seed + "\" (or auto)", seed);
            }
            try {
                Thread.sleep(25); // events arrive asynchronously over ZeroMQ; bounded by the timeout
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        } while (System.nanoTime() < deadline);
        boolean events = blockOps(kv, ep) > opsBefore;
        String seedHint = auto ? "hash_seed (auto tried " + quoted(io.kvgate.control.config.RuleConfig.AUTO_HASH_SEED_CANDIDATES)
            + ": set the engines' PYTHONHASHSEED)" : "hash_seed (PYTHONHASHSEED)";
        return new Result(rule.name(), ep.key(), check, events ? "mismatch" : "no_events", n, ownMatched, events
            ? "the engine stored blocks but not the keys the gateway computed: check block_size, " + seedHint + ", "
                + "hash_algo" + (check.equals("chat_pipeline") ? ", the tokenizer and the chat template" : "")
            : "no KV events arrived from the engine within " + timeoutMs + " ms (is --kv-events-config set and reachable?)");
    }

    private static long blockOps(KvState kv, EndpointState ep) {
        long ops = 0;
        for (SubscriberStatus s : kv.status()) {
            if (s.endpointId() == ep.id()) {
                ops += s.blockOps();
            }
        }
        return ops;
    }

    private static String abbreviate(String s) {
        return s.length() > 200 ? s.substring(0, 200) + "…" : s;
    }

    public ArrayNode toJson(List<Result> results) {
        ArrayNode a = JSON.createArrayNode();
        for (Result r : results) {
            a.add(JSON.valueToTree(r));
        }
        return a;
    }

    /** Registers {@code kvgate_kv_parity{rule,endpoint,check}}: 1 match, 0 mismatch, -1 no events or error. */
    public void registerMetrics(io.prometheus.metrics.model.registry.PrometheusRegistry registry) {
        io.prometheus.metrics.core.metrics.GaugeWithCallback.builder().name("kvgate_kv_parity")
            .help("Last parity probe per endpoint: 1 match, 0 mismatch, -1 no events or error.")
            .labelNames("rule", "endpoint", "check")
            .callback(cb -> latest.values().forEach(r -> cb.call(
                r.verdict().equals("match") ? 1 : r.verdict().equals("mismatch") ? 0 : -1, r.rule(), r.endpoint(), r.check())))
            .register(registry);
    }
}
