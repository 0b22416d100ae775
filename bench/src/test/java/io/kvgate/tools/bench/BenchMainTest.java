package io.kvgate.tools.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(10)
class BenchMainTest {
    private static String[] args(String line) {
        return line.trim().split("\\s+");
    }

    @Test
    void parsesEveryFlag() {
        BenchConfig c = BenchMain.parse(args("--target a=http://127.0.0.1:8000 --compare b=http://h:9/v1,http://x:1"
            + " --model qwen --workload shared-prefix --route completions --rate 12.5 --duration 3 --warmup=1"
            + " --arrival constant --stream --max-tokens 7 --ignore-eos --concurrency-limit 9 --seed 5 --out r.json"
            + " --payload-bytes 2048 --groups 3 --system-tokens 11 --question-tokens 4 --turns 2 --conversations 6"
            + " --random-min-tokens 2 --random-max-tokens 3 --token-ids --header X-Kvgate-Explain:1 --api-key k"
            + " --timeout 5 --drain 2 --lag-threshold-ms 3 --max-backlog 10 --quiet --transport nio"));
        assertEquals(3, c.targets().size());
        assertEquals("a", c.targets().get(0).label());
        assertEquals("b", c.targets().get(1).label());
        assertEquals("/v1/completions", c.targets().get(1).path(c.route()));
        assertEquals("x-1", c.targets().get(2).label());
        assertEquals("qwen", c.model());
        assertEquals(BenchConfig.Workload.SHARED_PREFIX, c.workload());
        assertEquals(12.5, c.ratePerS());
        assertEquals(1.0, c.warmupS());
        assertEquals(ArrivalScheduler.Arrival.CONSTANT, c.arrival());
        assertTrue(c.stream() && c.ignoreEos() && c.tokenIds() && !c.progress());
        assertEquals(7, c.maxTokens());
        assertEquals(9, c.concurrencyLimit());
        assertEquals(5, c.seed());
        assertEquals(2048, c.payloadBytes());
        assertEquals("X-Kvgate-Explain", c.headers().get(0)[0]);
        assertEquals("1", c.headers().get(0)[1]);
        assertEquals(BenchConfig.Transport.NIO, c.transport());
        assertEquals(2.0, c.drainS());
    }

    @Test
    void errorsNameTheFlagAndTheRule() {
        assertEquals("--rate=0 must be > 0 and <= 1e7 requests/s (or use --closed-loop)", assertThrows(IllegalArgumentException.class,
            () -> BenchMain.parse(args("--target http://h:1 --model m --rate 0"))).getMessage());
        assertTrue(assertThrows(IllegalArgumentException.class,
            () -> BenchMain.parse(args("--target http://h:1 --model m --rate 1 --workload chaos"))).getMessage()
            .contains("--workload=chaos must be one of fixed|shared-prefix|multi-turn|random"));
        assertTrue(assertThrows(IllegalArgumentException.class,
            () -> BenchMain.parse(args("--target https://h:1 --model m --rate 1"))).getMessage().contains("http://"));
        assertTrue(assertThrows(IllegalArgumentException.class,
            () -> BenchMain.parse(args("--target http://h:1 --model m --rate 1 --token-ids"))).getMessage().contains("--route completions"));
        assertTrue(assertThrows(IllegalArgumentException.class,
            () -> BenchMain.parse(args("--target http://h:1 --rate 1"))).getMessage().contains("--model is required"));
        assertTrue(assertThrows(IllegalArgumentException.class,
            () -> BenchMain.parse(args("--target http://h:1 --model m --rate 1 --bogus 2"))).getMessage().contains("unknown flag '--bogus'"));
        assertTrue(assertThrows(IllegalArgumentException.class,
            () -> BenchMain.parse(args("--target a=http://h:1 --target a=http://h:2 --model m --rate 1"))).getMessage().contains("used twice"));
        // Closed loop needs no rate.
        assertTrue(BenchMain.parse(args("--target http://h:1 --model m --closed-loop --connections 3")).closedLoop());
    }

    @Test
    void gatewayMetricsListEveryReplicaAndRefuseWhatIsNotABaseUrl() {
        BenchConfig c = BenchMain.parse(args("--target http://h:1 --model m --rate 1"
            + " --gateway-metrics http://127.0.0.1:8081/,http://127.0.0.1:8082 --gateway-metrics=http://127.0.0.1:8083"));
        assertEquals(java.util.List.of("http://127.0.0.1:8081", "http://127.0.0.1:8082", "http://127.0.0.1:8083"), c.gatewayMetrics());
        assertEquals(java.util.List.of(), BenchMain.parse(args("--target http://h:1 --model m --rate 1")).gatewayMetrics(),
            "opt-in: nothing is read from a target unasked");
        assertEquals("--gateway-metrics 'https://h:1' must be http://host:port (a gateway's base URL; /metrics is appended)",
            assertThrows(IllegalArgumentException.class,
                () -> BenchMain.parse(args("--target http://h:1 --model m --rate 1 --gateway-metrics https://h:1"))).getMessage());
        assertTrue(assertThrows(IllegalArgumentException.class,
            () -> BenchMain.parse(args("--target http://h:1 --model m --rate 1 --gateway-metrics http://h:2,http://h:2/")))
            .getMessage().contains("--gateway-metrics lists a gateway twice"));
    }

    @Test
    void engineMetricsMixedLengthsAndConversationUsers() {
        BenchConfig c = BenchMain.parse(args("--target http://h:1 --model m --rate 1 --workload random"
            + " --random-distribution log-uniform --random-min-tokens 50 --random-max-tokens 50000"
            + " --engine-metrics http://127.0.0.1:9001/,http://127.0.0.1:9002 --engine-metrics=http://127.0.0.1:9003"));
        assertEquals(BenchConfig.Distribution.LOG_UNIFORM, c.randomDistribution());
        assertEquals(java.util.List.of("http://127.0.0.1:9001", "http://127.0.0.1:9002", "http://127.0.0.1:9003"), c.engineMetrics());
        assertTrue(BenchMain.parse(args("--target http://h:1 --model m --rate 1 --workload multi-turn --conversation-user"))
            .conversationUser());
        assertEquals(BenchConfig.Distribution.UNIFORM, BenchMain.parse(args("--target http://h:1 --model m --rate 1")).randomDistribution());
        assertEquals("--conversation-user needs --workload multi-turn (only its requests belong to conversations)",
            assertThrows(IllegalArgumentException.class,
                () -> BenchMain.parse(args("--target http://h:1 --model m --rate 1 --conversation-user"))).getMessage());
        assertEquals("--random-distribution log-uniform needs --workload random", assertThrows(IllegalArgumentException.class,
            () -> BenchMain.parse(args("--target http://h:1 --model m --rate 1 --random-distribution log-uniform"))).getMessage());
        assertTrue(assertThrows(IllegalArgumentException.class,
            () -> BenchMain.parse(args("--target http://h:1 --model m --rate 1 --workload random --random-distribution normal")))
            .getMessage().contains("--random-distribution=normal must be one of uniform|log-uniform"));
        assertEquals("--engine-metrics 'https://h:1' must be http://host:port (an engine's base URL; /metrics is appended)",
            assertThrows(IllegalArgumentException.class,
                () -> BenchMain.parse(args("--target http://h:1 --model m --rate 1 --engine-metrics https://h:1"))).getMessage());
        assertTrue(assertThrows(IllegalArgumentException.class,
            () -> BenchMain.parse(args("--target http://h:1 --model m --rate 1 --engine-metrics http://h"))).getMessage()
            .contains("must be http://host:port"));
        assertTrue(assertThrows(IllegalArgumentException.class,
            () -> BenchMain.parse(args("--target http://h:1 --model m --rate 1 --engine-metrics http://h:2,http://h:2/")))
            .getMessage().contains("--engine-metrics lists an engine twice"));
    }

    @Test
    void helpAndUsageExitCodes() {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
        PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8);
        assertEquals(0, BenchMain.run(new String[] {"--help"}, o, e));
        String help = out.toString(StandardCharsets.UTF_8);
        for (String flag : new String[] {"--target", "--rate", "--arrival", "--stream", "--concurrency-limit", "--closed-loop",
            "--compare", "--warmup", "--header", "--api-key", "--token-ids", "--payload-bytes", "--groups", "--turns", "--out",
            "--engine-metrics", "--random-distribution", "--conversation-user"}) {
            assertTrue(help.contains(flag), flag);
        }
        assertEquals(2, BenchMain.run(new String[] {"--model"}, o, e));
        assertTrue(err.toString(StandardCharsets.UTF_8).contains("--model needs a value"));
    }
}
