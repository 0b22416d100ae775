package io.kvgate.tools.cli;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.index.prompt.PromptException;
import io.kvgate.index.prompt.PromptRenderer;
import io.kvgate.index.prompt.RenderedPrompt;
import io.kvgate.index.tokenize.Tokenizer;

import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Map;
import java.util.zip.GZIPInputStream;

/**
 * {@code ./kvgate render --model-dir DIR}: reads an OpenAI chat request (or a completions request with {@code prompt})
 * on stdin and prints exactly what the engine will see: {@code {"prompt": ..., "prompt_token_ids": [...]}} (for
 * completions, {@code {"prompts": [{...}, ...]}}). DIR holds {@code tokenizer_config.json} (chat template, bos/eos) and
 * {@code tokenizer.json} or {@code tokenizer.json.gz}. A bad request prints an OpenAI error object on stderr, exit 1.
 *
 * <p>Threading contract: single-threaded CLI.
 */
public final class RenderCommand {
    /** The stdin request is bounded like a gateway body. */
    static final int MAX_REQUEST_BYTES = 64 * 1024 * 1024;
    private static final ObjectMapper JSON = new ObjectMapper();

    private RenderCommand() {
    }

    public static int run(String[] args) {
        return run(args, System.in, System.out, System.err);
    }

    static int run(String[] args, InputStream in, PrintStream out, PrintStream err) {
        Path modelDir = null;
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--model-dir") && i + 1 < args.length) {
                modelDir = Path.of(args[++i]);
            } else if (args[i].equals("--help") || args[i].equals("-h")) {
                err.println("usage: ./kvgate render --model-dir DIR < request.json");
                return 0;
            } else {
                err.println("render: unknown argument '" + args[i] + "'; usage: ./kvgate render --model-dir DIR < request.json");
                return 2;
            }
        }
        if (modelDir == null) {
            err.println("render: --model-dir is required (a directory with tokenizer_config.json and tokenizer.json[.gz])");
            return 2;
        }
        try {
            JsonNode cfg = JSON.readTree(modelDir.resolve("tokenizer_config.json").toFile());
            byte[] body = in.readNBytes(MAX_REQUEST_BYTES + 1);
            if (body.length > MAX_REQUEST_BYTES) {
                err.println("render: request on stdin exceeds " + MAX_REQUEST_BYTES + " bytes");
                return 1;
            }
            JsonNode request;
            try {
                request = JSON.readTree(body);
            } catch (IOException e) {
                printError(err, "body", "request is not valid JSON: " + e.getMessage());
                return 1;
            }
            PromptRenderer renderer = new PromptRenderer(tokenizer(modelDir), text(cfg, "chat_template"),
                    text(cfg, "bos_token"), text(cfg, "eos_token"));
            ObjectNode result = JSON.createObjectNode();
            if (request != null && request.has("prompt") && !request.has("messages")) {
                ArrayNode prompts = result.putArray("prompts");
                for (RenderedPrompt p : renderer.renderCompletion(request)) {
                    write(prompts.addObject(), p);
                }
            } else {
                write(result, renderer.renderChat(request));
            }
            out.println(JSON.writeValueAsString(result));
            return 0;
        } catch (PromptException e) {
            printError(err, e.param(), e.getMessage());
            return 1;
        } catch (IOException | IllegalArgumentException e) {
            err.println("render: " + e.getMessage());
            return 1;
        }
    }

    private static void write(ObjectNode o, RenderedPrompt p) {
        if (p.text() != null) {
            o.put("prompt", p.text());
        }
        ArrayNode ids = o.putArray("prompt_token_ids");
        for (int id : p.tokenIds()) {
            ids.add(id);
        }
    }

    private static void printError(PrintStream err, String param, String message) {
        ObjectNode e = JSON.createObjectNode();
        ObjectNode inner = e.putObject("error");
        inner.put("message", message);
        inner.put("type", "BadRequestError");
        inner.put("param", param);
        inner.put("code", 400);
        err.println(e.toString());
    }

    /** bos_token/eos_token may be a string, null, or an AddedToken object {"content": ...}. */
    private static String text(JsonNode cfg, String field) {
        JsonNode n = cfg.get(field);
        if (n == null || n.isNull()) {
            return null;
        }
        if (n.isObject()) {
            return n.path("content").isTextual() ? n.get("content").asText() : null;
        }
        return n.isTextual() ? n.asText() : null;
    }

    /**
     * The tokenizer factory, the one place the lead switches to {@code io.kvgate.index.tokenize.HfTokenizer} once it is
     * merged (it was not on main when this command was written); until then the real Rust HF tokenizer via DJL.
     */
    static Tokenizer tokenizer(Path modelDir) throws IOException {
        Path json = modelDir.resolve("tokenizer.json");
        if (!Files.exists(json)) {
            Path gz = modelDir.resolve("tokenizer.json.gz");
            if (!Files.exists(gz)) {
                throw new IOException("no tokenizer.json or tokenizer.json.gz in " + modelDir);
            }
            Path tmp = Files.createTempDirectory("kvgate-render");
            tmp.toFile().deleteOnExit();
            json = tmp.resolve("tokenizer.json");
            try (InputStream in = new GZIPInputStream(Files.newInputStream(gz))) {
                Files.copy(in, json, StandardCopyOption.REPLACE_EXISTING);
            }
            json.toFile().deleteOnExit();
        }
        HuggingFaceTokenizer tok = HuggingFaceTokenizer.newInstance(json,
                Map.of("truncation", "false", "padding", "false", "addSpecialTokens", "true"));
        return (text, addSpecialTokens) -> {
            long[] ids = tok.encode(text.toString(), addSpecialTokens, false).getIds();
            int[] out = new int[ids.length];
            for (int i = 0; i < ids.length; i++) {
                out[i] = Math.toIntExact(ids[i]);
            }
            return out;
        };
    }
}
