package io.kvgate.index.tokenize;

import java.io.IOException;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * The parts of a model's {@code tokenizer_config.json} the gateway needs to render prompts exactly.
 *
 * @param chatTemplate the Jinja chat template (the {@code "default"} one when the file holds a list of named
 *     templates), or null if the model has none
 * @param bosToken {@code bos_token} content (the file may hold a string or an object with {@code content}), or null
 * @param eosToken {@code eos_token} content, or null
 * @param addBosToken whether encoding with {@code addSpecialTokens=true} puts the BOS token first, as the Rust
 *     tokenizer resolves it (from tokenizer.json's post-processor, which is what vLLM/SGLang run), not the raw
 *     {@code add_bos_token} flag
 * @param raw the whole file as plain maps/lists/strings/numbers (unmodifiable)
 */
public record TokenizerConfig(String chatTemplate, String bosToken, String eosToken, boolean addBosToken,
                              Map<String, Object> raw) {

    static TokenizerConfig from(Map<String, Object> raw, boolean addBosResolved) throws IOException {
        return new TokenizerConfig(chatTemplate(raw.get("chat_template")), tokenContent(raw.get("bos_token"), "bos_token"),
                tokenContent(raw.get("eos_token"), "eos_token"), addBosResolved, Collections.unmodifiableMap(raw));
    }

    /** The tokenizer's templates (one, or the named list), or null when it has none. */
    public ChatTemplates templates() {
        return ChatTemplates.fromConfigValue(raw.get("chat_template"));
    }

    /**
     * The template named {@code name} when {@code chat_template} is a list of {@code {name, template}} (e.g.
     * {@code "tool_use"}, which transformers' {@code apply_chat_template} picks over {@code "default"} when it is
     * given {@code tools}), or null when the file holds one template or none by that name.
     */
    public String namedTemplate(String name) {
        if (raw.get("chat_template") instanceof List<?> list) {
            for (Object o : list) {
                if (o instanceof Map<?, ?> m && name.equals(m.get("name")) && m.get("template") instanceof String t) {
                    return t;
                }
            }
        }
        return null;
    }

    private static String tokenContent(Object v, String field) throws IOException {
        if (v == null || v instanceof String) {
            return (String) v;
        }
        if (v instanceof Map<?, ?> m) {
            Object c = m.get("content");
            if (c instanceof String s) {
                return s;
            }
        }
        throw new IOException("tokenizer_config.json: " + field + "=" + JsonTree.describe(v)
                + " must be a string, null, or an object with a string \"content\"");
    }

    private static String chatTemplate(Object v) throws IOException {
        if (v == null || v instanceof String) {
            return (String) v;
        }
        if (v instanceof List<?> list) {
            for (Object o : list) {
                if (o instanceof Map<?, ?> m && "default".equals(m.get("name")) && m.get("template") instanceof String t) {
                    return t;
                }
            }
            throw new IOException("tokenizer_config.json: chat_template is a list of named templates without one "
                    + "named \"default\"");
        }
        throw new IOException("tokenizer_config.json: chat_template=" + JsonTree.describe(v)
                + " must be a string or a list of {name, template}");
    }
}
