package io.kvgate.tools.demo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.dataplane.config.ConfigCheck;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every example configuration shipped in deploy/examples is one a user can copy and run: it passes every start-up
 * check ({@code ConfigCheck}: parsing, hash settings, tokenizer directories), and a gateway
 * started from it (only its listen addresses moved to loopback port 0) comes up, lists the example's models and
 * renders each rule's prompts with the rule's own tokenizer, chat template and block-hash settings. A parse-only
 * check would pass an example whose tokenizer directory or hash settings make the gateway fail at start.
 */
class DeployExamplesTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    static Path examplesDir() {
        return Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize()
            .resolve("deploy/examples");
    }

    static List<Path> examples() throws Exception {
        try (Stream<Path> s = Files.list(examplesDir())) {
            return s.filter(p -> p.toString().endsWith(".yaml")).sorted().toList();
        }
    }

    @Test
    void examplesValidate() throws Exception {
        List<Path> files = examples();
        assertFalse(files.isEmpty(), "no examples in " + examplesDir());
        for (Path f : files) {
            ConfigCheck.load(f); // exactly what `serve --check` and start-up run; throws with every problem named
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("examples")
    @Tag("system")
    @Timeout(60)
    void exampleStartsAGatewayThatServesItsRules(Path file) throws Exception {
        String original = Files.readString(file);
        String yaml = original.replaceAll("(?m)^listen: .*$", "listen: 127.0.0.1:0")
            .replaceAll("(?m)^admin_listen: .*$", "admin_listen: 127.0.0.1:0");
        assertTrue(yaml.contains("listen: 127.0.0.1:0"), file + " names no top-level listen address");
        GatewayConfig cfg = GatewayConfig.parse(yaml, file.getParent()); // relative paths as in the file's own directory
        Gateway gw = Gateway.start(cfg);
        try {
            String base = "http://127.0.0.1:" + gw.port();
            HttpResponse<String> models = HTTP.send(HttpRequest.newBuilder(URI.create(base + "/v1/models")).GET().build(),
                HttpResponse.BodyHandlers.ofString());
            assertEquals(200, models.statusCode(), models.body());
            List<String> served = new ArrayList<>();
            JSON.readTree(models.body()).path("data").forEach(m -> served.add(m.path("id").asText()));
            for (RuleConfig rule : cfg.rules()) {
                assertTrue(served.containsAll(rule.models()), "/v1/models " + served + " lacks " + rule.models());
                assertRenders(base, rule);
            }
        } finally {
            gw.close(100);
        }
    }

    /**
     * The rule hashes prompts without an engine: a token-id prompt of four blocks gives four keys; with a tokenizer,
     * a chat prompt is rendered through the model's template and tokenized.
     */
    private static void assertRenders(String base, RuleConfig rule) throws Exception {
        String model = rule.models().get(0);
        int bs = rule.blockSize();
        StringBuilder ids = new StringBuilder("[");
        for (int i = 0; i < 4 * bs; i++) {
            ids.append(i == 0 ? "" : ",").append(100 + i);
        }
        JsonNode tokens = render(base, "/kvgate/v1/completions/render",
            "{\"model\":\"" + model + "\",\"prompt\":" + ids.append(']') + "}");
        assertEquals(4 * bs, tokens.path("prompt_token_ids").size(), tokens.toString());
        assertEquals(4, tokens.path("block_keys").size(), rule.name() + ": " + tokens);
        assertNotEquals(tokens.path("block_keys").get(0), tokens.path("block_keys").get(1));
        if (rule.tokenizer() != null) {
            String question = "Which parcels left the Rotterdam depot this morning, and which are still waiting? ".repeat(8);
            JsonNode chat = render(base, "/kvgate/v1/chat/completions/render", "{\"model\":\"" + model
                + "\",\"messages\":[{\"role\":\"user\",\"content\":\"" + question + "\"}]}");
            assertTrue(chat.path("prompt").asText().contains(question), rule.name() + ": the template rendered the message: " + chat);
            int n = chat.path("prompt_token_ids").size();
            assertTrue(n > 100, rule.name() + ": tokenized " + chat);
            assertEquals(n / bs, chat.path("block_keys").size(), rule.name() + ": " + chat);
        }
    }

    private static JsonNode render(String base, String path, String body) throws Exception {
        HttpResponse<String> r = HTTP.send(HttpRequest.newBuilder(URI.create(base + path))
            .header("content-type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
            HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), path + " " + body + " -> " + r.body());
        return JSON.readTree(r.body());
    }
}
