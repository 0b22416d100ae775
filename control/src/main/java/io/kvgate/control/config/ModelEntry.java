package io.kvgate.control.config;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * One entry of a rule's {@code models:} list: the name clients send ({@code name}) and, when the engines serve the
 * model under another name, that name ({@code served_as}; an alias, issue #13 item 4). A plain string entry is a name
 * served as itself. The gateway sends a request for {@code name} with {@code "model": served_as} and writes
 * {@code name} back into every answer's {@code model} (JSON body and every SSE chunk); clients, {@code /v1/models}
 * and metrics labels only ever see {@code name}. Two client names may share one {@code served_as}. Immutable.
 *
 * <p>An entry is a mapping so per-model keys can sit beside {@code served_as} (the LoRA {@code adapters} work reads
 * its own keys here); {@link #read} reports every key it does not know.
 */
public record ModelEntry(String name, String servedAs, List<String> adapters) {

    /**
     * {@code adapters}: the LoRA adapters the engines serve on top of this model (vLLM {@code --lora-modules NAME=...}).
     * A client selects one by sending its name as {@code model}; the gateway routes it to this rule and hashes its
     * blocks with the adapter name, as vLLM does. Empty for a model without adapters.
     */
    public ModelEntry {
        adapters = adapters == null ? List.of() : List.copyOf(adapters);
    }

    public ModelEntry(String name, String servedAs) {
        this(name, servedAs, List.of());
    }

    /** A name served as itself (a plain string entry). */
    public static ModelEntry plain(String name) {
        return new ModelEntry(name, null);
    }

    /** The name the engines serve this model under: {@code served_as}, else the client's name. */
    public String engineName() {
        return servedAs == null ? name : servedAs;
    }

    /** Whether the engine's name differs from the client's (the gateway rewrites {@code model} both ways). */
    public boolean renamed() {
        return servedAs != null && !servedAs.equals(name);
    }

    /** Reads {@code models:} of one rule: strings and {@code {name, served_as}} mappings, in order. */
    static List<ModelEntry> readAll(ConfigNode rule) {
        List<ModelEntry> out = new ArrayList<>();
        for (Object item : rule.stringsOrChildren(RuleKeys.MODELS.name())) {
            if (item instanceof String s) {
                out.add(plain(s));
            } else {
                ModelEntry e = read((ConfigNode) item);
                if (e != null) {
                    out.add(e);
                }
            }
        }
        return out;
    }

    /**
     * One mapping entry ({@code name} required, {@code served_as} and {@code adapters} optional); null when
     * {@code name} is missing.
     */
    static ModelEntry read(ConfigNode n) {
        String name = n.requiredString(ModelKeys.NAME.name());
        String servedAs = n.has(ModelKeys.SERVED_AS.name()) ? n.requiredString(ModelKeys.SERVED_AS.name()) : null;
        List<String> adapters = ModelKeys.ADAPTERS.readIfSet(n, List.of());
        Set<String> seen = new HashSet<>();
        for (String a : adapters) {
            if (a.equals(name)) {
                n.problem("adapters", a, "is the base model's own name; an adapter needs a name of its own");
            } else if (!seen.add(a)) {
                n.problem("adapters", a, "is listed twice");
            }
        }
        n.finish();
        return name == null ? null : new ModelEntry(name, servedAs, adapters);
    }
}
