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

    /** One verdict. */
    public record Result(String rule, String endpoint, String check, String verdict, int expectedBlocks, int matchedBlocks,
                         String detail) {}

    private final Map<String, Result> latest = new ConcurrentHashMap<>();
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

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
        return out;
    }

    private List<Result> probeEndpoint(KvState kv, Rule rule, EndpointState ep, long timeoutMs) {
        List<Result> out = new ArrayList<>();
        RuleHasher hasher = new RuleHasher(rule.config(), 0);
        int bs = hasher.blockSize();
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
        out.add(check(kv, rule, ep, "hash_contract", "/v1/completions", body, ids, hasher, timeoutMs));
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
                out.add(check(kv, rule, ep, "chat_pipeline", "/v1/chat/completions", chat, rp.tokenIds(), hasher, timeoutMs));
            } catch (Exception e) {
                out.add(new Result(rule.name(), ep.key(), "chat_pipeline", "error", 0, 0, "cannot render the probe: " + e.getMessage()));
            }
        }
        return out;
    }

    private Result check(KvState kv, Rule rule, EndpointState ep, String check, String path, ObjectNode body, int[] tokens,
                         RuleHasher hasher, long timeoutMs) {
        long[] keys = new long[tokens.length / hasher.blockSize() + 1];
        int n = hasher.hash(tokens, null, keys);
        long opsBefore = blockOps(kv, ep);
        try {
            HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(ep.config().url() + path))
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
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        do {
            reader.longestPrefix(keys, n, one, 1, matched, null);
            if (matched[0] == n) {
                return new Result(rule.name(), ep.key(), check, "match", n, n,
                    "the engine published exactly the " + n + " block keys the gateway computed");
            }
            try {
                Thread.sleep(25); // events arrive asynchronously over ZeroMQ; bounded by the timeout
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        } while (System.nanoTime() < deadline);
        boolean events = blockOps(kv, ep) > opsBefore;
        return new Result(rule.name(), ep.key(), check, events ? "mismatch" : "no_events", n, matched[0], events
            ? "the engine stored blocks but not the keys the gateway computed: check block_size, hash_seed (PYTHONHASHSEED), "
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

    /** {@code kvgate_kv_parity{rule,endpoint,check}}: 1 match, 0 mismatch, -1 no events or error. */
    public void writeMetrics(StringBuilder out) {
        out.append("# HELP kvgate_kv_parity Last parity probe per endpoint: 1 match, 0 mismatch, -1 no events or error.\n");
        out.append("# TYPE kvgate_kv_parity gauge\n");
        latest.values().forEach(r -> out.append("kvgate_kv_parity{rule=\"").append(r.rule()).append("\",endpoint=\"")
            .append(r.endpoint()).append("\",check=\"").append(r.check()).append("\"} ")
            .append(r.verdict().equals("match") ? 1 : r.verdict().equals("mismatch") ? 0 : -1).append('\n'));
    }
}
