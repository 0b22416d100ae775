package io.kvgate.tools.sim;

import static io.kvgate.tools.sim.SimHttp.json;
import static io.kvgate.tools.sim.SimHttp.post;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Greedy generation continues its context (issue #41): for every k, generating from (prompt + the first k generated
 * tokens) — as token ids, as text appended to a completions prompt, as an assistant prefix with
 * {@code continue_final_message} — yields exactly tokens k+1.. of the uninterrupted run, on another engine too; and
 * the token faults (die, stall, error frame after token k; slow first token).
 */
@Timeout(60)
@Tag("system")
class GreedyContinuationTest {
    @Test
    void completionsTextPromptContinuesForEveryK() throws Exception {
        try (EngineSimulator a = EngineSimulator.start(SimHttp.fast(Dialect.VLLM));
             EngineSimulator b = EngineSimulator.start(SimHttp.fast(Dialect.VLLM))) {
            String prompt = "Tell me about the river";
            String full = text(json(post(a, "/v1/completions", completion("\"" + prompt + "\"", 12))));
            assertTrue(full.startsWith(" "), "a prompt ending in a word is followed by a blank: '" + full + "'");
            List<String> tokens = splitTokens(full);
            assertEquals(12, tokens.size());
            for (int k = 1; k < 12; k++) {
                String carried = String.join("", tokens.subList(0, k));
                String rest = text(json(post(b, "/v1/completions",
                    completion(SimHttp.MAPPER.writeValueAsString(prompt + carried), 12 - k))));
                assertEquals(full, carried + rest, "continued at k=" + k);
            }
        }
    }

    @Test
    void tokenIdPromptContinuesWithTheReportedIds() throws Exception {
        try (EngineSimulator a = EngineSimulator.start(SimHttp.fast(Dialect.VLLM));
             EngineSimulator b = EngineSimulator.start(SimHttp.fast(Dialect.VLLM))) {
            String ids = "[101, 2023, 2003, 1037, 3231]";
            JsonNode whole = json(post(a, "/v1/completions", "{\"model\":\"m\",\"prompt\":" + ids
                + ",\"max_tokens\":10,\"temperature\":0,\"return_token_ids\":true}"));
            JsonNode choice = whole.at("/choices/0");
            assertEquals(10, choice.get("token_ids").size(), whole.toString());
            assertEquals(5, choice.get("prompt_token_ids").size());
            for (int k : new int[] {1, 4, 9}) {
                ArrayNode prompt = SimHttp.MAPPER.createArrayNode();
                choice.get("prompt_token_ids").forEach(prompt::add);
                for (int i = 0; i < k; i++) {
                    prompt.add(choice.get("token_ids").get(i));
                }
                JsonNode cont = json(post(b, "/v1/completions", "{\"model\":\"m\",\"prompt\":" + prompt
                    + ",\"max_tokens\":" + (10 - k) + ",\"temperature\":0,\"return_token_ids\":true}"));
                String carried = String.join("", splitTokens(text(whole)).subList(0, k));
                assertEquals(text(whole), carried + text(cont), "continued at k=" + k);
                for (int i = k; i < 10; i++) {
                    assertEquals(choice.get("token_ids").get(i), cont.at("/choices/0/token_ids").get(i - k));
                }
            }
        }
    }

    @Test
    void chatAssistantPrefixContinuesForEveryKAndEndsAtTheSameEos() throws Exception {
        try (EngineSimulator a = EngineSimulator.start(SimHttp.fast(Dialect.VLLM));
             EngineSimulator b = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG))) {
            // no max_tokens: the greedy EOS is the context's, so the continued run stops at the same token
            String full = json(post(a, "/v1/chat/completions", SimHttp.chat("m", "hello there", "\"temperature\":0")))
                .at("/choices/0/message/content").asText();
            List<String> tokens = splitTokens(full);
            assertTrue(tokens.size() >= 2, full);
            for (int k = 1; k < tokens.size(); k++) {
                String carried = String.join("", tokens.subList(0, k));
                String body = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hello there\"},"
                    + "{\"role\":\"assistant\",\"content\":" + SimHttp.MAPPER.writeValueAsString(carried) + "}],"
                    + "\"temperature\":0,\"continue_final_message\":true,\"add_generation_prompt\":false}";
                JsonNode cont = json(post(b, "/v1/chat/completions", body));
                assertEquals(full, carried + cont.at("/choices/0/message/content").asText(), "continued at k=" + k);
                assertEquals("stop", cont.at("/choices/0/finish_reason").asText());
            }
        }
    }

    @Test
    void continueFinalMessageNeedsNoGenerationPromptAndAnAssistantMessage() throws Exception {
        try (EngineSimulator a = EngineSimulator.start(SimHttp.fast(Dialect.VLLM))) {
            HttpResponse<String> both = post(a, "/v1/chat/completions", SimHttp.chat("m", "x",
                "\"continue_final_message\":true"));
            assertEquals(400, both.statusCode());
            assertTrue(both.body().contains("add_generation_prompt"), both.body());
            HttpResponse<String> user = post(a, "/v1/chat/completions", SimHttp.chat("m", "x",
                "\"continue_final_message\":true,\"add_generation_prompt\":false"));
            assertEquals(400, user.statusCode());
            assertTrue(user.body().contains("final message must be the assistant's"), user.body());
        }
    }

    @Test
    void streamedChatCarriesTokenIdsAndPromptIds() throws Exception {
        try (EngineSimulator a = EngineSimulator.start(SimHttp.fast(Dialect.VLLM))) {
            String sse = post(a, "/v1/chat/completions", SimHttp.chat("m", "x",
                "\"temperature\":0,\"max_tokens\":4,\"stream\":true,\"return_token_ids\":true")).body();
            List<JsonNode> events = events(sse);
            assertTrue(events.get(0).get("prompt_token_ids").isArray(), "the role chunk carries the prompt's ids");
            int ids = 0;
            for (JsonNode e : events.subList(1, events.size())) {
                ids += e.at("/choices/0/token_ids").size();
            }
            assertEquals(4, ids);
        }
    }

    @Test
    void dieAfterTokensClosesAfterExactlyKTokensAndTheCliArmsEveryRequest() throws Exception {
        try (EngineSimulator a = EngineSimulator.start(SimHttp.fast(Dialect.VLLM)
                 .fault("{\"die_after_tokens\":3,\"count\":-1}"))) {
            for (int i = 0; i < 2; i++) {
                assertThrows(IOException.class, () -> post(a, "/v1/completions", completion("\"x y\"", 8)
                    .replace("}", ",\"stream\":true}")));
            }
            assertEquals(2, a.stats().get("faults_died_after_tokens"));
            a.injectFaults("{\"clear\":true}");
            assertEquals(200, post(a, "/v1/completions", completion("\"x y\"", 8)).statusCode());
        }
    }

    @Test
    void errorAfterTokensSendsTheErrorFrameAfterKContentChunks() throws Exception {
        try (EngineSimulator a = EngineSimulator.start(SimHttp.fast(Dialect.VLLM))) {
            a.injectFaults("{\"error_after_tokens\":2}");
            String sse = post(a, "/v1/completions", completion("\"x y\"", 8).replace("}", ",\"stream\":true}")).body();
            List<JsonNode> events = events(sse);
            assertEquals(3, events.size(), sse);
            assertTrue(events.get(2).has("error"), sse);
            assertTrue(sse.endsWith("data: [DONE]\n\n"));
        }
    }

    @Test
    void stallAfterTokensKeepsTheConnectionOpenAndSilent() throws Exception {
        try (EngineSimulator a = EngineSimulator.start(SimHttp.fast(Dialect.VLLM))) {
            a.injectFaults("{\"stall_after_tokens\":2}");
            HttpRequest req = HttpRequest.newBuilder(URI.create(a.baseUrl() + "/v1/completions"))
                .timeout(Duration.ofSeconds(20)).header("content-type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(completion("\"x y\"", 8).replace("}", ",\"stream\":true}")))
                .build();
            CompletableFuture<HttpResponse<java.io.InputStream>> f = SimHttp.CLIENT.sendAsync(req,
                HttpResponse.BodyHandlers.ofInputStream());
            HttpResponse<java.io.InputStream> r = f.get(10, TimeUnit.SECONDS);
            java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(r.body()));
            int events = 0;
            while (events < 2) {
                String line = in.readLine();
                if (line != null && line.startsWith("data: ")) {
                    events++;
                }
            }
            // The engine counts the stall when it skips the step (the generation is still running, its slot held).
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (a.stats().get("faults_stalled_after_tokens") == 0 && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            assertEquals(1, a.stats().get("faults_stalled_after_tokens"));
            assertEquals(1, json(SimHttp.get(a, "/sim/stats")).get("running").asInt());
            r.body().close();
        }
    }

    @Test
    void slowFirstTokenIsAddedToThePlannedTtft() throws Exception {
        try (EngineSimulator a = EngineSimulator.start(SimHttp.fast(Dialect.VLLM))) {
            a.injectFaults("{\"slow_first_token_ms\":150}");
            long t0 = System.nanoTime();
            assertEquals(200, post(a, "/v1/completions", completion("\"x\"", 1)).statusCode());
            assertTrue(System.nanoTime() - t0 >= TimeUnit.MILLISECONDS.toNanos(150), "a floor, not a bound");
            assertEquals(0, a.onLoop(a::faultsJson).get("slow_first_count").asInt());
        }
    }

    @Test
    void badTokenFaultNamesTheField() throws Exception {
        try (EngineSimulator a = EngineSimulator.start(SimHttp.fast(Dialect.VLLM))) {
            HttpResponse<String> r = post(a, "/sim/faults", "{\"stall_after_tokens\":-2}");
            assertEquals(400, r.statusCode());
            assertTrue(r.body().contains("stall_after_tokens"), r.body());
        }
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
            () -> EngineSimulator.start(SimHttp.fast(Dialect.VLLM).fault("{\"die_after_tokens\":\"x\"}")));
        assertTrue(e.getMessage().contains("die_after_tokens"), e.getMessage());
    }

    static String completion(String promptJson, int maxTokens) {
        return "{\"model\":\"m\",\"prompt\":" + promptJson + ",\"max_tokens\":" + maxTokens + ",\"temperature\":0}";
    }

    static String text(JsonNode answer) {
        return answer.at("/choices/0/text").asText();
    }

    /** The generated text split back into its tokens (each word with the blank before it). */
    static List<String> splitTokens(String text) {
        List<String> out = new ArrayList<>();
        int start = 0;
        for (int i = 1; i <= text.length(); i++) {
            if (i == text.length() || text.charAt(i) == ' ') {
                out.add(text.substring(start, i));
                start = i;
            }
        }
        return out;
    }

    static List<JsonNode> events(String sse) throws IOException {
        List<JsonNode> out = new ArrayList<>();
        for (String block : sse.split("\n\n")) {
            if (block.startsWith("data: ") && !block.equals("data: [DONE]")) {
                out.add(SimHttp.MAPPER.readTree(block.substring(6)));
            }
        }
        return out;
    }
}
