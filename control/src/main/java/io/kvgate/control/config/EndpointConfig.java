package io.kvgate.control.config;

import java.net.URI;
import java.util.List;
import java.util.regex.Pattern;

/**
 * One engine endpoint of a rule.
 *
 * @param url            base URL of the engine's HTTP server ({@code http://host:port}, or {@code https://host:port}
 *                       for TLS to the engine)
 * @param weight         relative share for weighted policies
 * @param kvEvents       ZMQ endpoint of the engine's KV-event publisher for DP rank 0 (rank r at port + r), or, for
 *                       TensorRT-LLM, the URL of its draining HTTP event endpoint
 *                       ({@code http://host:port/kv_cache_events}, every attention-DP rank through it); or null
 * @param kvEventsBind   true when the engine connects to us (its config names a concrete host): we bind
 * @param kvTopic        topic prefix to subscribe to ("" = every message)
 * @param dpRanks        data-parallel ranks publishing events (1..8)
 * @param kvReplay       ZMQ ROUTER endpoint for replay of missed batches (rank r at port + r), or null
 * @param role           P/D role ("prefill" | "decode") or null outside P/D rules
 * @param bootstrapPort  SGLang prefill bootstrap port (P/D), or 0
 * @param kvEventsAllow  bind mode only: peer addresses (IPv4/IPv6 literals or CIDR blocks) allowed to connect to the
 *                       bound socket, enforced by a ZAP handler; empty = any peer
 * @param kvEventsCurveServerKey  CURVE: the Z85 public key of the side that binds (the engine's publisher when we
 *                       connect; ours, for reference, when we bind), or null for no CURVE
 * @param kvEventsCurveSecretFile CURVE: file holding the gateway's Z85 secret key (40 chars), required with the key
 * @param kvPollMs       HTTP {@code kv_events} only: time between the end of one drain and the start of the next
 */
public record EndpointConfig(String url, String host, int port, int weight, String kvEvents, boolean kvEventsBind,
                             String kvTopic, int dpRanks, String kvReplay, String role, int bootstrapPort,
                             List<String> kvEventsAllow, String kvEventsCurveServerKey, String kvEventsCurveSecretFile,
                             int kvPollMs) {

    /** Default of {@code kv_poll_ms}. */
    public static final int DEFAULT_KV_POLL_MS = 50;

    /** The shape before the peer allow-list and CURVE keys existed. */
    public EndpointConfig(String url, String host, int port, int weight, String kvEvents, boolean kvEventsBind,
                          String kvTopic, int dpRanks, String kvReplay, String role, int bootstrapPort) {
        this(url, host, port, weight, kvEvents, kvEventsBind, kvTopic, dpRanks, kvReplay, role, bootstrapPort, List.of(),
            null, null, DEFAULT_KV_POLL_MS);
    }

    /** Whether {@code kv_events} names a draining HTTP endpoint (TensorRT-LLM) rather than a ZeroMQ publisher. */
    public boolean kvEventsOverHttp() {
        return kvEvents != null && kvEvents.startsWith("http://");
    }

    /** Whether the engine is reached over TLS ({@code https://}, see {@code upstream_tls}). */
    public boolean tls() {
        return url != null && url.startsWith("https://");
    }

    /** P/D role, typed (null outside P/D rules). */
    public enum Role { PREFILL, DECODE }

    public Role roleKind() {
        return role == null ? null : Role.valueOf(role.toUpperCase(java.util.Locale.ROOT));
    }

    /** The endpoint's identity across configuration swaps (load, health and inventory follow it). */
    public String key() {
        return host + ":" + port;
    }

    static EndpointConfig read(ConfigNode n, boolean sglang) {
        String url = n.requiredString(EndpointKeys.URL.name());
        String host = null;
        int port = 0;
        if (url != null) {
            try {
                URI u = new URI(url);
                boolean https = "https".equals(u.getScheme());
                if (!("http".equals(u.getScheme()) || https) || u.getHost() == null) {
                    n.problem("url", url, "must be an http://host:port or https://host:port URL (https: TLS to the"
                        + " engine, configured by upstream_tls)");
                } else {
                    host = u.getHost();
                    port = u.getPort() > 0 ? u.getPort() : https ? 443 : 80;
                    if (u.getPath() != null && !u.getPath().isEmpty() && !u.getPath().equals("/")) {
                        n.problem("url", url, "must not have a path: routes are appended by the gateway");
                    }
                }
            } catch (Exception e) {
                n.problem("url", url, "is not a valid URL (" + e.getMessage() + ")");
            }
        }
        int weight = EndpointKeys.WEIGHT.read(n);
        String kvEvents = EndpointKeys.KV_EVENTS.read(n);
        if (kvEvents != null && !kvEvents.matches("tcp://[^:/]+:\\d{1,5}") && !HTTP_EVENTS.matcher(kvEvents).matches()) {
            n.problem("kv_events", kvEvents, "must be tcp://host:port (a ZeroMQ publisher: vllm, sglang, trtllm streaming) or"
                + " http://host:port/path (a draining HTTP endpoint: trtllm's /kv_cache_events)");
        }
        boolean httpEvents = kvEvents != null && HTTP_EVENTS.matcher(kvEvents).matches();
        int pollMs = EndpointKeys.KV_POLL_MS.read(n);
        if (n.has("kv_poll_ms") && !httpEvents) {
            n.problem("kv_poll_ms", pollMs, "applies only to an http:// kv_events endpoint (TensorRT-LLM's draining"
                + " /kv_cache_events); ZeroMQ events are pushed, not polled");
        }
        boolean bind = EndpointKeys.KV_EVENTS_BIND.read(n);
        String topic = EndpointKeys.KV_TOPIC.read(n);
        int dpRanks = EndpointKeys.DP_RANKS.read(n);
        String replay = EndpointKeys.KV_REPLAY.read(n);
        if (replay != null && !replay.matches("tcp://[^:/]+:\\d{1,5}")) {
            n.problem("kv_replay", replay, "must be tcp://host:port");
        }
        if (replay != null && kvEvents == null) {
            n.problem("kv_replay", replay, "needs kv_events on the same endpoint");
        }
        if (httpEvents && (replay != null || bind)) {
            n.problem(replay != null ? "kv_replay" : "kv_events_bind", replay != null ? replay : bind,
                "applies only to a ZeroMQ kv_events publisher; an http:// kv_events endpoint is drained by polling");
        }
        List<String> allow = EndpointKeys.KV_EVENTS_ALLOW.read(n);
        for (String a : allow) {
            if (!ADDRESS_OR_CIDR.matcher(a).matches()) {
                n.problem("kv_events_allow", a, "must list IP addresses or CIDR blocks (e.g. 10.0.0.7, 10.0.0.0/24, fd00::/8)");
            }
        }
        if (!allow.isEmpty() && !bind) {
            n.problem("kv_events_allow", allow, "applies only with kv_events_bind: true (a connecting subscriber chooses its peer)");
        }
        String curveKey = EndpointKeys.KV_EVENTS_CURVE_SERVER_KEY.read(n);
        String curveSecret = EndpointKeys.KV_EVENTS_CURVE_SECRET_FILE.read(n);
        if (curveKey != null && !Z85_KEY.matcher(curveKey).matches()) {
            n.problem("kv_events_curve_server_key", curveKey, "must be a 40-character Z85 CURVE public key");
        }
        if ((curveKey == null) != (curveSecret == null)) {
            n.problem(curveKey == null ? "kv_events_curve_secret_file" : "kv_events_curve_server_key",
                curveKey == null ? curveSecret : curveKey,
                "needs both kv_events_curve_server_key and kv_events_curve_secret_file");
        }
        if (curveSecret != null && !java.nio.file.Files.isReadable(java.nio.file.Path.of(curveSecret))) {
            n.problem("kv_events_curve_secret_file", curveSecret, "is not a readable file");
        }
        String role = EndpointKeys.ROLE.read(n);
        // An SGLang prefill endpoint always has a bootstrap port: SGLang's default when not set.
        int bootstrapPort = EndpointKeys.BOOTSTRAP_PORT.readIfSet(n,
            sglang && "prefill".equals(role) ? EndpointKeys.BOOTSTRAP_PORT.defaultValue() : 0);
        n.finish();
        return new EndpointConfig(url, host, port, weight, kvEvents, bind, topic, dpRanks, replay, role, bootstrapPort,
            List.copyOf(allow), curveKey, curveSecret, pollMs);
    }

    private static final Pattern HTTP_EVENTS = Pattern.compile("http://(\\[[0-9A-Fa-f:.]+\\]|[^:/\\[\\]]+):\\d{1,5}(/\\S*)?");

    private static final Pattern ADDRESS_OR_CIDR = Pattern.compile(
        "(\\d{1,3}(\\.\\d{1,3}){3}(/\\d{1,2})?|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*(/\\d{1,3})?)");
    private static final Pattern Z85_KEY = Pattern.compile("[0-9a-zA-Z.\\-:+=^!/*?&<>()\\[\\]{}@%$#]{40}");
}
