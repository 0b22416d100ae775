package io.kvgate.tools.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.index.hash.BlockHashSpec;
import io.kvgate.index.hash.BlockHasher;
import io.kvgate.index.hash.HashAlgo;
import io.kvgate.index.prompt.PromptException;
import io.kvgate.index.prompt.PromptRenderer;
import io.kvgate.index.prompt.RenderedPrompt;
import io.kvgate.index.tokenize.HfTokenizer;

import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.file.Path;

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

    static final String USAGE = "usage: ./kvgate render --model-dir DIR [--engine vllm|vllm-xxhash|sglang] [--seed S] "
        + "[--block-size B] [--lora NAME] < request.json\n"
        + "  prints {\"prompt\", \"prompt_token_ids\", \"block_keys\"} exactly as POST /kvgate/v1/chat/completions/render does\n"
        + "  (block keys as the engine publishes them; defaults: --engine vllm --seed 0 --block-size 16)";

    static int run(String[] args, InputStream in, PrintStream out, PrintStream err) {
        Path modelDir = null;
        String engine = "vllm";
        String seed = "0";
        String lora = null;
        int blockSize = -1;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            boolean hasValue = i + 1 < args.length;
            switch (a) {
                case "--model-dir" -> modelDir = hasValue ? Path.of(args[++i]) : null;
                case "--engine" -> engine = hasValue ? args[++i] : "";
                case "--seed" -> seed = hasValue ? args[++i] : "";
                case "--lora" -> lora = hasValue ? args[++i] : null;
                case "--block-size" -> {
                    try {
                        blockSize = Integer.parseInt(hasValue ? args[++i] : "");
                    } catch (NumberFormatException e) {
                        err.println("render: --block-size '" + args[i] + "' must be a positive integer");
                        return 2;
                    }
                }
                case "--help", "-h" -> {
                    out.println(USAGE); // asked for: stdout and 0, as every command
                    return 0;
                }
                default -> {
                    err.println("render: unknown argument '" + a + "'\n" + USAGE);
                    return 2;
                }
            }
        }
        if (modelDir == null) {
            err.println("render: --model-dir is required (a directory with tokenizer_config.json and tokenizer.json[.gz])");
            return 2;
        }
        HashAlgo algo = switch (engine) {
            case "vllm" -> HashAlgo.SHA256_CBOR;
            case "vllm-xxhash" -> HashAlgo.XXHASH_CBOR;
            case "sglang" -> HashAlgo.SHA256_SGLANG;
            default -> null;
        };
        if (algo == null) {
            err.println("render: --engine '" + engine + "' must be one of vllm|vllm-xxhash|sglang");
            return 2;
        }
        if (blockSize == -1) {
            blockSize = algo == HashAlgo.SHA256_SGLANG ? 1 : 16;
        }
        if (blockSize <= 0) {
            err.println("render: --block-size " + blockSize + " must be > 0");
            return 2;
        }
        try {
            HfTokenizer tok = HfTokenizer.load(modelDir);
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
            PromptRenderer renderer = new PromptRenderer(tok::encode, tok.config().chatTemplate(),
                tok.config().bosToken(), tok.config().eosToken());
            BlockHashSpec spec = algo == HashAlgo.SHA256_SGLANG ? BlockHashSpec.sglang(blockSize)
                : BlockHashSpec.vllm(algo, blockSize, seed, lora);
            BlockHasher hasher = new BlockHasher(spec);
            String salt = request != null && request.path("cache_salt").isTextual() ? request.get("cache_salt").asText() : null;
            ObjectNode result = JSON.createObjectNode();
            if (request != null && request.has("prompt") && !request.has("messages")) {
                java.util.List<RenderedPrompt> all = renderer.renderCompletion(request);
                write(result, all.get(0), hasher, algo, salt);
                if (all.size() > 1) {
                    ArrayNode prompts = result.putArray("prompts");
                    for (RenderedPrompt p : all) {
                        write(prompts.addObject(), p, hasher, algo, salt);
                    }
                }
            } else {
                write(result, renderer.renderChat(request), hasher, algo, salt);
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

    private static void write(ObjectNode o, RenderedPrompt p, BlockHasher hasher, HashAlgo algo, String salt) {
        if (p.text() != null) {
            o.put("prompt", p.text());
        } else {
            o.putNull("prompt");
        }
        ArrayNode ids = o.putArray("prompt_token_ids");
        for (int id : p.tokenIds()) {
            ids.add(id);
        }
        long[] keys = new long[p.tokenIds().length / hasher.spec().blockSize() + 1];
        int n = hasher.hash(p.tokenIds(), p.tokenIds().length, salt, keys);
        ArrayNode bk = o.putArray("block_keys");
        for (int i = 0; i < n; i++) {
            bk.addRawValue(new com.fasterxml.jackson.databind.util.RawValue(
                algo.isVllm() ? Long.toUnsignedString(keys[i]) : Long.toString(keys[i])));
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
}
