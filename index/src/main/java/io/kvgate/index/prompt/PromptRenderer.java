package io.kvgate.index.prompt;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.index.template.JinjaTemplate;
import io.kvgate.index.template.PyStr;
import io.kvgate.index.template.TemplateException;
import io.kvgate.index.tokenize.Tokenizer;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * OpenAI request body to the exact prompt a vLLM engine computes KV for.
 *
 * <p>Chat follows vLLM's {@code chat_utils} for string-content templates (Qwen, Llama): text parts of an array content
 * are joined with "\n", a null content becomes "", assistant {@code tool_calls[].function.arguments} JSON strings are
 * parsed into objects (empty becomes {}), an empty {@code tool_calls} list is dropped, {@code reasoning} (or
 * {@code reasoning_content}) is exposed as both; {@code tools} are normalized as vLLM's pydantic model dumps them
 * ({@code type}, {@code function: {name, description, parameters, ...}}, nulls included). Then transformers'
 * {@code apply_chat_template}: the template sees {@code messages}, {@code tools}, {@code documents},
 * {@code add_generation_prompt} (default true), the tokenizer's {@code bos_token}/{@code eos_token} and every
 * {@code chat_template_kwargs} entry; {@code continue_final_message} cuts the output right after the final message's
 * content. The text is tokenized without special tokens (the template already wrote them).
 *
 * <p>Completions: {@code prompt} as a string, a list of strings, a list of token ids or a list of id lists; strings are
 * tokenized with special tokens (BOS where the tokenizer adds one), ids are used as given.
 *
 * <p>Threading contract: immutable and thread-safe (the compiled template is shared; the tokenizer must be thread-safe).
 */
public final class PromptRenderer {
    /** chat_template_kwargs keys that would replace what the renderer itself passes (transformers rejects duplicates). */
    private static final Set<String> RESERVED_KWARGS = Set.of("messages", "tools", "documents", "chat_template", "tokenize");

    private final Tokenizer tokenizer;
    private final JinjaTemplate template;
    private final String bosToken;
    private final String eosToken;

    /**
     * @throws IllegalArgumentException if the chat template does not compile (message names line and column)
     */
    public PromptRenderer(Tokenizer tokenizer, String chatTemplate, String bosToken, String eosToken) {
        if (tokenizer == null) {
            throw new IllegalArgumentException("tokenizer=null: a tokenizer is required");
        }
        this.tokenizer = tokenizer;
        try {
            this.template = chatTemplate == null ? null : JinjaTemplate.compile(chatTemplate);
        } catch (TemplateException e) {
            throw new IllegalArgumentException("chat_template does not compile: " + e.getMessage(), e);
        }
        this.bosToken = bosToken;
        this.eosToken = eosToken;
    }

    /**
     * The names the chat template reads from its context ({@link JinjaTemplate#undeclaredVariables()}); empty
     * without a template. vLLM keeps only the {@code chat_template_kwargs} among them (and transformers' own
     * {@code apply_chat_template} parameters).
     */
    public java.util.Set<String> templateVariables() {
        return template == null ? java.util.Set.of() : template.undeclaredVariables();
    }

    /** Renders and tokenizes a {@code /v1/chat/completions} body. */
    public RenderedPrompt renderChat(JsonNode body) throws PromptException {
        String text = renderChatText(body);
        return new RenderedPrompt(text, tokenizer.encode(text, false));
    }

    /** Renders a {@code /v1/chat/completions} body to the prompt text. */
    public String renderChatText(JsonNode body) throws PromptException {
        if (body == null || !body.isObject()) {
            throw new PromptException("body", "request body must be a JSON object");
        }
        if (template == null) {
            throw new PromptException("messages", "this model has no chat template; use /v1/completions");
        }
        List<Object> messages = conversation(body.get("messages"));
        boolean addGenerationPrompt = bool(body, "add_generation_prompt", true);
        boolean continueFinal = bool(body, "continue_final_message", false);
        Map<String, Object> ctx = new HashMap<>();
        if (bosToken != null) {
            ctx.put("bos_token", bosToken);
        }
        if (eosToken != null) {
            ctx.put("eos_token", eosToken);
        }
        JsonNode kwargs = body.get("chat_template_kwargs");
        if (kwargs != null && !kwargs.isNull()) {
            if (!kwargs.isObject()) {
                throw new PromptException("chat_template_kwargs", "chat_template_kwargs must be an object");
            }
            for (Map.Entry<String, JsonNode> e : kwargs.properties()) {
                String k = e.getKey();
                if (RESERVED_KWARGS.contains(k)) {
                    throw new PromptException("chat_template_kwargs." + k, "chat_template_kwargs may not set '" + k + "'");
                }
                if (k.equals("add_generation_prompt") || k.equals("continue_final_message")) {
                    // vLLM merges chat_template_kwargs over its own arguments, so these override the body fields.
                    if (!e.getValue().isBoolean()) {
                        throw new PromptException("chat_template_kwargs." + k, k + " must be a boolean");
                    }
                    if (k.equals("add_generation_prompt")) {
                        addGenerationPrompt = e.getValue().booleanValue();
                    } else {
                        continueFinal = e.getValue().booleanValue();
                    }
                    continue;
                }
                ctx.put(k, JsonValues.toJava(e.getValue()));
            }
        }
        if (continueFinal && addGenerationPrompt) {
            throw new PromptException("continue_final_message",
                    "Cannot set both `continue_final_message` and `add_generation_prompt` to True.");
        }
        ctx.put("messages", messages);
        ctx.put("tools", tools(body.get("tools")));
        ctx.put("documents", JsonValues.toJava(body.get("documents")));
        ctx.put("add_generation_prompt", addGenerationPrompt);
        String rendered;
        try {
            rendered = template.render(ctx);
        } catch (TemplateException e) {
            throw new PromptException("messages", e.raised() ? e.detail() : "chat template failed: " + e.getMessage());
        }
        return continueFinal ? cutAfterFinalMessage(rendered, messages) : rendered;
    }

    /** transformers' continue_final_message: keep the text up to the end of the final message's content. */
    private static String cutAfterFinalMessage(String rendered, List<Object> messages) throws PromptException {
        @SuppressWarnings("unchecked")
        Map<String, Object> last = (Map<String, Object>) messages.get(messages.size() - 1);
        String fin = (String) last.get("content");
        String stripped = PyStr.strip(fin, null);
        int loc = rendered.lastIndexOf(stripped);
        if (loc < 0) {
            throw new PromptException("messages",
                    "continue_final_message is set but the final message does not appear in the chat after applying the chat template");
        }
        String lstripped = PyStr.lstrip(fin, null);
        int end = loc + lstripped.length();
        if (end <= rendered.length() && rendered.substring(loc, end).equals(fin)) {
            return rendered.substring(0, end);
        }
        return rendered.substring(0, loc + stripped.length());
    }

    private static boolean bool(JsonNode body, String field, boolean dflt) throws PromptException {
        JsonNode n = body.get(field);
        if (n == null || n.isNull()) {
            return dflt;
        }
        if (!n.isBoolean()) {
            throw new PromptException(field, field + " must be a boolean, got " + n.getNodeType().name().toLowerCase());
        }
        return n.booleanValue();
    }

    private static List<Object> conversation(JsonNode messages) throws PromptException {
        if (messages == null || messages.isNull()) {
            throw new PromptException("messages", "messages is required");
        }
        if (!messages.isArray() || messages.isEmpty()) {
            throw new PromptException("messages", "messages must be a non-empty array");
        }
        List<Object> out = new ArrayList<>(messages.size());
        for (int i = 0; i < messages.size(); i++) {
            out.add(message(messages.get(i), "messages[" + i + "]"));
        }
        return out;
    }

    private static Map<String, Object> message(JsonNode m, String at) throws PromptException {
        if (!m.isObject()) {
            throw new PromptException(at, at + " must be an object");
        }
        JsonNode roleNode = m.get("role");
        if (roleNode == null || !roleNode.isTextual()) {
            throw new PromptException(at + ".role", at + ".role must be a string");
        }
        String role = roleNode.textValue();
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("role", role);
        out.put("content", content(m.get("content"), at + ".content"));
        if (role.equals("assistant")) {
            JsonNode calls = m.get("tool_calls");
            if (calls != null && !calls.isNull()) {
                List<Object> parsed = toolCalls(calls, at + ".tool_calls");
                if (!parsed.isEmpty()) {
                    out.put("tool_calls", parsed);
                }
            }
            JsonNode reasoning = m.get("reasoning");
            if (reasoning == null || reasoning.isNull()) {
                reasoning = m.get("reasoning_content");
            }
            if (reasoning != null && !reasoning.isNull()) {
                Object r = JsonValues.toJava(reasoning);
                out.put("reasoning", r);
                out.put("reasoning_content", r);
            }
        } else if (role.equals("tool")) {
            JsonNode id = m.get("tool_call_id");
            if (id != null) {
                out.put("tool_call_id", JsonValues.toJava(id));
            }
        }
        JsonNode name = m.get("name");
        if (name != null && name.isTextual()) {
            out.put("name", name.textValue());
        }
        return out;
    }

    private static String content(JsonNode c, String at) throws PromptException {
        if (c == null || c.isNull()) {
            return "";
        }
        if (c.isTextual()) {
            return c.textValue();
        }
        if (!c.isArray()) {
            throw new PromptException(at, at + " must be a string or an array of content parts");
        }
        StringBuilder sb = new StringBuilder();
        boolean first = true;
        for (int j = 0; j < c.size(); j++) {
            JsonNode part = c.get(j);
            String pat = at + "[" + j + "]";
            if (part.isTextual()) {
                // vLLM accepts a bare string as a text part.
                if (!first) {
                    sb.append('\n');
                }
                first = false;
                sb.append(part.textValue());
                continue;
            }
            if (!part.isObject()) {
                throw new PromptException(pat, pat + " must be an object");
            }
            JsonNode type = part.get("type");
            if (type == null || !type.isTextual()) {
                throw new PromptException(pat + ".type", pat + ".type is required");
            }
            if (!type.textValue().equals("text")) {
                throw new PromptException(pat + ".type", "content part type '" + type.textValue()
                        + "' is not supported for prompt rendering (text only)");
            }
            JsonNode text = part.get("text");
            if (text == null || !text.isTextual()) {
                throw new PromptException(pat + ".text", pat + ".text must be a string");
            }
            if (!first) {
                sb.append('\n');
            }
            first = false;
            sb.append(text.textValue());
        }
        return sb.toString();
    }

    private static List<Object> toolCalls(JsonNode calls, String at) throws PromptException {
        if (!calls.isArray()) {
            throw new PromptException(at, at + " must be an array");
        }
        List<Object> out = new ArrayList<>(calls.size());
        for (int k = 0; k < calls.size(); k++) {
            String cat = at + "[" + k + "]";
            JsonNode call = calls.get(k);
            if (!call.isObject() || !call.path("function").isObject()) {
                throw new PromptException(cat + ".function", cat + ".function must be an object");
            }
            @SuppressWarnings("unchecked")
            Map<String, Object> c = (Map<String, Object>) JsonValues.toJava(call);
            @SuppressWarnings("unchecked")
            Map<String, Object> fn = (Map<String, Object>) c.get("function");
            Object args = fn.get("arguments");
            if (args instanceof String s && !s.isEmpty()) {
                try {
                    fn.put("arguments", JsonValues.toJava(ARGS_MAPPER.readTree(s)));
                } catch (com.fasterxml.jackson.core.JacksonException e) {
                    throw new PromptException(cat + ".function.arguments", cat + ".function.arguments is not valid JSON: "
                            + e.getOriginalMessage());
                }
            } else if (args == null || args instanceof String || Boolean.FALSE.equals(args)
                    || (args instanceof Number n && n.doubleValue() == 0)
                    || (args instanceof List<?> l && l.isEmpty()) || (args instanceof Map<?, ?> mm && mm.isEmpty())) {
                // vLLM: `if arguments:` falsy (None, "", 0, [], {}) becomes {}
                fn.put("arguments", new LinkedHashMap<String, Object>());
            }
            out.add(c);
        }
        return out;
    }

    private static final com.fasterxml.jackson.databind.ObjectMapper ARGS_MAPPER = new com.fasterxml.jackson.databind.ObjectMapper();

    /** vLLM's ChatCompletionToolsParam.model_dump(): declared fields in order (nulls kept), then extra fields. */
    private static List<Object> tools(JsonNode tools) throws PromptException {
        if (tools == null || tools.isNull()) {
            return null;
        }
        if (!tools.isArray()) {
            throw new PromptException("tools", "tools must be an array");
        }
        List<Object> out = new ArrayList<>(tools.size());
        for (int i = 0; i < tools.size(); i++) {
            String at = "tools[" + i + "]";
            JsonNode t = tools.get(i);
            if (!t.isObject()) {
                throw new PromptException(at, at + " must be an object");
            }
            JsonNode type = t.get("type");
            if (type != null && !(type.isTextual() && type.textValue().equals("function"))) {
                throw new PromptException(at + ".type", at + ".type must be 'function'");
            }
            JsonNode f = t.get("function");
            if (f == null || !f.isObject()) {
                throw new PromptException(at + ".function", at + ".function must be an object");
            }
            JsonNode name = f.get("name");
            if (name == null || !name.isTextual()) {
                throw new PromptException(at + ".function.name", at + ".function.name must be a string");
            }
            JsonNode params = f.get("parameters");
            if (params != null && !params.isNull() && !params.isObject()) {
                throw new PromptException(at + ".function.parameters", at + ".function.parameters must be an object");
            }
            Map<String, Object> fd = new LinkedHashMap<>();
            fd.put("name", name.textValue());
            fd.put("description", JsonValues.toJava(f.get("description")));
            fd.put("parameters", JsonValues.toJava(params));
            for (Map.Entry<String, JsonNode> e : f.properties()) {
                if (!fd.containsKey(e.getKey())) {
                    fd.put(e.getKey(), JsonValues.toJava(e.getValue()));
                }
            }
            Map<String, Object> td = new LinkedHashMap<>();
            td.put("type", "function");
            td.put("function", fd);
            for (Map.Entry<String, JsonNode> e : t.properties()) {
                if (!td.containsKey(e.getKey())) {
                    td.put(e.getKey(), JsonValues.toJava(e.getValue()));
                }
            }
            out.add(td);
        }
        return out;
    }

    /** Tokenizes a {@code /v1/completions} body's {@code prompt}: one entry per prompt in the batch. */
    public List<RenderedPrompt> renderCompletion(JsonNode body) throws PromptException {
        if (body == null || !body.isObject()) {
            throw new PromptException("body", "request body must be a JSON object");
        }
        JsonNode p = body.get("prompt");
        if (p == null || p.isNull()) {
            throw new PromptException("prompt", "prompt is required");
        }
        List<RenderedPrompt> out = new ArrayList<>();
        if (p.isTextual()) {
            out.add(text(p.textValue()));
            return out;
        }
        if (!p.isArray() || p.isEmpty()) {
            throw new PromptException("prompt", "prompt must be a string, an array of strings, an array of token ids "
                    + "or an array of token-id arrays, and not empty");
        }
        JsonNode first = p.get(0);
        if (first.isIntegralNumber()) {
            out.add(new RenderedPrompt(null, ids(p, "prompt")));
            return out;
        }
        for (int i = 0; i < p.size(); i++) {
            JsonNode e = p.get(i);
            String at = "prompt[" + i + "]";
            if (first.isTextual() && e.isTextual()) {
                out.add(text(e.textValue()));
            } else if (first.isArray() && e.isArray()) {
                if (e.isEmpty()) {
                    throw new PromptException(at, at + " must not be empty");
                }
                out.add(new RenderedPrompt(null, ids(e, at)));
            } else {
                throw new PromptException(at, at + " must be " + (first.isTextual() ? "a string" : first.isArray()
                        ? "an array of token ids" : "a string, a token id or an array of token ids") + " like prompt[0]");
            }
        }
        return out;
    }

    private RenderedPrompt text(String s) {
        return new RenderedPrompt(s, tokenizer.encode(s, true));
    }

    private static int[] ids(JsonNode arr, String at) throws PromptException {
        int[] ids = new int[arr.size()];
        for (int i = 0; i < ids.length; i++) {
            JsonNode n = arr.get(i);
            if (!n.isIntegralNumber() || !n.canConvertToInt() || n.intValue() < 0) {
                throw new PromptException(at + "[" + i + "]", at + "[" + i + "] must be a non-negative token id, got " + n);
            }
            ids[i] = n.intValue();
        }
        return ids;
    }
}
