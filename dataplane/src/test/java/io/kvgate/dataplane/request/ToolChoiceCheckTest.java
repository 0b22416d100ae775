package io.kvgate.dataplane.request;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.config.RuleConfig;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** {@code tool_call_parser: none}: which requests get vLLM's 400 (review row 18), read from the body as it streams. */
class ToolChoiceCheckTest {
    private static final String TOOL = "{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}";

    private static RuleConfig rule(String keys) throws Exception {
        return GatewayConfig.parse("rules:\n  - name: r\n    models: [m]\n    engine: sglang\n" + keys
            + "    endpoints: [{url: \"http://127.0.0.1:9001\"}]\n").rules().get(0);
    }

    /** The fields of {@code body}, fed one byte at a time (every token split across chunks). */
    private static RequestFields fields(String body) {
        RequestFields f = new RequestFields();
        RequestFieldExtractor x = new RequestFieldExtractor(f);
        for (byte b : body.getBytes(StandardCharsets.UTF_8)) {
            x.feed(ByteBuffer.wrap(new byte[] {b}));
        }
        assertEquals(RequestFieldExtractor.Result.OK, x.finish(), x.error());
        return f;
    }

    private static Problem check(String members, RuleConfig rule) {
        return ToolChoiceCheck.problem(fields("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
            + members + "}"), rule);
    }

    @Test
    void autoExplicitOrImpliedByToolsIsRefusedWithVllmsWords() throws Exception {
        RuleConfig none = rule("    tool_call_parser: none\n");
        for (String m : new String[] {",\"tools\":[" + TOOL + "]", ",\"tools\":[" + TOOL + "],\"tool_choice\":\"auto\"",
            ",\"tool_choice\":\"auto\",\"tools\":[" + TOOL + "," + TOOL + "]",
            ",\"tool_choice\":\"none\",\"tools\":[" + TOOL + "],\"tool_choice\":\"auto\""}) {
            Problem p = check(m, none);
            assertEquals(new Problem("tool_choice", "tool_call_parser",
                "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set", "invalid_value"), p, m);
        }
    }

    @Test
    void choicesThatNeedNoParserAndEmptyToolsPass() throws Exception {
        RuleConfig none = rule("    tool_call_parser: none\n");
        for (String m : new String[] {"", ",\"tools\":[" + TOOL + "],\"tool_choice\":\"none\"",
            ",\"tools\":[" + TOOL + "],\"tool_choice\":\"required\"",
            ",\"tools\":[" + TOOL + "],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}}",
            ",\"tools\":[" + TOOL + "],\"tool_choice\":null", ",\"tools\":[],\"tool_choice\":\"auto\"",
            ",\"tools\":null,\"tool_choice\":\"auto\"", ",\"tools\":[" + TOOL + "],\"tools\":[]",
            ",\"tool_choice\":\"auto\""}) {
            assertNull(check(m, none), m);
        }
    }

    @Test
    void rulesThatDoNotSayNoneAreNotChecked() throws Exception {
        String auto = ",\"tools\":[" + TOOL + "],\"tool_choice\":\"auto\"";
        assertNull(check(auto, rule("")));
        assertNull(check(auto, rule("    tool_call_parser: hermes\n")));
    }
}
