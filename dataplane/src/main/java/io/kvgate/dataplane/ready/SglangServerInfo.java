package io.kvgate.dataplane.ready;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.control.config.EndpointConfig;
import io.kvgate.control.config.RuleConfig;
import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * SGLang's {@code GET /server_info} (issue #36 item 8): where SGLang describes itself, and what the gateway checks
 * there against the configuration. {@code /get_server_info} is the deprecated alias (sgl-project/sglang#21463 moved
 * every caller to {@code /server_info} and keeps the old path for one deprecation window, logging a warning on each
 * call); the gateway asks {@code /server_info} first and falls back to the alias on a 404 (older servers).
 *
 * <p>The answer carries the server arguments ({@code page_size}, {@code dp_size}, {@code context_length},
 * {@code is_embedding}, {@code tool_call_parser}, {@code speculative_algorithm}, ...) and, on servers that publish KV
 * events, the descriptor {@code kv_events: {publisher, endpoint_host, endpoint_port_base, topic, block_size,
 * dp_size}} (null when no publisher is configured). Its {@code block_size} is the width subscribers must hash at
 * ({@code page_size x dcp_size}, SGLang's {@code kv_event_block_size_of}); rank r publishes on
 * {@code endpoint_port_base + r}. Stateless.
 */
public final class SglangServerInfo {
    public static final String PATH = "/server_info";
    public static final String DEPRECATED_PATH = "/get_server_info";

    private SglangServerInfo() {}

    /**
     * One disagreement between the server's description and the rule or endpoint configuration: the field, what the
     * engine says, what the configuration says, and the change that makes them agree.
     */
    public record Finding(String field, String engine, String configured, String fix) {
        public String describe() {
            return field + ": the engine says " + engine + ", the configuration " + configured + " (" + fix + ")";
        }
    }

    /**
     * What {@code info} (a {@code /server_info} answer) says that disagrees with {@code rule} and its endpoint
     * {@code ep}: the KV-event publisher's presence, port, topic, block size and DP size, and EAGLE bigram keys on a
     * KV-routed rule. An answer without a {@code kv_events} member (servers before the descriptor) is not judged on it.
     */
    public static List<Finding> check(RuleConfig rule, EndpointConfig ep, JsonNode info) {
        List<Finding> out = new ArrayList<>();
        boolean kvRule = "kv_exact".equals(rule.policy());
        JsonNode kv = info.get("kv_events");
        if (kv != null && (kv.isNull() || kv.isObject())) {
            if (kv.isNull()) {
                if (ep.kvEvents() != null) {
                    out.add(new Finding("kv_events", "no KV-event publisher", ep.kvEvents(),
                        "start SGLang with --kv-events-config '{\"publisher\":\"zmq\",\"endpoint\":\"tcp://*:"
                            + portOf(ep.kvEvents()) + "\",\"topic\":\"" + nullToEmpty(ep.kvTopic()) + "\"}'"));
                }
            } else if (ep.kvEvents() == null) {
                if (kvRule) {
                    out.add(new Finding("kv_events", "publishes on port " + kv.path("endpoint_port_base").asText()
                        + " (topic \"" + kv.path("topic").asText("") + "\")", "none",
                        "set the endpoint's kv_events: tcp://" + ep.host() + ":" + kv.path("endpoint_port_base").asText()
                            + (kv.path("topic").asText("").isEmpty() ? "" : " and kv_topic: " + kv.path("topic").asText())));
                }
            } else {
                String publisher = kv.path("publisher").asText("zmq");
                if (!"zmq".equals(publisher)) {
                    out.add(new Finding("kv_events.publisher", publisher, "zmq", "publish with \"publisher\": \"zmq\""));
                }
                int port = kv.path("endpoint_port_base").asInt(-1);
                int configuredPort = portOf(ep.kvEvents());
                if (port > 0 && configuredPort > 0 && port != configuredPort) {
                    out.add(new Finding("kv_events.endpoint_port_base", Integer.toString(port), ep.kvEvents(),
                        "set kv_events to port " + port + " (rank r publishes on " + port + " + r)"));
                }
                JsonNode topic = kv.get("topic");
                if (topic != null && topic.isTextual() && !topic.asText().equals(nullToEmpty(ep.kvTopic()))) {
                    out.add(new Finding("kv_events.topic", "\"" + topic.asText() + "\"", "\"" + nullToEmpty(ep.kvTopic()) + "\"",
                        "set kv_topic: \"" + topic.asText() + "\" (a subscriber on another topic receives nothing)"));
                }
                int blockSize = kv.path("block_size").asInt(0);
                if (blockSize > 0 && blockSize != rule.blockSize()) {
                    out.add(new Finding("kv_events.block_size", Integer.toString(blockSize),
                        "block_size " + rule.blockSize(), "set the rule's block_size to " + blockSize
                            + " (SGLang keys its events at page_size x dcp_size)"));
                }
                int dp = kv.path("dp_size").asInt(0);
                if (dp > 0 && dp != ep.dpRanks()) {
                    out.add(new Finding("kv_events.dp_size", Integer.toString(dp), "dp_ranks " + ep.dpRanks(),
                        "set the endpoint's dp_ranks to " + dp));
                }
            }
        }
        JsonNode spec = info.get("speculative_algorithm");
        if (kvRule && !"learned".equals(rule.kvKeyMode()) && spec != null && spec.isTextual()
            && spec.asText().toUpperCase(Locale.ROOT).startsWith("EAGLE")) {
            out.add(new Finding("speculative_algorithm", spec.asText(), "kv_exact with one-token cells",
                "SGLang with EAGLE keys its radix tree by token pairs (bigram keys), which the gateway does not hash:"
                    + " run the rule's engines without EAGLE or route the rule by another policy"));
        }
        return out;
    }

    private static int portOf(String url) {
        if (url == null) {
            return -1;
        }
        try {
            return URI.create(url).getPort();
        } catch (IllegalArgumentException e) {
            return -1;
        }
    }

    private static String nullToEmpty(String s) {
        return s == null ? "" : s;
    }
}
