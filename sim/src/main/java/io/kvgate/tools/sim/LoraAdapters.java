package io.kvgate.tools.sim;

import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The LoRA adapters an engine serves ({@code --lora NAME}, like vLLM's {@code --lora-modules NAME=PATH} and
 * SGLang's {@code --lora-paths NAME=PATH}). Ids are 1-based in declaration order, like vLLM's
 * {@code lora_int_id} counter. Immutable.
 */
final class LoraAdapters {
    /** One served adapter; {@code path} is what the engines report as the model card's {@code root}. */
    record Adapter(String name, int id, String path) {}

    private final Map<String, Adapter> byName;

    LoraAdapters(List<String> names) {
        Map<String, Adapter> m = new LinkedHashMap<>();
        for (String n : names) {
            m.putIfAbsent(n, new Adapter(n, m.size() + 1, "/adapters/" + n));
        }
        this.byName = Collections.unmodifiableMap(m);
    }

    boolean enabled() {
        return !byName.isEmpty();
    }

    /** The adapter served under {@code name}, or null. */
    Adapter get(String name) {
        return byName.get(name);
    }

    Collection<Adapter> all() {
        return byName.values();
    }
}
