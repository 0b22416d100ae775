package io.kvgate.tools.sim;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import java.util.ArrayList;
import java.util.List;

/**
 * One generation request, validated with the rules of the configured dialect (engine-contracts §1). Validation
 * runs in the engine's own order: body shape (pydantic in the engines), then the model name, then sampling
 * parameters, then — once the prompt is tokenized — the context length ({@link #applyContext}). Immutable after
 * {@link #applyContext}; confined to the engine loop.
 */
final class CompletionRequest {
    final boolean chat;
    final ObjectNode body;
    final String requestedModel;
    final boolean stream;
    final boolean includeUsage;
    final boolean continuousUsage;
    final int n;
    final boolean greedy;
    /** max tokens from the request, or -1 when absent; {@link #maxTokensField} says which field was used. */
    final int requestedMaxTokens;
    final String maxTokensField;
    final List<String> stop;
    final boolean keepStop;
    final long requestSeed;
    /** vLLM {@code kv_transfer_params}, or null. */
    final JsonNode kvTransferParams;
    /** SGLang bootstrap fields, or null/-1 when absent. */
    final String bootstrapHost;
    final int bootstrapPort;
    final long bootstrapRoom;
    final boolean hasBootstrap;

    /** Prompts (one per batch entry; chat has one), filled by {@link #applyContext}. */
    List<int[]> prompts = new ArrayList<>();
    /** Per prompt: tokens to generate at most (after vLLM clamping), or -1 = the model's natural length. */
    int[] maxTokens;
    /** Per prompt: context room left after the prompt (a natural-length answer is cut there, "length"). */
    int[] contextRoom;

    private CompletionRequest(boolean chat, ObjectNode body, Dialect dialect) {
        this.chat = chat;
        this.body = body;
        JsonNode model = body.get("model");
        this.requestedModel = model == null || model.isNull() ? null : model.asText();
        this.stream = bool(body, "stream", false);
        JsonNode so = body.get("stream_options");
        boolean hasStreamOptions = so != null && !so.isNull();
        if (hasStreamOptions && !so.isObject()) {
            throw SimError.badRequest("stream_options: must be an object", "stream_options");
        }
        if (dialect == Dialect.VLLM) {
            if (hasStreamOptions && !stream) {
                throw SimError.badRequest("Stream options can only be defined when `stream=True`.", "stream_options");
            }
            // vLLM's StreamOptions.include_usage defaults to True once the object is present, and
            // continuous_usage_stats only counts when include_usage is on.
            this.includeUsage = hasStreamOptions && bool(so, "include_usage", true);
            this.continuousUsage = includeUsage && bool(so, "continuous_usage_stats", false);
        } else {
            this.includeUsage = stream && hasStreamOptions && bool(so, "include_usage", false);
            this.continuousUsage = stream && hasStreamOptions && bool(so, "continuous_usage_stats", false);
        }
        this.n = intField(body, "n", 1);
        if (n < 1 || n > 128) {
            throw SimError.badRequest("n must be in 1..128, got " + n + ".", "n");
        }
        double temperature = number(body, "temperature", 1.0);
        if (temperature < 0 || temperature > 2) {
            throw SimError.badRequest("temperature must be in [0, 2], got " + temperature + ".", "temperature");
        }
        this.greedy = temperature < 1e-5;
        if (chat && dialect == Dialect.VLLM) {
            JsonNode top = body.get("top_logprobs");
            if (top != null && !top.isNull() && !bool(body, "logprobs", false)) {
                throw SimError.badRequest("when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs");
            }
        }
        if (chat) {
            validateMessages(body);
            validateTools(body);
        } else if (!body.has("prompt") || body.get("prompt").isNull()) {
            throw SimError.badRequest("Field required: prompt", "prompt");
        }
        JsonNode mct = body.get("max_completion_tokens");
        JsonNode mt = body.get("max_tokens");
        boolean hasMct = chat && mct != null && !mct.isNull();
        boolean hasMt = mt != null && !mt.isNull();
        // Both engines prefer max_completion_tokens (vLLM: it wins; SGLang: `max_completion_tokens or max_tokens`).
        if (hasMct) {
            this.maxTokensField = "max_completion_tokens";
            this.requestedMaxTokens = intField(body, "max_completion_tokens", -1);
        } else if (hasMt) {
            this.maxTokensField = "max_tokens";
            this.requestedMaxTokens = intField(body, "max_tokens", -1);
        } else {
            this.maxTokensField = "max_tokens";
            this.requestedMaxTokens = -1;
        }
        if ((hasMct || hasMt) && requestedMaxTokens < 1) {
            throw SimError.badRequest(maxTokensField + " must be at least 1, got " + requestedMaxTokens + ".",
                maxTokensField);
        }
        this.stop = parseStop(body.get("stop"));
        this.keepStop = dialect == Dialect.VLLM ? bool(body, "include_stop_str_in_output", false)
            : bool(body, "no_stop_trim", false);
        JsonNode seed = body.get("seed");
        this.requestSeed = seed != null && seed.isIntegralNumber() ? seed.asLong() : 0;
        JsonNode ktp = body.get("kv_transfer_params");
        this.kvTransferParams = ktp == null || ktp.isNull() ? null : ktp;
        this.hasBootstrap = body.has("bootstrap_room") && !body.get("bootstrap_room").isNull();
        this.bootstrapHost = body.path("bootstrap_host").isTextual() ? body.get("bootstrap_host").asText() : null;
        this.bootstrapPort = body.path("bootstrap_port").canConvertToInt() ? body.get("bootstrap_port").asInt() : -1;
        JsonNode room = body.get("bootstrap_room");
        this.bootstrapRoom = room != null && room.isArray() && !room.isEmpty() ? room.get(0).asLong()
            : room != null && room.isNumber() ? room.asLong() : -1;
    }

    /** Parses and validates everything that does not need the tokenizer. */
    static CompletionRequest parse(boolean chat, JsonNode json, SimulatorConfig config) {
        if (json == null || !json.isObject()) {
            throw SimError.badRequest("request body must be a JSON object");
        }
        CompletionRequest r = new CompletionRequest(chat, (ObjectNode) json, config.dialect);
        if (config.dialect == Dialect.VLLM) {
            if (r.requestedModel == null || !r.requestedModel.equals(config.model)) {
                throw new SimError(404, "NotFoundError", "The model `" + r.requestedModel + "` does not exist.",
                    "model");
            }
            if (r.n > 1 && r.greedy) {
                throw SimError.badRequest("n must be 1 when using greedy sampling, got " + r.n + ".", "n");
            }
        }
        return r;
    }

    /** Model name echoed in responses: vLLM only serves its own; SGLang echoes what was asked. */
    String responseModel(SimulatorConfig config) {
        return config.dialect == Dialect.SGLANG && requestedModel != null ? requestedModel : config.model;
    }

    /** Tokenizes the prompt(s) and applies the dialect's context-length rule. */
    void applyContext(PromptTokenizer tokenizer, SimulatorConfig config) {
        if (chat) {
            prompts.add(tokenizer.encodeChat(body));
        } else {
            JsonNode p = body.get("prompt");
            if (p.isTextual()) {
                prompts.add(tokenizer.encodeText(p.asText()));
            } else if (p.isArray() && !p.isEmpty() && p.get(0).isIntegralNumber()) {
                prompts.add(tokenIds(p));
            } else if (p.isArray() && !p.isEmpty()) {
                if (p.size() > 64) {
                    throw SimError.badRequest("prompt: at most 64 prompts per request, got " + p.size(), "prompt");
                }
                for (JsonNode e : p) {
                    if (e.isTextual()) {
                        prompts.add(tokenizer.encodeText(e.asText()));
                    } else if (e.isArray() && !e.isEmpty()) {
                        prompts.add(tokenIds(e));
                    } else {
                        throw SimError.badRequest("prompt: entries must be strings or token id arrays", "prompt");
                    }
                }
            } else {
                throw SimError.badRequest("prompt: must be a string, a token id array, or a list of them", "prompt");
            }
        }
        maxTokens = new int[prompts.size()];
        contextRoom = new int[prompts.size()];
        for (int i = 0; i < prompts.size(); i++) {
            int promptTokens = prompts.get(i).length;
            contextRoom[i] = Math.max(1, config.contextLen - promptTokens);
            if (promptTokens == 0) {
                throw SimError.badRequest("The prompt cannot be empty.", "prompt");
            }
            if (config.dialect == Dialect.VLLM) {
                if (promptTokens >= config.contextLen) {
                    throw SimError.badRequest("This model's maximum context length is " + config.contextLen
                        + " tokens. However, your request has " + promptTokens
                        + " input tokens. Please reduce the length of the input messages.", chat ? "messages" : "prompt");
                }
                // vLLM clamps max_tokens silently to what fits: finish_reason "length" tells the client.
                maxTokens[i] = requestedMaxTokens < 0 ? -1 : Math.min(requestedMaxTokens, config.contextLen - promptTokens);
            } else {
                int completion = Math.max(requestedMaxTokens, 0);
                if (promptTokens + completion > config.contextLen || promptTokens >= config.contextLen) {
                    throw SimError.badRequest("Requested token count exceeds the model's maximum context length of "
                        + config.contextLen + " tokens. You requested a total of " + (promptTokens + completion)
                        + " tokens: " + promptTokens + " tokens from the input messages and " + completion
                        + " tokens for the completion. Please reduce the number of tokens in the input messages or the"
                        + " completion to fit within the limit.", null);
                }
                maxTokens[i] = requestedMaxTokens;
            }
        }
    }

    private static int[] tokenIds(JsonNode arr) {
        int[] ids = new int[arr.size()];
        for (int i = 0; i < ids.length; i++) {
            JsonNode t = arr.get(i);
            if (!t.isIntegralNumber() || !t.canConvertToInt() || t.asInt() < 0) {
                throw SimError.badRequest("prompt: token ids must be non-negative integers, got " + t, "prompt");
            }
            ids[i] = t.asInt();
        }
        return ids;
    }

    private static void validateMessages(ObjectNode body) {
        JsonNode messages = body.get("messages");
        if (messages == null || messages.isNull()) {
            throw SimError.badRequest("Field required: messages", "messages");
        }
        if (!messages.isArray() || messages.isEmpty()) {
            throw SimError.badRequest("messages: must be a non-empty array", "messages");
        }
        for (JsonNode m : messages) {
            if (!m.isObject() || !m.path("role").isTextual()) {
                throw SimError.badRequest("messages: every message needs a string `role`", "messages");
            }
        }
    }

    private static void validateTools(ObjectNode body) {
        JsonNode tools = body.get("tools");
        JsonNode choice = body.get("tool_choice");
        boolean hasTools = tools != null && !tools.isNull();
        if (hasTools && (!tools.isArray() || tools.isEmpty())) {
            throw SimError.badRequest("tools: must be a non-empty list when present", "tools");
        }
        if (choice == null || choice.isNull()) {
            return;
        }
        if (!hasTools && !(choice.isTextual() && choice.asText().equals("none"))) {
            throw SimError.badRequest("When using `tool_choice`, `tools` must be set.", "tool_choice");
        }
        if (choice.isObject()) {
            String name = choice.path("function").path("name").asText(null);
            boolean found = false;
            for (JsonNode t : tools) {
                if (name != null && name.equals(t.path("function").path("name").asText(null))) {
                    found = true;
                }
            }
            if (!found) {
                throw SimError.badRequest("Tool '" + name + "' has not been passed in `tools`.", "tool_choice");
            }
        }
    }

    private static List<String> parseStop(JsonNode stop) {
        List<String> out = new ArrayList<>();
        if (stop == null || stop.isNull()) {
            return out;
        }
        if (stop.isTextual()) {
            if (!stop.asText().isEmpty()) {
                out.add(stop.asText());
            }
            return out;
        }
        if (!stop.isArray() || stop.size() > 16) {
            throw SimError.badRequest("stop: must be a string or a list of at most 16 strings", "stop");
        }
        for (JsonNode s : stop) {
            if (!s.isTextual()) {
                throw SimError.badRequest("stop: entries must be strings", "stop");
            }
            if (!s.asText().isEmpty()) {
                out.add(s.asText());
            }
        }
        return out;
    }

    private static boolean bool(JsonNode node, String field, boolean dflt) {
        JsonNode v = node.get(field);
        if (v == null || v.isNull()) {
            return dflt;
        }
        if (!v.isBoolean()) {
            throw SimError.badRequest(field + ": must be a boolean, got " + v, field);
        }
        return v.asBoolean();
    }

    private static int intField(JsonNode node, String field, int dflt) {
        JsonNode v = node.get(field);
        if (v == null || v.isNull()) {
            return dflt;
        }
        if (!v.isIntegralNumber() || !v.canConvertToInt()) {
            throw SimError.badRequest(field + ": must be an integer, got " + v, field);
        }
        return v.asInt();
    }

    private static double number(JsonNode node, String field, double dflt) {
        JsonNode v = node.get(field);
        if (v == null || v.isNull()) {
            return dflt;
        }
        if (!v.isNumber()) {
            throw SimError.badRequest(field + ": must be a number, got " + v, field);
        }
        return v.asDouble();
    }
}
