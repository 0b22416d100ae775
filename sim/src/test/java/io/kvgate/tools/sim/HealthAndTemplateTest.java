package io.kvgate.tools.sim;

import static io.kvgate.tools.sim.SimHttp.get;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** Health probe semantics per engine (review #29) and the chat-template switch when tools are present (#32). */
@Timeout(60)
@Tag("system")
class HealthAndTemplateTest {

    @Test
    void vllmHealthReportsADeadEngineCore() throws Exception {
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.VLLM))) {
            assertEquals(200, get(sim, "/health").statusCode());
            sim.injectFaults("{\"unhealthy\":true}");
            assertEquals(503, get(sim, "/health").statusCode());
            assertEquals(404, get(sim, "/health_generate").statusCode(), "SGLang-only route");
        }
    }

    @Test
    void sglangShallowHealthStays200WhileTheDeepProbeTimesOut() throws Exception {
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).healthTimeoutMs(50))) {
            assertEquals(200, get(sim, "/health_generate").statusCode());
            sim.injectFaults("{\"unhealthy\":true}");
            assertEquals(200, get(sim, "/health").statusCode(), "/health never touches the scheduler");
            assertEquals(503, get(sim, "/health_generate").statusCode(), "no output before HEALTH_CHECK_TIMEOUT");
            assertEquals(1, sim.stats().get("health_generate_timeouts"));
        }
        try (EngineSimulator deep = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).healthTimeoutMs(50)
            .sglangHealthGenerates(true))) {
            deep.injectFaults("{\"unhealthy\":true}");
            assertEquals(503, get(deep, "/health").statusCode(), "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION");
        }
    }

    @Test
    void sglangDeepProbeQueuesBehindLiveTraffic() throws Exception {
        // one slot, busy with a slow stream: /health_generate answers only once that generation finishes
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).maxConcurrency(1).itlMs(50))) {
            CompletableFuture<HttpResponse<String>> busy = SimHttp.CLIENT.sendAsync(HttpRequest.newBuilder(
                    URI.create(sim.baseUrl() + "/v1/completions")).timeout(Duration.ofSeconds(20))
                .header("content-type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString("{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":20}")).build(),
                HttpResponse.BodyHandlers.ofString());
            MetricsTest.awaitMetric(sim, "sglang:num_running_reqs", "1.0", false);
            HttpResponse<String> probe = get(sim, "/health_generate");
            assertEquals(200, probe.statusCode());
            assertEquals(1, sim.stats().get("health_generate_queued"), "no free slot: the probe waited");
            // the engine counts the finished generation before it answers the waiting probe
            assertEquals(1, sim.stats().get("generations_finished"), "answered only after the generation finished");
            assertEquals(200, busy.get().statusCode());
        }
    }

    @Test
    void toolsSwitchTheTemplatePerEngine(@TempDir Path dir) throws Exception {
        Files.copy(Path.of("/work/shared/models/qwen3/tokenizer.json"), dir.resolve("tokenizer.json"));
        ObjectNode config = (ObjectNode) SimHttp.MAPPER.readTree(
            Path.of("/work/shared/models/qwen3/tokenizer_config.json").toFile());
        ArrayNode named = config.putArray("chat_template");
        named.addObject().put("name", "default").put("template", "DEFAULT {{ messages[0]['content'] }}");
        named.addObject().put("name", "tool_use").put("template", "TOOLS {{ messages[0]['content'] }}");
        Files.writeString(dir.resolve("tokenizer_config.json"), SimHttp.MAPPER.writeValueAsString(config));
        Files.writeString(dir.resolve("chat_template.json"), "{\"chat_template\":\"PROCESSOR {{ messages[0]['content'] }}\"}");

        JsonNode plain = SimHttp.MAPPER.readTree("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
        JsonNode tools = SimHttp.MAPPER.readTree("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
            + "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{}}}]}");
        for (Dialect d : new Dialect[] {Dialect.VLLM, Dialect.SGLANG}) {
            ModelDirTokenizer text = new ModelDirTokenizer(dir, d);
            assertEquals("DEFAULT hi", text.renderChatText(plain), d + ": a text model has no processor: chat_template.json unread");
            assertEquals("TOOLS hi", text.renderChatText(tools), d + ": transformers picks tool_use when tools are passed");
        }
        // A multimodal checkpoint: AutoProcessor finds a processor class, whose template is chat_template.json.
        Files.writeString(dir.resolve("preprocessor_config.json"), "{\"processor_class\":\"Qwen2VLProcessor\"}");
        ModelDirTokenizer vllm = new ModelDirTokenizer(dir, Dialect.VLLM);
        assertEquals("PROCESSOR hi", vllm.renderChatText(plain), "vLLM: the processor template first");
        assertEquals("TOOLS hi", vllm.renderChatText(tools), "vLLM skips the processor template when tools are sent");
        ModelDirTokenizer sglang = new ModelDirTokenizer(dir, Dialect.SGLANG);
        assertEquals("PROCESSOR hi", sglang.renderChatText(plain), "SGLang replaces the tokenizer's template with the processor's");
        assertEquals("PROCESSOR hi", sglang.renderChatText(tools), "... for requests with tools too (one string: no switch)");
        assertFalse(vllm.encodeChat(plain).length == vllm.encodeChat(tools).length
            && java.util.Arrays.equals(vllm.encodeChat(plain), vllm.encodeChat(tools)), "different prompt tokens");
    }

    /** {@code --chat-template}: first for both engines; SGLang loads a .jinja file its own way. */
    @Test
    void theChatTemplateFlagComesFirst(@TempDir Path dir) throws Exception {
        Files.copy(Path.of("/work/shared/models/qwen3/tokenizer.json"), dir.resolve("tokenizer.json"));
        Files.copy(Path.of("/work/shared/models/qwen3/tokenizer_config.json"), dir.resolve("tokenizer_config.json"));
        Path flag = dir.resolve("flag.jinja");
        Files.writeString(flag, "\n\nFLAG {{ messages[0]['content'] }}\\nend\n");
        JsonNode tools = SimHttp.MAPPER.readTree("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
            + "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{}}}]}");
        assertEquals("\n\nFLAG hi\\nend", new ModelDirTokenizer(dir, Dialect.VLLM, flag).renderChatText(tools),
            "vLLM renders the file as read (Jinja drops the one trailing newline)");
        assertEquals("FLAG hi\nend", new ModelDirTokenizer(dir, Dialect.SGLANG, flag).renderChatText(tools),
            "SGLang strips the newlines at both ends and turns a literal backslash-n into a newline");
        IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
            () -> SimHttp.fast(Dialect.SGLANG).modelDir(dir).chatTemplate(dir.resolve("tokenizer_config.json")).validate());
        org.junit.jupiter.api.Assertions.assertTrue(e.getMessage().contains("SGLang reads a file not ending in .jinja"), e.getMessage());
    }
}
