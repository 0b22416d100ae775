package io.kvgate.tools.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class RenderCommandTest {
    private static Path modelDir(String model) {
        String root = System.getProperty("kvgate.repo.root");
        Path dir = root != null ? Paths.get(root) : Paths.get("").toAbsolutePath();
        while (!Files.exists(dir.resolve("mvnw"))) {
            dir = dir.getParent();
        }
        return dir.resolve("deploy/models/" + model);
    }

    private record Result(int code, String out, String err) { }

    private static Result run(String stdin, String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int code = RenderCommand.run(args, new ByteArrayInputStream(stdin.getBytes(StandardCharsets.UTF_8)),
                new PrintStream(out, true, StandardCharsets.UTF_8), new PrintStream(err, true, StandardCharsets.UTF_8));
        return new Result(code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    @Test
    void rendersQwen3ChatWithTokenIds() throws Exception {
        Result r = run("{\"messages\":[{\"role\":\"user\",\"content\":\"What is 2+2?\"}],"
                + "\"chat_template_kwargs\":{\"enable_thinking\":false}}", "--model-dir", modelDir("qwen3").toString());
        assertEquals(0, r.code(), r.err());
        JsonNode j = new ObjectMapper().readTree(r.out());
        assertEquals("<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
                j.get("prompt").asText());
        assertEquals(151644, j.get("prompt_token_ids").get(0).asInt());
        assertEquals(151645, j.get("prompt_token_ids").get(10).asInt()); // <|im_start|> user \n What is " " 2 + 2 ? <|im_end|>
    }

    @Test
    void badRequestPrintsOpenAiErrorWithParam() throws Exception {
        Result r = run("{\"model\":\"m\"}", "--model-dir", modelDir("llama3_1").toString());
        assertEquals(1, r.code());
        JsonNode e = new ObjectMapper().readTree(r.err()).get("error");
        assertEquals("messages", e.get("param").asText());
        assertEquals(400, e.get("code").asInt());
    }

    @Test
    void completionsPromptBatch() throws Exception {
        Result r = run("{\"prompt\":[\"hi\",\"there\"]}", "--model-dir", modelDir("llama3_1").toString());
        assertEquals(0, r.code(), r.err());
        JsonNode p = new ObjectMapper().readTree(r.out()).get("prompts");
        assertEquals(2, p.size());
        assertEquals(128000, p.get(0).get("prompt_token_ids").get(0).asInt());
    }

    @Test
    void usageErrors() {
        assertEquals(2, run("{}").code());
        assertTrue(run("{}", "--bogus").err().contains("unknown argument"));
    }
}
