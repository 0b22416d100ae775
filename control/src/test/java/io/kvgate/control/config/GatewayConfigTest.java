package io.kvgate.control.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class GatewayConfigTest {
    private static final String BASE = """
        listen: 127.0.0.1:8080
        admin_listen: 127.0.0.1:8081
        rules:
          - name: chat
            models: [qwen3]
            engine: vllm
            policy: round_robin
            endpoints:
              - url: http://127.0.0.1:9001
                weight: 2
        """;

    /** Two rules naming one endpoint, each with its own kv_events lines. */
    private static String twoRulesSharingAnEndpoint(String firstKv, String secondKv) {
        return "listen: 127.0.0.1:8080\nadmin_listen: 127.0.0.1:8081\nrules:\n"
            + "  - name: chat\n    models: [qwen3]\n    engine: vllm\n    policy: round_robin\n    endpoints:\n"
            + "      - url: http://127.0.0.1:9001\n" + firstKv
            + "  - name: code\n    models: [coder]\n    engine: vllm\n    policy: round_robin\n    endpoints:\n"
            + "      - url: http://127.0.0.1:9001\n" + secondKv;
    }

    @Test
    void oneEndpointWithConflictingKvEventsInTwoRulesIsRefusedNamingBothRulesAndValues() throws Exception {
        String connect = "        kv_events: tcp://127.0.0.1:5557\n";
        String bind = "        kv_events: tcp://127.0.0.1:5557\n        kv_events_bind: true\n";
        String otherUri = "        kv_events: tcp://127.0.0.1:5558\n";
        String p = problems(twoRulesSharingAnEndpoint(connect, bind));
        assertTrue(p.contains("rules[1] (name=code).endpoints[0] (url=http://127.0.0.1:9001).kv_events: value"
            + " 'tcp://127.0.0.1:5557' (kv_events_bind: true, the gateway binds) conflicts with rule 'chat', which"
            + " declares 'tcp://127.0.0.1:5557' (the gateway connects) for the same endpoint 127.0.0.1:9001"), p);
        p = problems(twoRulesSharingAnEndpoint(connect, otherUri));
        assertTrue(p.contains("value 'tcp://127.0.0.1:5558' (the gateway connects) conflicts with rule 'chat', which"
            + " declares 'tcp://127.0.0.1:5557' (the gateway connects)"), p);
        // The same declaration twice, or a rule that asks for no events on the shared endpoint, is fine.
        assertEquals(2, GatewayConfig.parse(twoRulesSharingAnEndpoint(bind, bind)).rules().size());
        assertEquals(2, GatewayConfig.parse(twoRulesSharingAnEndpoint(connect, "        weight: 1\n")).rules().size());
    }

    private static String problems(String yaml) {
        ConfigException e = assertThrows(ConfigException.class, () -> GatewayConfig.parse(yaml));
        return String.join("\n", e.problems());
    }

    @Test
    void parsesTheDocumentedVocabulary() throws Exception {
        GatewayConfig c = GatewayConfig.parse(BASE);
        assertEquals(8080, c.listen().port());
        RuleConfig r = c.rules().get(0);
        assertEquals("chat", r.name());
        assertEquals("sha256_cbor", r.hashAlgo());
        assertEquals(16, r.blockSize());
        assertEquals(2, r.endpoints().get(0).weight());
        assertEquals("127.0.0.1:9001", r.endpoints().get(0).key());
        assertEquals(r, c.ruleForModel("qwen3"));
    }

    @Test
    void ingestBoundsAllowListAndTierWeights() throws Exception {
        GatewayConfig d = GatewayConfig.parse(BASE);
        assertEquals(GatewayConfig.Ingest.DEFAULTS, d.ingest());
        assertEquals(16 << 20, d.ingest().maxFrameBytes());
        assertEquals(RuleConfig.TierWeights.DEFAULTS, d.rules().get(0).kvExact().tierWeights());
        assertEquals(0.8, d.rules().get(0).kvExact().tierWeights().of(1));

        assertEquals(256 << 10, d.ingest().socketReceiveBufferBytes());
        assertEquals(8, d.ingest().maxPeersPerBindSocket());
        GatewayConfig c = GatewayConfig.parse("ingest:\n  max_frame_bytes: 1048576\n  receive_buffer_bytes: 8388608\n"
            + "  socket_receive_buffer_bytes: 0\n  max_peers_per_bind_socket: 2\n"
            + BASE.replace("weight: 2", "weight: 2\n        kv_events: tcp://0.0.0.0:5557\n        kv_events_bind: true\n"
            + "        kv_events_allow: [10.0.0.7, 10.1.0.0/16, 'fd00::/8']")
            .replace("policy: round_robin", "policy: round_robin\n    kv:\n      tier_weights: {CPU_TIER: 0.6, DISK: 0.1}"));
        assertEquals(1 << 20, c.ingest().maxFrameBytes());
        assertEquals(8L << 20, c.ingest().receiveBufferBytes());
        assertEquals(0, c.ingest().socketReceiveBufferBytes(), "0 = the kernel's default");
        assertEquals(2, c.ingest().maxPeersPerBindSocket());
        assertEquals(java.util.List.of("10.0.0.7", "10.1.0.0/16", "fd00::/8"), c.rules().get(0).endpoints().get(0).kvEventsAllow());
        assertEquals(new RuleConfig.TierWeights(1.0, 0.6, 0.1), c.rules().get(0).kvExact().tierWeights());

        String p = problems("ingest:\n  max_frame_bytes: 100\n  receive_buffer_bytes: 2048\n  retry_initial_ms: 500\n"
            + "  retry_max_ms: 100\n" + BASE);
        assertTrue(p.contains("ingest.max_frame_bytes: value 100 must be in [1024, 1073741824]"), p);
        assertTrue(p.contains("ingest.retry_max_ms: value 100 must be >= ingest.retry_initial_ms (500)"), p);
        p = problems("ingest:\n  socket_receive_buffer_bytes: -1\n" + BASE);
        assertTrue(p.contains("ingest.socket_receive_buffer_bytes: value -1 must be in [0, 1073741824]"), p);
        p = problems("ingest:\n  max_peers_per_bind_socket: 0\n" + BASE);
        assertTrue(p.contains("ingest.max_peers_per_bind_socket: value 0 must be in [1, 1024]"), p);
        p = problems("ingest:\n  socket_receive_buffer_bytes: 2147483648\n" + BASE);
        assertTrue(p.contains("ingest.socket_receive_buffer_bytes"), p);
        p = problems("ingest:\n  max_frame_bytes: 4096\n  receive_buffer_bytes: 2048\n" + BASE);
        assertTrue(p.contains("ingest.receive_buffer_bytes: value 2048 must be >= ingest.max_frame_bytes (4096)"), p);
        p = problems(BASE.replace("weight: 2", "weight: 2\n        kv_events: tcp://127.0.0.1:5557\n        kv_events_allow: [example.com]"));
        assertTrue(p.contains("kv_events_allow: value 'example.com' must list IP addresses or CIDR blocks"), p);
        assertTrue(p.contains("kv_events_allow: value [example.com] applies only with kv_events_bind: true"), p);
        p = problems(BASE.replace("weight: 2", "weight: 2\n        kv_events: tcp://127.0.0.1:5557\n        kv_events_curve_server_key: short"));
        assertTrue(p.contains("kv_events_curve_server_key: value 'short' must be a 40-character Z85 CURVE public key"), p);
        assertTrue(p.contains("needs both kv_events_curve_server_key and kv_events_curve_secret_file"), p);
        p = problems(BASE.replace("policy: round_robin", "policy: round_robin\n    kv:\n      tier_weights: {GPU: 2, TAPE: 0.1}"));
        assertTrue(p.contains("kv.tier_weights.GPU: value 2 must be in [0.0, 1.0]"), p);
        assertTrue(p.contains("kv.tier_weights.TAPE: unknown key"), p);
    }

    @Test
    void unknownKeysAreErrorsNamingThePath() {
        assertTrue(problems(BASE + "    polcy: x\n").contains("rules[0] (name=chat).polcy: unknown key"));
        assertTrue(problems("lisen: 1:2\n" + BASE.substring(BASE.indexOf("admin"))).contains("lisen: unknown key"));
    }

    @Test
    void badValuesNameKeyValueAndRule() {
        String p = problems(BASE.replace("policy: round_robin", "policy: fastest"));
        assertTrue(p.contains("rules[0] (name=chat).policy: value 'fastest' must be one of round_robin|weighted|least_outstanding"), p);
        p = problems(BASE.replace("http://127.0.0.1:9001", "ftp://x"));
        assertTrue(p.contains("url: value 'ftp://x' must be an http://host:port or https://host:port URL"), p);
        p = problems(BASE.replace("engine: vllm", "engine: vllm\n    hash_algo: sha256_sglang"));
        assertTrue(p.contains("hash_algo: value 'sha256_sglang' cannot match engine 'vllm'"), p);
        p = problems(BASE.replace("engine: vllm", "engine: vllm\n    block_size: 0"));
        assertTrue(p.contains("block_size: value 0 must be in [1, 4096]"), p);
        p = problems(BASE.replace("weight: 2", "weight: 2\n        dp_ranks: 9"));
        assertTrue(p.contains("dp_ranks: value 9 must be in [1, 8]"), p);
    }

    @Test
    void reportsEveryProblemAtOnce() {
        ConfigException e = assertThrows(ConfigException.class,
            () -> GatewayConfig.parse(BASE.replace("policy: round_robin", "policy: x\n    bogus: 1").replace("weight: 2", "weight: -1")));
        assertEquals(3, e.problems().size(), e.getMessage());
    }

    @Test
    void pdRulesAreCoherent() {
        String pd = BASE.replace("policy: round_robin", "policy: pd").replace("weight: 2", "role: prefill");
        assertTrue(problems(pd).contains("policy 'pd' needs at least one endpoint with role: decode"));
        String roleOnPlain = BASE.replace("weight: 2", "role: decode");
        assertTrue(problems(roleOnPlain).contains("role is only valid under policy 'pd'"));
        String bootstrapOnVllm = pd.replace("role: prefill", "role: prefill\n        bootstrap_port: 8998")
            + "      - url: http://127.0.0.1:9002\n        role: decode\n";
        assertTrue(problems(bootstrapOnVllm).contains("bootstrap_port 8998 is only valid on SGLang prefill endpoints"));
    }

    @Test
    void duplicateModelsAndRulesAreRefused() {
        String dup = BASE + """
              - name: chat
                models: [qwen3]
                endpoints:
                  - url: http://127.0.0.1:9002
            """;
        String p = problems(dup);
        assertTrue(p.contains("duplicate rule name"), p);
        assertTrue(p.contains("model 'qwen3' is already served by rule 'chat'"), p);
    }

    @Test
    void nonLoopbackAdminNeedsAToken() {
        assertTrue(problems(BASE.replace("admin_listen: 127.0.0.1:8081", "admin_listen: 0.0.0.0:8081"))
            .contains("set admin_token"));
    }

    @Test
    void invalidYamlIsAClearError() {
        ConfigException e = assertThrows(ConfigException.class, () -> GatewayConfig.parse("rules: [\n  - name: x\n  oops"));
        assertTrue(e.getMessage().startsWith("configuration is not valid YAML"));
    }

    @Test
    void frontDoorBoundsPerRuleHaveDefaultsAndRanges() throws Exception {
        RuleConfig r = GatewayConfig.parse(BASE).rules().get(0);
        assertEquals(128, r.maxN());
        assertEquals(1 << 20, r.maxPromptTokens());
        RuleConfig set = GatewayConfig.parse(BASE.replace("    policy: round_robin\n",
            "    policy: round_robin\n    max_n: 8\n    max_prompt_tokens: 32768\n")).rules().get(0);
        assertEquals(8, set.maxN());
        assertEquals(32768, set.maxPromptTokens());
        String p = problems(BASE.replace("    policy: round_robin\n", "    policy: round_robin\n    max_n: 0\n    max_prompt_tokens: -1\n"));
        assertTrue(p.contains("rules[0] (name=chat).max_n: value 0 must be in [1, 4096]"), p);
        assertTrue(p.contains("rules[0] (name=chat).max_prompt_tokens: value -1 must be in [1, 16777216]"), p);
    }

    @Test
    void admissionIsOffUntilAThresholdIsSetAndNamesEveryBadValue() throws Exception {
        RuleConfig off = GatewayConfig.parse(BASE).rules().get(0);
        assertEquals(RuleConfig.AdmissionConfig.OFF, off.admission());
        assertTrue(!off.admission().enabled());

        String fp = "0123456789abcdef".repeat(4);
        RuleConfig on = GatewayConfig.parse(BASE.replace("policy: round_robin", "policy: round_robin\n    admission:\n"
            + "      max_waiting: 4\n      max_queue: 32\n      api_key_priorities: {" + fp + ": batch}")).rules().get(0);
        RuleConfig.AdmissionConfig a = on.admission();
        assertTrue(a.enabled());
        assertEquals(4, a.maxWaiting());
        assertEquals(-1, a.maxKvUsage());
        assertEquals(-1, a.maxOutstanding());
        assertEquals(32, a.maxQueue());
        assertEquals(RuleConfig.AdmissionConfig.DEFAULT_MAX_WAIT_MS, a.maxWaitMs());
        assertEquals(java.util.Map.of(fp, "batch"), a.apiKeyPriorities());

        String p = problems(BASE.replace("policy: round_robin", "policy: round_robin\n    admission:\n"
            + "      max_kv_usage: 1.5\n      max_wait_ms: 10\n      api_key_priorities: {sk-live-123: urgent}"));
        assertTrue(p.contains("rules[0] (name=chat).admission.max_kv_usage: value 1.5 must be in [0.0, 1.0]"), p);
        assertTrue(p.contains("rules[0] (name=chat).admission.max_wait_ms: value 10 must be in [50, 600000]"), p);
        assertTrue(p.contains("admission.api_key_priorities: key 'sk-live-123' must be the SHA-256 of an API key"), p);
        assertTrue(p.contains("admission.api_key_priorities.sk-live-123: value 'urgent' must be one of interactive|standard|batch"), p);

        p = problems(BASE.replace("policy: round_robin", "policy: round_robin\n    admission:\n      max_outstanding: 2\n"
            + "      interactive_reserve: 2"));
        assertTrue(p.contains("rules[0] (name=chat).admission.interactive_reserve: value 2 must be < admission.max_outstanding (2)"), p);
        p = problems(BASE.replace("policy: round_robin", "policy: round_robin\n    admission:\n      max_queue: 10"));
        assertTrue(p.contains("admission settings without a saturation threshold do nothing"), p);
        p = problems("router: {ring_size: 64}\n" + BASE.replace("policy: round_robin", "policy: round_robin\n    admission:\n"
            + "      max_outstanding: 2\n      max_queue: 100"));
        assertTrue(p.contains("rules (name=chat).admission.max_queue: value 100 must be <= router.ring_size (64)"), p);
        p = problems(BASE.replace("policy: round_robin", "policy: round_robin\n    admission:\n      max_outstanding: 2\n      max_queu: 1"));
        assertTrue(p.contains("rules[0] (name=chat).admission.max_queu: unknown key"), p);
    }

    @Test
    void routerThreadAutoRunsTheStageOnTheIoThreadOnlyWithOneIoThreadAndTheBlockingWait() throws Exception {
        GatewayConfig d = GatewayConfig.parse(BASE);
        assertEquals(GatewayConfig.RouterThread.AUTO, d.router().threadKind());
        assertEquals(false, d.routerRunsOnIoThread(), "io_threads: 0 (one per core): a dedicated routing thread");
        assertEquals(true, GatewayConfig.parse("io_threads: 1\n" + BASE).routerRunsOnIoThread(), "one I/O thread: auto = io");
        assertEquals(false, GatewayConfig.parse("io_threads: 2\n" + BASE).routerRunsOnIoThread());
        assertEquals(false, GatewayConfig.parse("io_threads: 1\nrouter: {wait_strategy: yielding}\n" + BASE).routerRunsOnIoThread(),
            "a spinning wait asks for a thread of its own");
        assertEquals(false, GatewayConfig.parse("io_threads: 1\nrouter: {thread: dedicated}\n" + BASE).routerRunsOnIoThread());
        GatewayConfig io = GatewayConfig.parse("io_threads: 1\nrouter: {thread: io}\n" + BASE);
        assertEquals(true, io.routerRunsOnIoThread());
        assertEquals(java.util.List.of("router.thread"), io.restartOnlyChanges(GatewayConfig.parse("io_threads: 1\n" + BASE)));
        assertTrue(GatewayConfig.RESTART_ONLY.contains("router.thread"));
    }

    @Test
    void routerThreadIoWithMoreThanOneIoThreadOrASpinningWaitIsRefusedNamingTheKey() {
        String p = problems("io_threads: 4\nrouter: {thread: io}\n" + BASE);
        assertTrue(p.contains("router.thread: value 'io' requires io_threads: 1 (the routing stage runs on the one I/O event loop, "
            + "its single writer); io_threads is 4: use thread: dedicated or auto"), p);
        p = problems("router: {thread: io}\n" + BASE);
        assertTrue(p.contains("router.thread: value 'io' requires io_threads: 1") && p.contains("io_threads is 0 (one per core)"), p);
        p = problems("io_threads: 1\nrouter: {thread: io, wait_strategy: busy_spin}\n" + BASE);
        assertTrue(p.contains("router.wait_strategy: value 'busy_spin' applies to a dedicated routing thread only"), p);
        p = problems("router: {thread: invoker}\n" + BASE);
        assertTrue(p.contains("router.thread: value 'invoker' must be one of auto|dedicated|io"), p);
    }

    @Test
    void perClientConnectionsFollowMaxConnectionsUnlessSetAndZeroTurnsThemOff() throws Exception {
        assertEquals(50_000, GatewayConfig.parse(BASE).limits().connectionsPerClient(), "half of the default 100000");
        GatewayConfig c = GatewayConfig.parse("limits: {max_connections: 300}\n" + BASE);
        assertEquals(150, c.limits().connectionsPerClient());
        assertEquals(false, ConfigTree.toTree(c, false).toString().contains("max_connections_per_client"),
            "unset, it is not written back: a GET -> PUT keeps it following max_connections");
        assertEquals(1, GatewayConfig.parse("limits: {max_connections: 1}\n" + BASE).limits().connectionsPerClient());
        assertEquals(0, GatewayConfig.parse("limits: {max_connections_per_client: 0}\n" + BASE).limits().connectionsPerClient());
        assertEquals(7, GatewayConfig.parse("limits: {max_connections_per_client: 7}\n" + BASE).limits().connectionsPerClient());
        String p = problems("limits: {max_connections_per_client: -1}\n" + BASE);
        assertTrue(p.contains("limits.max_connections_per_client: value -1 must be in [0, 10000000]"), p);
    }

    @Test
    void bufferedResponseBytesDefaultToNettysHighWaterMarkAndCannotGoUnderIt() throws Exception {
        assertEquals(65_536, GatewayConfig.parse(BASE).limits().maxBufferedResponseBytes());
        assertEquals(1 << 20, GatewayConfig.parse("limits: {max_buffered_response_bytes: 1048576}\n" + BASE).limits()
            .maxBufferedResponseBytes());
        String p = problems("limits: {max_buffered_response_bytes: 4096}\n" + BASE);
        assertTrue(p.contains("limits.max_buffered_response_bytes: value 4096 must be in [65536, 1073741824]"), p);
    }
}
