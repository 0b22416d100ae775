package io.kvgate.control.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.RecordComponent;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Guards the read-back against keys added later: every component of every configuration record must appear in
 * {@link ConfigTree#toTree} (under its snake_case name), and a configuration that sets every key to a non-default
 * value survives {@code toTree -> YAML -> parse} unchanged. A key someone adds to the parser but not to the tree
 * fails here instead of silently resetting on the next {@code GET -> PUT}.
 */
class ConfigTreeCoverageTest {
    /** Components written under another name, or not at all (derived from another key). */
    private static final Map<String, String> RENAMED = Map.of("RuleConfig.kvExact", "kv", "RuleConfig.modelEntries", "models", "TierWeights.gpu", "GPU",
        "TierWeights.cpu", "CPU_TIER", "TierWeights.disk", "DISK", "TlsConfig.listener", "tls", "TlsConfig.upstream", "upstream_tls",
        "TlsConfig.picker", "epp_tls");
    /** Components whose record is written into its parent's mapping (TlsConfig: tls, proxy_protocol, upstream_tls at the top). */
    private static final Set<String> FLATTENED = Set.of("GatewayConfig.tls", "GatewayConfig.tenancy");
    private static final Set<String> DERIVED = Set.of("EndpointConfig.host", "EndpointConfig.port",
        "CacheSalt.secret"); // read from cache_salt.secret_file, never written

    @TempDir
    Path dir;

    private String full() throws Exception {
        return full(dir);
    }

    /**
     * A configuration that sets every key (both secrets' inline forms aside: {@code api_keys_file} here, see
     * {@link ConfigSchemaTest}) to a valid value other than its default, files written into {@code dir}.
     */
    static String full(Path dir) throws Exception {
        Path secret = dir.resolve("curve.secret");
        Files.writeString(secret, "0".repeat(40));
        Files.writeString(dir.resolve("keys"), "k1\nk2\n");
        Files.writeString(dir.resolve("tenant-keys"), "# beta\n" + "cd".repeat(32) + "\n");
        Files.writeString(dir.resolve("salt.secret"), "s".repeat(32));
        Files.writeString(dir.resolve("tmpl.jinja"), "{{ messages[0].content }}");
        for (String pem : new String[] {"c.pem", "k.pem", "ca.pem"}) {
            Files.writeString(dir.resolve(pem), "pem"); // only readability is checked by the parser
        }
        return """
            listen: 127.0.0.1:18080
            admin_listen: 127.0.0.1:18081
            epp_listen: 127.0.0.1:18082
            admin_token: admin-token-0123456789
            transport: nio
            io_threads: 3
            control_socket: /tmp/x.sock
            control_allowed_uids: [1000, 1001]
            admin_limits: {max_connections: 9, idle_timeout_ms: 9000, max_body_bytes: 9999}
            limits: {max_body_bytes: 9999, max_header_bytes: 9999, max_initial_line_bytes: 999, request_read_timeout_ms: 99,
                     client_idle_timeout_ms: 99, max_connections: 99, max_connections_per_client: 9, client_stall_timeout_ms: 99,
                     max_buffered_response_bytes: 99999}
            upstream: {connect_timeout_ms: 9, first_byte_timeout_ms: 9, idle_timeout_ms: 9, max_connect_attempts: 9,
                       max_idle_per_endpoint: 9, max_error_body_bytes: 9999}
            health: {path: /h, interval_ms: 99, timeout_ms: 9, healthy_threshold: 9, unhealthy_threshold: 9,
                     breaker_failure_threshold: 9, breaker_open_ms: 9, retry_after_seconds: 9}
            router: {ring_size: 64, wait_strategy: yielding, thread: dedicated}
            ingest: {max_frame_bytes: 9999, receive_buffer_bytes: 99999, socket_receive_buffer_bytes: 9999, retry_initial_ms: 9, retry_max_ms: 99,
                     max_peers_per_bind_socket: 3}
            load: {enabled: false, scrape_interval_ms: 99, stale_ms: 999, timeout_ms: 9, max_body_bytes: 9999, path: /m,
                   peer_decay: none, ttft_aware: true, ttft_recover_ms: 999}
            tracing: {otlp_endpoint: "http://127.0.0.1:4318/v1/traces", sample_ratio: 0.25, service_name: gw-9}
            shutdown: {drain_delay_ms: 99}
            logging: {format: json, level: debug, access_log: stdout, access_log_queue: 1024}
            api_keys_file: keys
            tls: {cert_file: c.pem, key_file: k.pem, client_ca_file: ca.pem, client_auth: require, client_identities: [a],
                  provider: jdk, watch_interval_ms: 9}
            proxy_protocol: true
            replicas: 3
            tenants:
              - name: acme
                api_key_sha256: ["%4$s"]
                models: [m1]
                priority: interactive
                priority_header: true
                shared_prefix_salt: true
                client_cache_salt: refuse
                limits: {requests_per_minute: 9, tokens_per_minute: 99, max_concurrent: 3, tokens_per_day: 999}
              - name: beta
                api_keys_file: tenant-keys
            rate_limit_store: {url: "redis://127.0.0.1:6379", on_failure: deny, timeout_ms: 9}
            cache_salt: {secret_file: salt.secret}
            upstream_tls: {ca_file: ca.pem, cert_file: c.pem, key_file: k.pem}
            epp_tls: {cert_file: c.pem, key_file: k.pem, client_ca_file: ca.pem}
            rules:
              - name: r
                models: [m1, {name: m2, served_as: m2, adapters: [m2-lora]}, {name: m9, served_as: m1}]
                greedy_n: reject
                speculative: true
                max_logit_bias: 7
                tool_call_parser: hermes
                health: {path: /health_generate, timeout_ms: 5000}
                engine: vllm
                policy: kv_exact
                fallback: weighted
                block_size: 32
                hash_seed: "7"
                hash_algo: xxhash_cbor
                kv_key_mode: learned
                kv_capacity_blocks: 9999
                explain: true
                max_n: 9
                max_prompt_tokens: 999
                max_model_len: 4096
                on_context_overflow: clamp
                tokenizer: .
                chat_template: tmpl.jinja
                session: {key: cookie, header: x-h, cookie: c, mode: table, ttl_ms: 9, max_entries: 9}
                chwbl: {prefix_tokens: 9, prefix_blocks: 9, virtual_nodes: 9, load_factor: 0.5, prefix_chars: 99,
                       skip_common_prefix: false}
                kv: {mode: soft, load_cap_factor: 2.5, load_slack: 3.5, lambda: 4.5, min_match_blocks: 9, cold_readmit_every: 9,
                     speculative_ttl_ms: 9, watchdog_zero_hit_streak: 9, parity_probe_at_startup: true, warmup_ms: 9,
                     tier_weights: {GPU: 0.9, CPU_TIER: 0.7, DISK: 0.3}, prefill_token_weight: 0.01, dp_rank_hint: false,
                     min_match_fraction: 0.3, spread: recent_work, recent_work_window_ms: 3000}
                pd: {prefill_timeout_ms: 9, decode_timeout_ms: 9, prefill_policy: least_outstanding, session_affinity: true,
                     min_uncached_tokens: 99}
                admission: {max_queue: 9, max_wait_ms: 999, max_waiting: 9, max_kv_usage: 0.9, max_outstanding: 9,
                            interactive_reserve: 2, api_key_priorities: {%s: batch}}
                hedge: {after_ms: 99, max_extra_ratio: 0.2, window_ms: 9999, ttft_factor: 2.5}
                failover: {mid_stream: true, max_migrations: 9, stall_ms: 99}
                endpoints:
                  - url: http://127.0.0.1:9001
                    weight: 9
                    kv_events: tcp://127.0.0.1:5557
                    kv_events_bind: true
                    kv_topic: t
                    dp_ranks: 2
                    kv_replay: tcp://127.0.0.1:5558
                    kv_events_allow: [127.0.0.1, 10.0.0.0/8]
                    kv_events_curve_server_key: "%s"
                    kv_events_curve_secret_file: %s
              - name: pd
                models: [m3]
                engine: sglang
                policy: pd
                session: {mode: hash, load_cap_factor: 2.5, load_slack: 0.5, share_cap_factor: 1.5}
                endpoints:
                  - {url: "http://127.0.0.1:9101", role: prefill, bootstrap_port: 9999}
                  - {url: "http://127.0.0.1:9102", role: decode}
              - name: trt
                models: [m4]
                engine: trtllm
                policy: kv_exact
                endpoints:
                  - {url: "http://127.0.0.1:9201", kv_events: "http://127.0.0.1:9201/kv_cache_events", kv_poll_ms: 25}
              - name: ll
                models: [m5]
                engine: llamacpp
                policy: session
                session: {pin_slot: true, slots: 8}
                endpoints:
                  - {url: "http://127.0.0.1:9301"}
              - name: dns
                models: [m6]
                discovery: {type: dns, name: vllm.llm.svc.cluster.local, record: a, ports: [8000, 8001], scheme: https,
                            interval_ms: 999, kv_events_port: 5557, kv_topic: kv, dp_ranks: 2}
              - name: srv
                models: [m12]
                discovery: {type: dns, name: _http._tcp.vllm.llm.svc.cluster.local, record: srv}
              - name: k8s-pd
                models: [m7]
                engine: sglang
                policy: pd
                discovery: {type: kubernetes, namespace: llm, prefill_selector: {role: prefill}, decode_selector: {role: decode},
                            ports: [http], kv_events_port: kv-events, bootstrap_port: 9998}
              - name: k8s-svc
                models: [m8]
                discovery: {type: kubernetes, service: vllm}
              - name: k8s-pods
                models: [m10]
                discovery: {type: kubernetes, selector: {app: vllm}}
              - name: pool
                models: [m11]
                discovery: {type: inference_pool, pool: vllm-pool, namespace: llm}
            """.formatted("ab".repeat(32), "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7", secret, "ef".repeat(32));
    }

    @Test
    void everyKeySurvivesTheReadBack() throws Exception {
        GatewayConfig c = GatewayConfig.parse(full(), dir, n -> null);
        GatewayConfig back = GatewayConfig.parse(ConfigTree.dump(ConfigTree.toTree(c, true)), dir, n -> null);
        assertEquals(c, back, "toTree -> YAML -> parse must give the same configuration");
        assertTrue(ConfigTree.sameEffective(c, back));
    }

    @Test
    void everyRecordComponentIsWritten() throws Exception {
        GatewayConfig c = GatewayConfig.parse(full().replace("api_keys_file: keys", "api_keys: [k1]"), dir, n -> null);
        // A component counts as written when some instance of its record writes it (optional keys are omitted where unset).
        Set<String> components = new java.util.TreeSet<>();
        Set<String> written = new java.util.TreeSet<>();
        walk(c, ConfigTree.toTree(c, true), components, written);
        components.removeAll(written);
        assertEquals(Set.of(), components, "configuration record components ConfigTree does not write");
    }

    private static void walk(Record r, Map<?, ?> tree, Set<String> components, Set<String> written) throws Exception {
        for (RecordComponent rc : r.getClass().getRecordComponents()) {
            String id = r.getClass().getSimpleName() + "." + rc.getName();
            String file = id.equals("GatewayConfig.apiKeysFile") || id.equals("GatewayConfig.adminTokenFile") ? null : id;
            if (DERIVED.contains(id) || file == null) {
                continue; // file-sourced secrets are written only when used (the test config uses the inline form)
            }
            if (FLATTENED.contains(id)) {
                components.add(id);
                written.add(id);
                walk((Record) rc.getAccessor().invoke(r), tree, components, written);
                continue;
            }
            String key = RENAMED.getOrDefault(id, rc.getName().replaceAll("([A-Z])", "_$1").toLowerCase(java.util.Locale.ROOT));
            Object value = rc.getAccessor().invoke(r);
            String label = id + " (key " + key + ")";
            components.add(label);
            if (!tree.containsKey(key)) {
                continue;
            }
            written.add(label);
            Object sub = tree.get(key);
            if (value instanceof Record child && !(value instanceof GatewayConfig.HostPort) && sub instanceof Map<?, ?> m) {
                walk(child, m, components, written);
            } else if (value instanceof List<?> list && !list.isEmpty() && list.get(0) instanceof Record && sub instanceof List<?> subs) {
                for (int i = 0; i < list.size(); i++) {
                    if (subs.get(i) instanceof Map<?, ?> sm) { // a plain model name is written as a string
                        walk((Record) list.get(i), sm, components, written);
                    }
                }
            }
        }
    }
}
