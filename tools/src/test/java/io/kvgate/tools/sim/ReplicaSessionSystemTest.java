package io.kvgate.tools.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.testkit.Await;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Many gateways, one routing (issue #14 item 6): two gateway replicas with the same configuration, no shared state,
 * over four simulated engines. Under {@code session.mode: hash} a conversation whose turns alternate between the
 * replicas (as behind an L4 round robin) lands on one engine, also after one replica saw unrelated traffic, and
 * when an engine goes down both replicas move its conversations to the same other engine (and back when it
 * returns). Under {@code mode: table} the same traffic splits conversations: each replica pins on its own.
 */
@Timeout(90)
@Tag("system")
class ReplicaSessionSystemTest {
    /** Bound of the waits for real engines and gateways (never a timeout under test). */
    private static final Duration WAIT = Duration.ofSeconds(10);
    private static final int CONVERSATIONS = 24;
    private static final int TURNS = 4;

    private static String yaml(List<EngineSimulator> sims, String session) {
        StringBuilder eps = new StringBuilder();
        for (EngineSimulator s : sims) {
            eps.append("      - url: ").append(s.baseUrl()).append('\n');
        }
        return """
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            upstream: {connect_timeout_ms: 1000}
            health: {interval_ms: 50, timeout_ms: 1000, healthy_threshold: 1, unhealthy_threshold: 1}
            rules:
              - name: chat
                models: [m]
                engine: vllm
                policy: session
                fallback: round_robin
                explain: true
            %s    endpoints:
            %s""".formatted(session, eps);
    }

    /** One turn of {@code conversation} through {@code gw}: the engine (host:port) the gateway says served it. */
    private static String turn(Gateway gw, String conversation, int turn) throws Exception {
        String body = "{\"model\":\"m\",\"user\":\"" + conversation + "\",\"max_tokens\":2,\"messages\":["
            + "{\"role\":\"user\",\"content\":\"turn " + turn + " of " + conversation + "\"}]}";
        HttpResponse<String> r = SimHttp.CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port()
                + "/v1/chat/completions")).timeout(Duration.ofSeconds(20)).header("content-type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), r.body());
        String route = r.headers().firstValue("x-kvgate-route").orElseThrow();
        assertTrue(route.startsWith("endpoint="), route);
        return route.substring("endpoint=".length(), route.indexOf(';'));
    }

    /** Every conversation's turns, alternating replicas A, B, A, B: conversation → engines that served it. */
    private static Map<String, Set<String>> converse(Gateway a, Gateway b, String prefix) throws Exception {
        Map<String, Set<String>> served = new HashMap<>();
        for (int c = 0; c < CONVERSATIONS; c++) {
            String conv = prefix + c;
            for (int t = 0; t < TURNS; t++) {
                served.computeIfAbsent(conv, k -> new HashSet<>()).add(turn(t % 2 == 0 ? a : b, conv, t));
            }
        }
        return served;
    }

    private static List<EngineSimulator> start(int n) {
        List<EngineSimulator> sims = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            sims.add(EngineSimulator.start(SimHttp.fast(Dialect.VLLM)));
        }
        return sims;
    }

    private static EndpointState endpoint(Gateway gw, String key) {
        return gw.routeTable().ruleByName("chat").endpoints().stream().filter(e -> e.key().equals(key)).findFirst().orElseThrow();
    }

    @Test
    void aConversationLandsOnOneEngineThroughEitherReplicaAndMovesTogetherWhenItsEngineFails() throws Exception {
        List<EngineSimulator> sims = start(4);
        Gateway a = null;
        Gateway b = null;
        try {
            String config = yaml(sims, ""); // session.mode defaults to hash
            a = Gateway.start(GatewayConfig.parse(config));
            b = Gateway.start(GatewayConfig.parse(config));
            turn(b, "unrelated", 0); // B's state differs from A's: it must not matter
            Map<String, Set<String>> served = converse(a, b, "conv-");
            Set<String> engines = new HashSet<>();
            for (Map.Entry<String, Set<String>> e : served.entrySet()) {
                assertEquals(1, e.getValue().size(), e.getKey() + " was served by " + e.getValue());
                engines.addAll(e.getValue());
            }
            // Which engine a conversation hashes to depends on the engines' ephemeral ports (their keys), so whether all
            // four get one of 24 conversations is a draw (a miss has odds of about 4 x (3/4)^24 = 0.4%); the defect worth
            // catching, every conversation on one engine, has odds of 4 x (1/4)^24 = 1e-14 when hashing works.
            assertTrue(engines.size() >= 2, "24 conversations spread over the engines: " + served);
            long chats = 0;
            for (EngineSimulator s : sims) {
                chats += s.stats().get("chat_requests");
            }
            assertEquals(CONVERSATIONS * TURNS + 1, chats, "every turn reached an engine once");

            // An engine goes down: both replicas see the same healthy set, so its conversations move to the same
            // engine through either replica, and nobody else's conversation moves.
            String downKey = served.get("conv-0").iterator().next(); // an engine that holds conversations
            EngineSimulator down = sims.stream().filter(x -> downKey.equals("127.0.0.1:" + x.port())).findFirst().orElseThrow();
            down.injectFaults("{\"unhealthy\":true}");
            Gateway ga = a;
            Gateway gb = b;
            Await.until(WAIT, "both replicas mark it down", () -> !endpoint(ga, downKey).probeHealthy() && !endpoint(gb, downKey).probeHealthy());
            Map<String, Set<String>> moved = converse(a, b, "conv-");
            int movedConversations = 0;
            for (Map.Entry<String, Set<String>> e : moved.entrySet()) {
                assertEquals(1, e.getValue().size(), e.getKey() + " split while an engine was down: " + e.getValue());
                String before = served.get(e.getKey()).iterator().next();
                String now = e.getValue().iterator().next();
                assertNotEquals(downKey, now);
                if (!before.equals(now)) {
                    assertEquals(downKey, before, e.getKey() + " moved although its engine stayed up");
                    movedConversations++;
                }
            }
            assertTrue(movedConversations > 0, "the down engine had conversations: " + served);

            down.injectFaults("{\"unhealthy\":false}");
            Await.until(WAIT, "both replicas bring it back", () -> endpoint(ga, downKey).probeHealthy() && endpoint(gb, downKey).probeHealthy());
            assertEquals(served, converse(a, b, "conv-"), "every conversation is back on its engine");
        } finally {
            if (a != null) {
                a.close(100);
            }
            if (b != null) {
                b.close(100);
            }
            for (EngineSimulator s : sims) {
                s.close();
            }
        }
    }

    @Test
    void underTheTableModeEachReplicaPinsOnItsOwnAndConversationsSplit() throws Exception {
        List<EngineSimulator> sims = start(4);
        Gateway a = null;
        Gateway b = null;
        try {
            String config = yaml(sims, "    session: {mode: table}\n");
            a = Gateway.start(GatewayConfig.parse(config));
            b = Gateway.start(GatewayConfig.parse(config));
            turn(b, "unrelated", 0); // moves B's round robin one step ahead of A's
            Map<String, Set<String>> served = converse(a, b, "conv-");
            int split = 0;
            for (Set<String> engines : served.values()) {
                assertTrue(engines.size() <= 2, "each replica keeps its own pin: " + engines);
                split += engines.size() == 2 ? 1 : 0;
            }
            assertEquals(CONVERSATIONS, split, "every conversation landed on two engines: " + served);
            assertFalse(served.isEmpty());
        } finally {
            if (a != null) {
                a.close(100);
            }
            if (b != null) {
                b.close(100);
            }
            for (EngineSimulator s : sims) {
                s.close();
            }
        }
    }
}
