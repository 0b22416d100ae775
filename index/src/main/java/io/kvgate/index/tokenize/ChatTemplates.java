package io.kvgate.index.tokenize;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;

/**
 * A tokenizer's or processor's chat templates as transformers holds them ({@code chat_template}: one string, or a
 * dict of named templates), and transformers' choice among them ({@code get_chat_template(None, tools)}).
 *
 * @param defaultTemplate the single template, or the one named {@code default}; null when there is none
 * @param named           every named template (empty for a single one), in the order they were listed
 */
public record ChatTemplates(String defaultTemplate, Map<String, String> named) {
    public ChatTemplates {
        named = named == null ? Map.of() : Collections.unmodifiableMap(new LinkedHashMap<>(named));
    }

    /**
     * The template transformers' {@code apply_chat_template} renders with when it is given no template of its own:
     * with named templates, {@code tool_use} when the request has {@code tools} (not None) and it exists, else
     * {@code default}; a single template serves every request. Null when there is none to use.
     */
    public String select(boolean tools) {
        if (named.isEmpty()) {
            return defaultTemplate;
        }
        if (tools && named.containsKey("tool_use")) {
            return named.get("tool_use");
        }
        return named.get("default");
    }

    /** A {@code chat_template} value as tokenizer_config.json holds it: a string, or a list of {@code {name, template}}. */
    static ChatTemplates fromConfigValue(Object v) {
        if (v instanceof String s) {
            return new ChatTemplates(s, Map.of());
        }
        if (v instanceof List<?> list) {
            Map<String, String> named = new LinkedHashMap<>();
            for (Object o : list) {
                if (o instanceof Map<?, ?> m && m.get("name") instanceof String n && m.get("template") instanceof String t) {
                    named.put(n, t);
                }
            }
            return new ChatTemplates(named.get("default"), named);
        }
        return null;
    }

    /** Files whose {@code processor_class} makes transformers' AutoProcessor load a processor, in its lookup order. */
    static final List<String> PROCESSOR_CLASS_FILES = List.of("processor_config.json", "preprocessor_config.json",
        "tokenizer_config.json", "config.json");

    /**
     * The chat template of the model's processor, as transformers' {@code ProcessorMixin} loads it, or null when the
     * directory has no processor or the processor has no template.
     *
     * <p>A processor exists when AutoProcessor resolves a processor class: one of {@link #PROCESSOR_CLASS_FILES}
     * names a {@code processor_class} (multimodal checkpoints do; text models resolve to their tokenizer, which is
     * not a processor). Resolution through the model type alone (transformers' {@code PROCESSOR_MAPPING}) is not
     * reproduced: such a checkpoint needs its processor_config.json. The processor's template
     * ({@code get_processor_dict}): the legacy {@code chat_template.json} ({@code {"chat_template": "..."}}) first
     * (refused, as transformers refuses it, next to {@code additional_chat_templates/}); else
     * {@code chat_template.jinja} and {@code additional_chat_templates/NAME.jinja}; else the
     * {@code chat_template} key of processor_config.json.
     */
    public static ChatTemplates processor(Path modelDir) throws IOException {
        if (!hasProcessor(modelDir)) {
            return null;
        }
        Map<String, String> additional = additional(modelDir);
        Path legacy = modelDir.resolve("chat_template.json");
        if (Files.isRegularFile(legacy)) {
            if (!additional.isEmpty()) {
                throw new IOException(modelDir + ": a legacy chat_template.json beside additional_chat_templates/ is"
                    + " refused by transformers (\"Cannot load chat template due to conflicting files\"); replace"
                    + " chat_template.json with chat_template.jinja");
            }
            Object t = readJson(legacy).get("chat_template");
            if (!(t instanceof String s)) {
                throw new IOException(legacy + ": \"chat_template\" must be a string");
            }
            return new ChatTemplates(s, Map.of());
        }
        Path jinja = modelDir.resolve("chat_template.jinja");
        String dflt = Files.isRegularFile(jinja) ? Files.readString(jinja) : null;
        if (dflt != null || !additional.isEmpty()) {
            if (additional.isEmpty()) {
                return new ChatTemplates(dflt, Map.of());
            }
            Map<String, String> named = new LinkedHashMap<>(additional);
            if (dflt != null) {
                named.put("default", dflt);
            }
            return new ChatTemplates(dflt, named);
        }
        Path pc = modelDir.resolve("processor_config.json");
        if (Files.isRegularFile(pc)) {
            return fromConfigValue(readJson(pc).get("chat_template"));
        }
        return null;
    }

    /** Whether AutoProcessor finds a processor class for the directory (see {@link #processor}). */
    static boolean hasProcessor(Path modelDir) throws IOException {
        for (String name : PROCESSOR_CLASS_FILES) {
            Path f = modelDir.resolve(name);
            if (Files.isRegularFile(f) && readJson(f).get("processor_class") instanceof String s && !s.isEmpty()) {
                return true;
            }
        }
        return false;
    }

    /** {@code additional_chat_templates/NAME.jinja}, by name. */
    static Map<String, String> additional(Path modelDir) throws IOException {
        Map<String, String> named = new TreeMap<>();
        Path extra = modelDir.resolve("additional_chat_templates");
        if (Files.isDirectory(extra)) {
            try (Stream<Path> files = Files.list(extra)) {
                for (Path f : files.filter(f -> f.getFileName().toString().endsWith(".jinja")).toList()) {
                    String name = f.getFileName().toString();
                    named.put(name.substring(0, name.length() - ".jinja".length()), Files.readString(f));
                }
            }
        }
        return named;
    }

    private static Map<String, Object> readJson(Path f) throws IOException {
        try (InputStream in = Files.newInputStream(f)) {
            return JsonTree.object(JsonTree.parse(in), f.toString());
        }
    }
}
