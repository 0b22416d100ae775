package io.kvgate.tools.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.ChatTemplateFile;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.dataplane.config.ReloadOutcome;
import io.kvgate.testkit.Await;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue #13 items 4 and 6 through one gateway over both engines' simulators: LoRA adapters in each engine's request
 * form with the same answer for the client, adapters discovered from vLLM's {@code /v1/models}, the
 * {@code X-Kvgate-Warning} for chat_template_kwargs the template does not declare, and a per-rule
 * {@code chat_template} rendered (and hashed) as the engine launched with the same {@code --chat-template} renders it.
 */
@Tag("system")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class LoraTemplateContractSystemTest {
    /** Bound of the waits for real engines and gateways (never a timeout under test). */
    private static final Duration WAIT = Duration.ofSeconds(20);
    private static final String ADMIN = "lora-template-admin-token";
    /** Leading newlines and a literal backslash-n: SGLang loads the file differently from vLLM. */
    private static final String TEMPLATE = "\n{% for m in messages %}[{{ m.role }}]{{ m.content }}\\n{% endfor %}"
        + "{% if add_generation_prompt %}[assistant]{% endif %}\n";
    private final List<EngineSimulator> sims = new ArrayList<>();
    private EngineSimulator vllm;
    private EngineSimulator sglang;
    private EngineSimulator vllmTemplated;
    private EngineSimulator sglangTemplated;
    private EngineSimulator listing;
    private EngineSimulator notListing;
    @TempDir
    static Path dir;
    private Path configFile;
    private Gateway gw;

    private EngineSimulator sim(SimulatorConfig c) throws Exception {
        EngineSimulator s = EngineSimulator.start(c);
        sims.add(s);
        return s;
    }

    @BeforeAll
    void start() throws Exception {
        Path qwen = Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize().resolve("deploy/models/qwen3");
        Path template = dir.resolve("t.jinja");
        Files.writeString(template, TEMPLATE);
        vllm = sim(SimHttp.fast(Dialect.VLLM).model("mv").modelDir(qwen).lora("v-lora"));
        sglang = sim(SimHttp.fast(Dialect.SGLANG).model("ms").modelDir(qwen).lora("s-lora"));
        vllmTemplated = sim(SimHttp.fast(Dialect.VLLM).model("mvt").modelDir(qwen).chatTemplate(template));
        sglangTemplated = sim(SimHttp.fast(Dialect.SGLANG).model("mst").modelDir(qwen).chatTemplate(template));
        listing = sim(SimHttp.fast(Dialect.VLLM).model("md").lora("found-lora"));
        notListing = sim(SimHttp.fast(Dialect.VLLM).model("md"));
        configFile = dir.resolve("kvgate.yaml");
        Files.writeString(configFile, """
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            admin_token: %s
            upstream: {connect_timeout_ms: 1000, first_byte_timeout_ms: 5000}
            health: {interval_ms: 200, unhealthy_threshold: 3, timeout_ms: 5000}
            rules:
              - name: v
                models: [{name: mv, adapters: [v-lora]}]
                engine: vllm
                tokenizer: %s
                endpoints: [{url: "%s"}]
              - name: s
                models: [{name: ms, adapters: [s-lora]}]
                engine: sglang
                tokenizer: %s
                block_size: 16
                endpoints: [{url: "%s"}]
              - name: vt
                models: [mvt]
                engine: vllm
                tokenizer: %s
                chat_template: t.jinja
                endpoints: [{url: "%s"}]
              - name: st
                models: [mst]
                engine: sglang
                tokenizer: %s
                chat_template: t.jinja
                block_size: 16
                endpoints: [{url: "%s"}]
              - name: disc
                models: [md]
                engine: vllm
                endpoints: [{url: "%s"}, {url: "%s"}]
            """.formatted(ADMIN, qwen, vllm.baseUrl(), qwen, sglang.baseUrl(), qwen, vllmTemplated.baseUrl(), qwen,
            sglangTemplated.baseUrl(), listing.baseUrl(), notListing.baseUrl()));
        gw = Gateway.start(new Gateway.Options(GatewayConfig.load(configFile), NanoClock.SYSTEM, configFile, null));
    }

    @AfterAll
    void stop() {
        if (gw != null) {
            gw.close(100);
        }
        sims.forEach(EngineSimulator::close);
    }

    private HttpResponse<String> post(String path, String body) throws Exception {
        return SimHttp.CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + path))
            .timeout(Duration.ofSeconds(20)).header("content-type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    }

    private HttpResponse<String> get(String path) throws Exception {
        return SimHttp.CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + path))
            .timeout(Duration.ofSeconds(20)).build(), HttpResponse.BodyHandlers.ofString());
    }

    private JsonNode rules() throws Exception {
        return SimHttp.MAPPER.readTree(SimHttp.CLIENT.send(HttpRequest.newBuilder(
                URI.create("http://127.0.0.1:" + gw.adminPort() + "/control/v1/rules")).header("authorization", "Bearer " + ADMIN)
            .timeout(Duration.ofSeconds(20)).build(), HttpResponse.BodyHandlers.ofString()).body());
    }

    private JsonNode rule(String name) throws Exception {
        for (JsonNode r : rules().path("rules")) {
            if (r.path("name").asText().equals(name)) {
                return r;
            }
        }
        throw new AssertionError("no rule " + name);
    }

    private static final String QUESTION = "Which parcels are late?";
    /** Long enough for full 16-token blocks. */
    private static final String LONG = "Which parcels from the northern depot are late this week, and why? ".repeat(4).strip();

    private static String chatBody(String model, String extra) {
        return chatBody(model, QUESTION, extra);
    }

    private static String chatBody(String model, String content, String extra) {
        return "{\"model\":\"" + model + "\",\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"" + content
            + "\"}]" + extra + "}";
    }

    private static String lastLora(EngineSimulator s) {
        JsonNode recent = s.stats().toJson().get("recent");
        return recent.get(recent.size() - 1).path("lora").asText(null);
    }

    // ---- LoRA: each engine's request form, one answer --------------------------------------------------------

    @Test
    void anAdapterRequestReachesEachEngineInItsFormAndTheClientSeesTheSameAnswer() throws Exception {
        HttpResponse<String> v = post("/v1/chat/completions", chatBody("v-lora", ""));
        HttpResponse<String> s = post("/v1/chat/completions", chatBody("s-lora", ""));
        assertEquals(200, v.statusCode(), v.body());
        assertEquals(200, s.statusCode(), s.body());
        assertEquals("v-lora", lastLora(vllm), "vLLM ran the adapter named as model");
        assertEquals("s-lora", lastLora(sglang), "SGLang ran the adapter: model unchanged, lora_path added");
        JsonNode vj = SimHttp.MAPPER.readTree(v.body());
        JsonNode sj = SimHttp.MAPPER.readTree(s.body());
        assertEquals("v-lora", vj.path("model").asText());
        assertEquals("s-lora", sj.path("model").asText(), "the adapter name comes back, as from vLLM");
        // The OpenAI fields are the same (each engine adds its own extensions: stop_reason, matched_stop...).
        assertEquals(vj.path("object").asText(), sj.path("object").asText());
        for (String f : new String[] {"/choices/0/index", "/choices/0/message/role", "/choices/0/message/content",
            "/choices/0/finish_reason", "/usage/prompt_tokens", "/usage/completion_tokens", "/usage/total_tokens"}) {
            assertFalse(vj.at(f).isMissingNode(), f + ": " + v.body());
            assertEquals(vj.at(f), sj.at(f), f + "\n" + v.body() + "\n" + s.body());
        }

        for (String[] c : new String[][] {{"v-lora", "vllm"}, {"s-lora", "sglang"}}) {
            HttpResponse<String> stream = post("/v1/chat/completions", chatBody(c[0], ",\"stream\":true"));
            assertEquals(200, stream.statusCode(), stream.body());
            int events = 0;
            for (String line : stream.body().split("\n")) {
                if (line.startsWith("data: {")) {
                    assertEquals(c[0], SimHttp.MAPPER.readTree(line.substring(6)).path("model").asText(), c[1] + ": " + line);
                    events++;
                }
            }
            assertTrue(events > 1, stream.body());
        }
        assertEquals("s-lora", lastLora(sglang));

        HttpResponse<String> base = post("/v1/chat/completions", chatBody("ms", ",\"lora_path\":\"s-lora\""));
        assertEquals(200, base.statusCode(), base.body());
        assertNull(lastLora(sglang), "a base-model request runs the base model even when the client names a lora_path");
        assertEquals("ms", SimHttp.MAPPER.readTree(base.body()).path("model").asText());
    }

    // ---- LoRA: adapters discovered from vLLM's /v1/models ----------------------------------------------------

    @Test
    void aDiscoveredAdapterGoesOnlyToTheEndpointListingIt() throws Exception {
        Await.until(WAIT, "the model probe discovered found-lora", () -> {
            try {
                return get("/v1/models/found-lora").statusCode() == 200;
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        JsonNode discovered = rule("disc").path("adapters").path("discovered");
        assertEquals("[\"" + listing.baseUrl() + "\"]", discovered.path("found-lora").toString(), rule("disc").toString());
        long listingBefore = listing.stats().get("generations_started");
        long otherBefore = notListing.stats().get("generations_started");
        for (int i = 0; i < 6; i++) {
            HttpResponse<String> r = post("/v1/completions", "{\"model\":\"found-lora\",\"prompt\":\"hello " + i + "\",\"max_tokens\":2}");
            assertEquals(200, r.statusCode(), r.body());
            assertEquals("found-lora", SimHttp.MAPPER.readTree(r.body()).path("model").asText());
        }
        assertEquals(6, listing.stats().get("generations_started") - listingBefore, "every adapter request on the listing engine");
        assertEquals(otherBefore, notListing.stats().get("generations_started"), "none on the engine without the adapter");
        assertEquals(200, post("/v1/completions", "{\"model\":\"md\",\"prompt\":\"hi\",\"max_tokens\":2}").statusCode(),
            "the base model is served by both");
        otherBefore = notListing.stats().get("generations_started");

        HttpResponse<String> unknown = post("/v1/completions", "{\"model\":\"nope-lora\",\"prompt\":\"hi\",\"max_tokens\":2}");
        assertEquals(404, unknown.statusCode(), unknown.body());
        assertEquals("model_not_found", SimHttp.MAPPER.readTree(unknown.body()).path("error").path("code").asText());

        // The only endpoint serving it goes down: its last listing stands, so the adapter is known but unservable
        // (503, as a model whose endpoints are all down); the base model is still served by the other engine.
        listing.close();
        Await.until(WAIT, "the gateway took the listing engine out", () -> {
            try {
                return post("/v1/completions", "{\"model\":\"found-lora\",\"prompt\":\"hi\",\"max_tokens\":2}").statusCode() == 503;
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        HttpResponse<String> down = post("/v1/completions", "{\"model\":\"found-lora\",\"prompt\":\"hi\",\"max_tokens\":2}");
        assertEquals("no_healthy_endpoint", SimHttp.MAPPER.readTree(down.body()).path("error").path("code").asText(), down.body());
        assertEquals(otherBefore, notListing.stats().get("generations_started"), "still never sent to the other engine");
        assertEquals(200, post("/v1/completions", "{\"model\":\"md\",\"prompt\":\"hi\",\"max_tokens\":2}").statusCode());
    }

    // GET /v1/models names every adapter GET /v1/models/{id} answers, configured and discovered, with its parent
    @Test
    void modelsListsEveryAdapterWithItsBaseModelAsParent() throws Exception {
        Await.until(WAIT, "the model probe discovered found-lora", () -> {
            try {
                return get("/v1/models/found-lora").statusCode() == 200;
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        HttpResponse<String> list = get("/v1/models");
        assertEquals(200, list.statusCode());
        java.util.Map<String, String> parents = new java.util.LinkedHashMap<>();
        for (JsonNode m : SimHttp.MAPPER.readTree(list.body()).path("data")) {
            assertEquals("model", m.path("object").asText(), m.toString());
            parents.put(m.path("id").asText(), m.path("parent").isTextual() ? m.path("parent").asText() : null);
        }
        java.util.Map<String, String> want = new java.util.LinkedHashMap<>();
        want.put("mv", null);
        want.put("v-lora", "mv");
        want.put("ms", null);
        want.put("s-lora", "ms");
        want.put("mvt", null);
        want.put("mst", null);
        want.put("md", null);
        want.put("found-lora", "md"); // discovered: after the configured names
        assertEquals(want, parents, list.body());
        for (String[] a : new String[][] {{"v-lora", "mv"}, {"s-lora", "ms"}, {"found-lora", "md"}}) {
            JsonNode one = SimHttp.MAPPER.readTree(get("/v1/models/" + a[0]).body());
            assertEquals(a[1], one.path("parent").asText(), "models.retrieve says the same: " + one);
        }
        assertFalse(SimHttp.MAPPER.readTree(get("/v1/models/mv").body()).has("parent"), "a base model has none");
    }

    // ---- templates: undeclared chat_template_kwargs ----------------------------------------------------------

    @Test
    void anUndeclaredTemplateKwargIsReportedFromBothRules() throws Exception {
        String kwargs = ",\"chat_template_kwargs\":{\"enable_thinking\":false,\"enable_thinkin\":false}";
        List<String> warnings = new ArrayList<>();
        for (String model : new String[] {"mv", "ms"}) {
            HttpResponse<String> r = post("/v1/chat/completions", chatBody(model, kwargs));
            assertEquals(200, r.statusCode(), r.body());
            String w = r.headers().firstValue("x-kvgate-warning").orElseThrow(() -> new AssertionError(model + ": no warning"));
            assertTrue(w.startsWith("chat_template_kwargs 'enable_thinkin' is not declared by the chat template in use"), w);
            assertFalse(w.contains("'enable_thinking'"), "Qwen3's template reads enable_thinking: " + w);
            warnings.add(w);
            HttpResponse<String> render = post("/kvgate/v1/chat/completions/render", chatBody(model, kwargs));
            assertEquals(w, render.headers().firstValue("x-kvgate-warning").orElse(null), "the render route warns alike");
            HttpResponse<String> declared = post("/v1/chat/completions",
                chatBody(model, ",\"chat_template_kwargs\":{\"enable_thinking\":false}"));
            assertEquals(200, declared.statusCode(), declared.body());
            assertTrue(declared.headers().firstValue("x-kvgate-warning").isEmpty(), model + ": every key declared");
        }
        assertEquals(warnings.get(0), warnings.get(1), "the same template (the tokenizer's) behind both rules");
    }

    // ---- templates: the rule's chat_template -----------------------------------------------------------------

    private JsonNode render(String model) throws Exception {
        HttpResponse<String> r = post("/kvgate/v1/chat/completions/render", chatBody(model, LONG, ""));
        assertEquals(200, r.statusCode(), r.body());
        return SimHttp.MAPPER.readTree(r.body());
    }

    @Test
    void theRulesChatTemplateChangesThePromptAndTheBlockKeysAsTheEngineRendersIt() throws Exception {
        String vllmText = "\n[user]" + LONG + "\\n[assistant]";
        String sglangText = "[user]" + LONG + "\n[assistant]";
        JsonNode vt = render("mvt");
        JsonNode st = render("mst");
        assertEquals(vllmText, vt.path("prompt").asText(), "vLLM renders the file as read");
        assertEquals(sglangText, st.path("prompt").asText(), "SGLang strips the newlines at both ends, \\n is a newline");
        JsonNode plain = render("mv");
        assertNotEquals(plain.path("prompt"), vt.path("prompt"));
        assertNotEquals(plain.path("block_keys"), vt.path("block_keys"), "the override's tokens are hashed");
        assertNotEquals(render("ms").path("block_keys"), st.path("block_keys"));
        assertTrue(vt.path("block_keys").size() >= 3 && st.path("block_keys").size() >= 3, vt + "\n" + st);
        for (String[] c : new String[][] {{"mvt", "vllm"}, {"mst", "sglang"}}) {
            HttpResponse<String> r = post("/v1/chat/completions", chatBody(c[0], LONG, ""));
            assertEquals(200, r.statusCode(), r.body());
            assertEquals(render(c[0]).path("prompt_token_ids").size(),
                SimHttp.MAPPER.readTree(r.body()).path("usage").path("prompt_tokens").asInt(),
                c[1] + ": the engine launched with the same --chat-template sees the tokens the gateway hashed");
        }
        JsonNode ct = rule("vt").path("chat_template");
        assertEquals("chat_template", ct.path("source").asText(), ct.toString());
        assertEquals(ChatTemplateFile.sha256(TEMPLATE), ct.path("sha256").asText());
        assertEquals(ChatTemplateFile.sha256(TEMPLATE.substring(1, TEMPLATE.length() - 1).replace("\\n", "\n")),
            rule("st").path("chat_template").path("sha256").asText(), "SGLang's digest is of the text as SGLang loaded it");
        assertEquals("tokenizer", rule("v").path("chat_template").path("source").asText());

        // The file changes under the same path: a reload re-reads it.
        String next = "{% for m in messages %}<{{ m.content }}>{% endfor %}";
        Files.writeString(dir.resolve("t.jinja"), next);
        ReloadOutcome o = gw.reloadConfigFile();
        assertTrue(o.applied(), o.toString());
        assertTrue(o.changes().stream().anyMatch(ch -> ch.startsWith("rules[name=vt].chat_template.sha256: ")), o.changes().toString());
        assertEquals("<" + LONG + ">", render("mvt").path("prompt").asText());
        assertEquals("<" + LONG + ">", render("mst").path("prompt").asText());
        assertEquals(ChatTemplateFile.sha256(next), rule("vt").path("chat_template").path("sha256").asText());
        Files.writeString(dir.resolve("t.jinja"), TEMPLATE); // the engines were launched with the original
        assertTrue(gw.reloadConfigFile().applied());
        assertEquals(vllmText, render("mvt").path("prompt").asText());
    }
}
