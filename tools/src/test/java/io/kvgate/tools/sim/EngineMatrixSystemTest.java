package io.kvgate.tools.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.dataplane.route.RuleStats.Tier;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The engine table of docs/engines.md, plain / chwbl / session columns: the gateway over two simulators of each engine, no
 * tokenizer. Plain: requests alternate between the engines and each answers in its own dialect's shape; chwbl: a
 * prompt family (same system prompt) stays on one engine; session: a conversation stays on one engine while another
 * conversation is served too. Each case checks where requests landed through the simulators' own counters.
 */
@Timeout(60)
@Tag("system")
class EngineMatrixSystemTest {

    private static HttpResponse<String> chat(Gateway gw, String body, String conversation) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/v1/chat/completions"))
            .timeout(Duration.ofSeconds(20)).header("content-type", "application/json");
        if (conversation != null) {
            b.header("x-conversation-id", conversation);
        }
        return SimHttp.CLIENT.send(b.POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    }

    private static long[] started(List<EngineSimulator> sims) {
        long[] n = new long[sims.size()];
        for (int i = 0; i < n.length; i++) {
            n[i] = sims.get(i).stats().get("generations_started");
        }
        return n;
    }

    /** Sends {@code count} requests and returns how many each engine started. */
    private static long[] send(Gateway gw, List<EngineSimulator> sims, int count, String system, String conversation) throws Exception {
        long[] before = started(sims);
        for (int i = 0; i < count; i++) {
            String body = "{\"model\":\"m\",\"max_tokens\":2,\"messages\":[{\"role\":\"system\",\"content\":\"" + system
                + "\"},{\"role\":\"user\",\"content\":\"question " + i + "\"}]}";
            HttpResponse<String> r = chat(gw, body, conversation);
            assertEquals(200, r.statusCode(), r.body());
            assertEquals(2, SimHttp.MAPPER.readTree(r.body()).at("/usage/completion_tokens").asInt(), r.body());
        }
        long[] after = started(sims);
        for (int i = 0; i < after.length; i++) {
            after[i] -= before[i];
        }
        return after;
    }

    private static int enginesUsed(long[] counts) {
        int n = 0;
        for (long c : counts) {
            n += c > 0 ? 1 : 0;
        }
        return n;
    }

    @ParameterizedTest(name = "{0} {1}")
    @CsvSource({
        "vllm, round_robin", "vllm, chwbl", "vllm, session",
        "sglang, round_robin", "sglang, chwbl", "sglang, session",
        "trtllm, round_robin", "trtllm, chwbl", "trtllm, session",
        "llamacpp, round_robin", "llamacpp, chwbl", "llamacpp, session"})
    void everyEngineServesPlainChwblAndSession(String engine, String policy) throws Exception {
        Dialect dialect = Dialect.valueOf(engine.toUpperCase(Locale.ROOT));
        List<EngineSimulator> sims = new ArrayList<>();
        try {
            for (int i = 0; i < 2; i++) {
                sims.add(EngineSimulator.start(SimHttp.fast(dialect)));
            }
            Gateway gw = Gateway.start(GatewayConfig.parse("""
                listen: 127.0.0.1:0
                admin_listen: 127.0.0.1:0
                upstream: {connect_timeout_ms: 1000}
                health: {interval_ms: 60000}
                rules:
                  - name: r
                    models: [m]
                    engine: %s
                    policy: %s
                    session: {key: conversation}
                    chwbl: {prefix_chars: 32}
                    endpoints:
                      - {url: "%s"}
                      - {url: "%s"}
                """.formatted(engine, policy, sims.get(0).baseUrl(), sims.get(1).baseUrl())));
            try {
                switch (policy) {
                    case "round_robin" -> {
                        long[] c = send(gw, sims, 4, "any system prompt", null);
                        assertEquals(2, c[0], "round robin alternates");
                        assertEquals(2, c[1], "round robin alternates");
                    }
                    case "chwbl" -> {
                        for (int family = 0; family < 4; family++) {
                            long[] c = send(gw, sims, 4, "Family " + family + " has a system prompt of its own", null);
                            assertEquals(1, enginesUsed(c), "family " + family + " on one engine");
                        }
                        // Not just a load policy that happened to pick one engine: every request was keyed and went to
                        // its owner (the load bound never bites one request at a time).
                        assertEquals(16, gw.routeTable().ruleByName("r").stats().tierCount(Tier.CHWBL_OWNER));
                    }
                    default -> {
                        for (int conv = 0; conv < 4; conv++) {
                            long[] c = send(gw, sims, 4, "shared system prompt", "conversation-" + conv);
                            assertEquals(1, enginesUsed(c), "conversation " + conv + " on one engine");
                        }
                        var stats = gw.routeTable().ruleByName("r").stats();
                        // session.mode hash (the default): every request keyed and sent to its key's rendezvous
                        // owner (one request at a time never reaches the load bound).
                        assertEquals(16, stats.tierCount(Tier.SESSION_HASH), "each request went to its session's engine");
                        assertEquals(0, stats.tierCount(Tier.SESSION_HASH_WALK));
                    }
                }
            } finally {
                gw.close(100);
            }
        } finally {
            for (EngineSimulator s : sims) {
                s.close();
            }
        }
    }
}
