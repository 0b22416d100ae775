package io.kvgate.dataplane.prompt;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.exchange.RequestContext;
import io.kvgate.dataplane.metrics.GatewayMetrics;
import io.kvgate.dataplane.request.FrontRoute;
import io.kvgate.dataplane.request.Problem;
import io.kvgate.dataplane.request.PromptIds;
import io.kvgate.dataplane.request.Refusal;
import io.kvgate.dataplane.request.RequestFieldExtractor;
import io.kvgate.dataplane.request.RequestFields;
import io.kvgate.dataplane.request.RequestValidator;
import io.kvgate.dataplane.request.RoutingInputs;
import io.kvgate.dataplane.route.EndpointRegistry;
import io.kvgate.dataplane.route.RouteTable;
import io.kvgate.dataplane.route.Rule;
import io.kvgate.dataplane.route.RulePolicies;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.BlockIndexConfig;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.handler.codec.http.DefaultHttpRequest;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpVersion;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The prompt stage reads a token-id prompt from the ids the body stage kept ({@link PromptIds}) and must reach the
 * verdict its tree reading reaches on the same body: each body below runs through the stage twice, once with the ids
 * kept and once with none kept (which forces the tree reading), and the two outcomes are compared — the tokens routed
 * on, the salt, the refusal and the body as forwarded (a lowered budget is written into it).
 */
class PromptStageTokenIdsTest {
    private static final ManualClock CLOCK = new ManualClock();
    private static BlockIndex index;
    private static GatewayConfig config;
    private static RouteTable table;

    @BeforeAll
    static void build() throws Exception {
        index = new BlockIndex(new BlockIndexConfig(4096, 8, 2, 8192, 1024));
        String ep = "      - url: http://127.0.0.1:20000\n        kv_events: tcp://127.0.0.1:20001\n";
        GatewayConfig cfg = config = GatewayConfig.parse("""
            listen: 127.0.0.1:18080
            admin_listen: 127.0.0.1:18081
            rules:
              - name: kv
                models: [kv]
                engine: vllm
                policy: kv_exact
                block_size: 4
                endpoints:
            """ + ep + """
              - name: ctx
                models: [ctx]
                engine: vllm
                policy: kv_exact
                block_size: 4
                max_model_len: 12
                endpoints:
            """ + ep + """
              - name: rr
                models: [rr]
                engine: vllm
                endpoints:
                  - url: http://127.0.0.1:20002
            """);
        table = RouteTable.build(cfg, new EndpointRegistry(), ctx -> RulePolicies.create(ctx, index, CLOCK));
    }

    @AfterAll
    static void close() {
        index.close();
    }

    /** Prompts as JSON text: every shape the body stage captures, and the ones next to them that it does not. */
    private static final String[] PROMPTS = {
        "[1,2,3]", "[0]", "[-0]", "[2147483647]", "[2147483648]", "[1,-1]", "[1,2.5]", "[1,1e2]", "[1,\"a\"]",
        "[1,[2]]", "[1,{\"a\":1}]", "[1,null]", "[1,true]", "[[1,2],[3]]", "[[1,2,3,4,5,6,7,8,9]]", "[[]]", "[[1],[]]",
        "[[1],[-2]]", "[[1],[[2]]]", "[[1,[2]]]", "[[1],\"a\"]", "[[1],3]", "[[1,2.0]]", "[[1],{\"a\":[1]}]",
        "[[1,2,3,4,5,6,7,8,9,10,11,12,13]]", "[[1],[1,2,3,4,5,6,7,8,9,10,11,12,13]]", "[1,2,3,4,5,6,7,8,9,10,11,12,13]",
        "[99999999999]", "[12345678901234567890]", "[]", "\"text\"", "[\"a\",1]", "{\"a\":[1,2]}", "7", "null",
    };

    /** Bodies around each prompt: alone, with a salt (string or not), a budget, a duplicate prompt. */
    private static List<String> bodies(String model) {
        List<String> out = new ArrayList<>();
        for (String p : PROMPTS) {
            String m = "{\"model\":\"" + model + "\",";
            out.add(m + "\"prompt\":" + p + "}");
            out.add(m + "\"prompt\":" + p + ",\"cache_salt\":\"s1\",\"max_tokens\":5}");
            out.add(m + "\"cache_salt\":\"s1\",\"prompt\":" + p + ",\"cache_salt\":7}");
            out.add(m + "\"cache_salt\":\"s\\u00e9\",\"prompt\":" + p + ",\"max_tokens\":2}");
            out.add(m + "\"prompt\":[9,9,9],\"prompt\":" + p + "}");
            out.add(m + "\"prompt\":" + p + ",\"prompt\":[4,5]}");
        }
        return out;
    }

    /** One pass through the stage: the refusal (null: accepted), the inputs it wrote (null when refused), the body. */
    private record Run(RequestFields fields, Refusal refusal, RoutingInputs inputs, String bodyAfter) {}

    private static Run run(String json, int idsKept) {
        Rule rule = table.ruleForModel(json.substring(10, json.indexOf('"', 10)));
        RequestContext rc = new RequestContext();
        rc.begin(new DefaultHttpRequest(HttpVersion.HTTP_1_1, HttpMethod.POST, "/v1/completions"), config, table, 0, null);
        rc.route(FrontRoute.COMPLETIONS, "/v1/completions");
        RequestFields fields = rc.fields();
        RequestFieldExtractor x = new RequestFieldExtractor(fields).promptIdsKept(idsKept);
        ByteBuf body = Unpooled.copiedBuffer(json, StandardCharsets.UTF_8);
        x.body(body);
        Problem p = RequestValidator.validate(x, fields, false);
        if (p == null) {
            p = RequestValidator.withinRule(fields, false, rule.name(), rule.config().maxN(), rule.config().maxPromptTokens());
        }
        if (p != null) {
            body.release();
            return new Run(fields, Refusal.of(p), null, null);
        }
        rc.rule(rule, null);
        rc.body(body);
        Refusal r = PromptStage.run(rc, new GatewayMetrics(), CLOCK);
        ByteBuf after = rc.body();
        String text = after.toString(StandardCharsets.UTF_8);
        after.release();
        return new Run(fields, r, r == null ? rc.inputs() : null, text);
    }

    /** Refusals compare by what the client sees and what is counted. */
    private static String answer(Refusal r) {
        return r == null ? null : r + " param=" + r.param() + " code=" + r.code() + " close=" + r.closes();
    }

    @Test
    void theKeptIdsGiveTheVerdictOfTheTreeReadingForEveryShape() {
        int captured = 0;
        int invalid = 0;
        for (String model : new String[] {"kv", "ctx"}) {
            for (String json : bodies(model)) {
                Run kept = run(json, table.promptIdsKept());
                Run tree = run(json, 0);
                assertEquals(PromptIds.NONE, tree.fields().promptIds.shape(), "nothing is kept with a limit of 0");
                if (kept.fields().promptIds.shape() != PromptIds.NONE) {
                    captured++;
                    invalid += kept.fields().promptIds.firstValid() ? 0 : 1;
                }
                assertEquals(answer(tree.refusal()), answer(kept.refusal()), json);
                assertEquals(tree.bodyAfter(), kept.bodyAfter(), json);
                RoutingInputs ia = kept.inputs();
                RoutingInputs ib = tree.inputs();
                assertEquals(ib == null, ia == null, json);
                if (ia != null) {
                    assertArrayEquals(ib.promptTokens(), ia.promptTokens(), json);
                    assertEquals(ib.cacheSalt(), ia.cacheSalt(), json);
                    assertEquals(ib.sessionKey(), ia.sessionKey(), json);
                }
            }
        }
        assertTrue(captured > 60, "most token-id shapes are read from the kept ids: " + captured);
        assertTrue(invalid > 20, "invalid first prompts are among them: " + invalid);
    }

    @Test
    void theTableKeepsTheMostIdsAnyOfItsRulesRoutesOn() {
        assertEquals(BlockIndexConfig.DEFAULT_MAX_PROMPT_BLOCKS * 4, table.promptIdsKept());
        assertEquals(BlockIndexConfig.DEFAULT_MAX_PROMPT_BLOCKS * 4, RulePolicies.promptTokensRoutedOn(table.ruleForModel("kv").config()));
        assertEquals(0, RulePolicies.promptTokensRoutedOn(table.ruleForModel("rr").config()), "round robin reads no prompt");
    }

    @Test
    void aPromptLongerThanTheLimitIsReadFromTheTreeAndRoutedOnTheSameTokens() {
        // 8 ids kept of a 13-id prompt: the rule routes on more than were kept, so the stage cannot use them.
        String json = "{\"model\":\"kv\",\"prompt\":[1,2,3,4,5,6,7,8,9,10,11,12,13]}";
        Run short8 = run(json, 8);
        assertTrue(!short8.fields().promptIds.keeps(RulePolicies.promptTokensRoutedOn(table.ruleForModel("kv").config())));
        assertArrayEquals(new int[] {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, short8.inputs().promptTokens());
        assertNotEquals(0, run(json, table.promptIdsKept()).inputs().promptTokens().length);
    }
}
