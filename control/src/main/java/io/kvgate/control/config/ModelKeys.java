package io.kvgate.control.config;

/** One mapping entry of a rule's {@code models} list ({@link ModelEntry}). */
public final class ModelKeys {
    private ModelKeys() {}

    public static final ConfigSection<ModelEntry> SECTION = ConfigSection.detached("rules[].models[]",
        "a model entry written as a mapping (a plain string is a name served as itself)");

    public static final ConfigKey<ModelEntry, Object> NAME = SECTION.customKey("name", "string, required")
        .defaultText("required").doc("the name clients send").readBack(ModelEntry::name);
    public static final ConfigKey<ModelEntry, Object> SERVED_AS = SECTION.customKey("served_as", "string")
        .defaultText("`name`").doc("the name the engines serve it under (an alias; answers are rewritten back)")
        .readBack(ModelEntry::servedAs);
    public static final ConfigKey<ModelEntry, java.util.List<String>> ADAPTERS = SECTION.stringListKey("adapters")
        .doc("LoRA adapters the engines serve on this model (vllm, sglang); clients send one as `model`")
        .readBack(e -> e.adapters().isEmpty() ? null : e.adapters());
}
