package io.kvgate.dataplane.request;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.RuleConfig.Engine;
import io.kvgate.dataplane.engine.EngineProfiles;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * The edits that put a request in its engine's dialect (review rows 5, 11, 13): the temperature floor on SGLang, the
 * stop-string switch respelled per engine, an empty logit_bias sent to SGLang as null; every body split at every
 * byte, every other byte the client's.
 */
class EngineDialectTest {
    /** The body {@code engine} gets for {@code body}, the same for every split; the unchanged body when nothing is planned. */
    private static String forEngine(Engine engine, String body) {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        String first = null;
        for (int split = 0; split <= b.length; split++) {
            RequestFields f = new RequestFields();
            RequestFieldExtractor x = new RequestFieldExtractor(f);
            x.feed(ByteBuffer.wrap(b, 0, split));
            x.feed(ByteBuffer.wrap(b, split, b.length - split));
            assertEquals(RequestFieldExtractor.Result.OK, x.finish());
            RequestEdits edits = new RequestEdits();
            ByteBuf in = Unpooled.copiedBuffer(b);
            boolean planned = EngineDialect.plan(f, EngineProfiles.of(engine), in, edits);
            assertEquals(planned, !edits.isEmpty());
            ByteBuf out = planned ? edits.apply(in, f, ByteBufAllocator.DEFAULT) : in;
            String s = out.toString(StandardCharsets.UTF_8);
            out.release();
            if (first == null) {
                first = s;
            } else {
                assertEquals(first, s, "split at " + split);
            }
        }
        return first;
    }

    @Test
    void sglangGetsVllmsTemperatureFloor() {
        assertEquals("{\"model\":\"m\",\"temperature\":0.01,\"n\":2}",
            forEngine(Engine.SGLANG, "{\"model\":\"m\",\"temperature\":0.000005,\"n\":2}"));
        assertEquals("{\"temperature\" : 0.01 }", forEngine(Engine.SGLANG, "{\"temperature\" : 5e-3 }"));
        // the last occurrence is the one the engine reads, so it is the one raised
        assertEquals("{\"temperature\":0.5,\"temperature\":0.01}",
            forEngine(Engine.SGLANG, "{\"temperature\":0.5,\"temperature\":0.001}"));
        for (String t : new String[] {"0", "0.0", "0.01", "0.7", "2", "null", "\"0.001\"", "-0.001"}) {
            String body = "{\"temperature\":" + t + "}";
            assertEquals(body, forEngine(Engine.SGLANG, body), "left for the engine: " + t);
        }
        assertEquals("{\"temperature\":0.000005}", forEngine(Engine.VLLM, "{\"temperature\":0.000005}"),
            "vLLM raises it itself");
    }

    @Test
    void theStopSwitchIsSpelledInTheEnginesDialect() {
        assertEquals("{\"model\":\"m\",\"no_stop_trim\":true,\"stop\":[\"x\"]}",
            forEngine(Engine.SGLANG, "{\"model\":\"m\",\"include_stop_str_in_output\":true,\"stop\":[\"x\"]}"));
        assertEquals("{\"include_stop_str_in_output\" :false}", forEngine(Engine.VLLM, "{\"no_stop_trim\" :false}"));
        assertEquals("{\"include_stop_str_in_output\":true}", forEngine(Engine.TRTLLM, "{\"no_stop_trim\":true}"));
        // the engine's own spelling is left as it is, and so is a body that has both (the engine reads its own)
        for (Engine e : new Engine[] {Engine.VLLM, Engine.SGLANG}) {
            String both = "{\"no_stop_trim\":true,\"include_stop_str_in_output\":true}";
            assertEquals(both, forEngine(e, both));
        }
        assertEquals("{\"no_stop_trim\":true}", forEngine(Engine.SGLANG, "{\"no_stop_trim\":true}"));
        assertEquals("{\"include_stop_str_in_output\":true}", forEngine(Engine.VLLM, "{\"include_stop_str_in_output\":true}"));
        assertEquals("{\"no_stop_trim\":true}", forEngine(Engine.LLAMACPP, "{\"no_stop_trim\":true}"), "llama-server has neither");
        // the last occurrence is renamed; an earlier one stays under a name the engine ignores
        assertEquals("{\"include_stop_str_in_output\":false,\"no_stop_trim\":true}",
            forEngine(Engine.SGLANG, "{\"include_stop_str_in_output\":false,\"include_stop_str_in_output\":true}"));
        // an escaped name is still one name
        assertEquals("{\"no_stop_trim\":true,\"a\":1}",
            forEngine(Engine.SGLANG, "{\"include_stop_str_in\\u005foutput\":true,\"a\":1}"));
        // whatever the value, it is kept byte for byte: the engine judges it
        assertEquals("{\"no_stop_trim\":\"yes\"}", forEngine(Engine.SGLANG, "{\"include_stop_str_in_output\":\"yes\"}"));
    }

    @Test
    void anEmptyLogitBiasGoesToSglangAsNull() {
        assertEquals("{\"logit_bias\":null,\"n\":1}", forEngine(Engine.SGLANG, "{\"logit_bias\":{ },\"n\":1}"));
        assertEquals("{\"logit_bias\":{}}", forEngine(Engine.VLLM, "{\"logit_bias\":{}}"), "vLLM's lists cost nothing");
        assertEquals("{\"logit_bias\":{\"1\":2}}", forEngine(Engine.SGLANG, "{\"logit_bias\":{\"1\":2}}"));
    }

    @Test
    void dialectEditsComposeWithTheAnswerRewritesEditsAndEngineFieldRemoval() {
        String body = "{\"kv_transfer_params\":{\"a\":1},\"model\":\"m\",\"temperature\":0.001,"
            + "\"include_stop_str_in_output\":true,\"n\":3,\"bootstrap_room\":7}";
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        RequestFields f = new RequestFields();
        RequestFieldExtractor x = new RequestFieldExtractor(f);
        x.feed(ByteBuffer.wrap(b));
        assertEquals(RequestFieldExtractor.Result.OK, x.finish());
        ByteBuf in = Unpooled.copiedBuffer(b);
        EngineFieldStripper.strip(in, f); // the front door strips before the prompt stage
        RequestEdits edits = new RequestEdits();
        assertTrue(EngineDialect.plan(f, EngineProfiles.of(Engine.SGLANG), in, edits));
        edits.set(RequestFields.Member.N, "1");
        ByteBuf out = edits.apply(in, f, ByteBufAllocator.DEFAULT);
        assertEquals("{\"model\":\"m\",\"temperature\":0.01,\"no_stop_trim\":true,\"n\":1}", out.toString(StandardCharsets.UTF_8));
        out.release();
        edits.reset();
        assertTrue(edits.isEmpty());
        assertFalse(EngineDialect.plan(f, EngineProfiles.of(Engine.VLLM), Unpooled.EMPTY_BUFFER, edits));
    }
}
