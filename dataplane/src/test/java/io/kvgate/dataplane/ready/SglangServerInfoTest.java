package io.kvgate.dataplane.ready;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.config.RuleConfig;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * SGLang's {@code /server_info} against a rule, from answers shaped as SGLang's {@code server_info()} builds them
 * (server args at the top level, the {@code kv_events} descriptor of {@code describe_kv_events_publisher}, null
 * without a publisher).
 */
class SglangServerInfoTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void aMatchingDescriptorHasNoFinding() throws Exception {
        assertEquals(List.of(), check(rule(16, "tcp://127.0.0.1:5557", "kv", 2, "kv_exact"),
            kvEvents("zmq", 5557, "kv", 16, 2, null)));
    }

    @Test
    void eachDisagreementIsOneFindingWithItsFix() throws Exception {
        List<SglangServerInfo.Finding> f = check(rule(1, "tcp://127.0.0.1:6000", "", 1, "kv_exact"),
            kvEvents("zmq", 5557, "kv", 64, 2, "EAGLE3"));
        assertEquals(List.of("kv_events.endpoint_port_base", "kv_events.topic", "kv_events.block_size", "kv_events.dp_size",
            "speculative_algorithm"), f.stream().map(SglangServerInfo.Finding::field).toList(), f.toString());
        assertTrue(f.get(0).fix().contains("port 5557"), f.toString());
        assertEquals("set kv_topic: \"kv\" (a subscriber on another topic receives nothing)", f.get(1).fix());
        assertTrue(f.get(2).fix().startsWith("set the rule's block_size to 64"), f.toString());
        assertEquals("set the endpoint's dp_ranks to 2", f.get(3).fix());
    }

    @Test
    void aPublisherOnOneSideOnly() throws Exception {
        // configured, but the server runs no publisher (kv_events: null)
        List<SglangServerInfo.Finding> none = check(rule(16, "tcp://127.0.0.1:5557", "kv", 1, "kv_exact"),
            JSON.readTree("{\"kv_events\": null, \"page_size\": 16}"));
        assertEquals(1, none.size(), none.toString());
        assertTrue(none.get(0).fix().startsWith("start SGLang with --kv-events-config"), none.toString());
        // the server publishes, a kv_exact rule does not subscribe
        List<SglangServerInfo.Finding> unused = check(rule(16, null, null, 1, "kv_exact"), kvEvents("zmq", 5557, "", 16, 1, null));
        assertEquals(1, unused.size(), unused.toString());
        assertTrue(unused.get(0).fix().startsWith("set the endpoint's kv_events: tcp://127.0.0.1:5557"), unused.toString());
        // ... which a rule that does not route on KV scores does not need
        assertEquals(List.of(), check(rule(16, null, null, 1, "round_robin"), kvEvents("zmq", 5557, "", 16, 1, null)));
        // another publisher kind
        assertEquals("kv_events.publisher", check(rule(16, "tcp://127.0.0.1:5557", "", 1, "kv_exact"),
            kvEvents("nats", 5557, "", 16, 1, null)).get(0).field());
    }

    @Test
    void aServerBeforeTheDescriptorIsNotJudgedOnIt() throws Exception {
        assertEquals(List.of(), check(rule(16, "tcp://127.0.0.1:5557", "kv", 1, "kv_exact"),
            JSON.readTree("{\"page_size\": 16, \"dp_size\": 1}")));
    }

    private static List<SglangServerInfo.Finding> check(RuleConfig rule, JsonNode info) {
        return SglangServerInfo.check(rule, rule.endpoints().get(0), info);
    }

    private static JsonNode kvEvents(String publisher, int port, String topic, int blockSize, int dp, String spec)
            throws Exception {
        return JSON.readTree("""
            {"page_size": %d, "dp_size": %d, "speculative_algorithm": %s,
             "kv_events": {"publisher": "%s", "endpoint_host": "*", "endpoint_port_base": %d, "topic": "%s",
                           "block_size": %d, "dp_size": %d}}
            """.formatted(blockSize, dp, spec == null ? "null" : "\"" + spec + "\"", publisher, port, topic, blockSize, dp));
    }

    private static RuleConfig rule(int blockSize, String kvEvents, String topic, int dpRanks, String policy) throws Exception {
        String ep = "      - url: http://127.0.0.1:30000\n" + (kvEvents == null ? "" : "        kv_events: " + kvEvents + "\n"
            + "        kv_topic: \"" + topic + "\"\n" + "        dp_ranks: " + dpRanks + "\n");
        return GatewayConfig.parse("rules:\n  - name: r\n    models: [m]\n    engine: sglang\n    policy: " + policy
            + "\n    block_size: " + blockSize + "\n    endpoints:\n" + ep).rules().get(0);
    }
}
