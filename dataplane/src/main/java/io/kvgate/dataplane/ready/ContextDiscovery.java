package io.kvgate.dataplane.ready;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.dataplane.engine.EngineProfile;
import io.kvgate.dataplane.engine.ProbeJson;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.Rule;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;

/**
 * Where each engine states its context length, and what the gateway says about the rules' context lengths as they are
 * discovered (issue #13 item 1). Every engine's model cards are read here; where an engine states it otherwise is its
 * profile's ({@link EngineProfile#contextPath}, {@link EngineProfile#contextLength}). Field names, as the engines
 * serve them:
 * <ul>
 *   <li>vLLM {@code GET /v1/models}: each base model card's {@code max_model_len} (the effective
 *       {@code --max-model-len}; LoRA cards carry null; vllm/entrypoints/openai/models/serving.py).</li>
 *   <li>SGLang {@code GET /v1/models}: the served model's {@code max_model_len}, its {@code model_config.context_len}
 *       (http_server.py {@code available_models}, since sgl-project/sglang#4809). Older servers without it:
 *       {@code GET /get_server_info} → {@code context_length}. That field is the server argument as launched
 *       ({@code dataclasses.asdict(server_args)}), null unless {@code --context-length} was given, which is why the
 *       model card is read first.</li>
 *   <li>llama.cpp {@code GET /props} → {@code default_generation_settings.n_ctx}: the context of one slot, which is
 *       what one request gets (its {@code /v1/models} has no such field).</li>
 *   <li>TensorRT-LLM: its model card has no context length; rules set {@code max_model_len}.</li>
 * </ul>
 * A rule's value is {@link Rule#contextLength()} (read per request); this class only reports changes. Thread-safe.
 */
public final class ContextDiscovery {
    private final Consumer<String> warn;
    private final Consumer<String> info;
    /** Per rule, the state last reported, so a steady state is logged once, not every probe round. */
    private final Map<String, String> reported = new ConcurrentHashMap<>();

    public ContextDiscovery(Consumer<String> warn, Consumer<String> info) {
        this.warn = warn;
        this.info = info;
    }

    /** The smallest positive {@code max_model_len} of a {@code GET /v1/models} answer's cards, 0 when none states one. */
    public static int fromModels(JsonNode list) {
        int min = 0;
        for (JsonNode card : list.path("data")) {
            int v = ProbeJson.positive(card.get("max_model_len"));
            if (v > 0 && (min == 0 || v < min)) {
                min = v;
            }
        }
        return min;
    }

    /**
     * What is wrong with a rule's context length, or null: its endpoints disagree (requests are checked against the
     * smallest, which every endpoint can serve), or its configured {@code max_model_len} is above what an endpoint
     * serves (that engine would refuse requests the gateway admits).
     */
    public static String problem(Rule r) {
        Map<String, Integer> known = known(r);
        int configured = r.config().maxModelLen();
        if (configured > 0) {
            Map<String, Integer> below = new LinkedHashMap<>();
            known.forEach((k, v) -> {
                if (v < configured) {
                    below.put(k, v);
                }
            });
            return below.isEmpty() ? null : "rule '" + r.name() + "': max_model_len " + configured + " is above the"
                + " context length " + describe(below) + " serves: that engine refuses requests the gateway admits";
        }
        if (new HashSet<>(known.values()).size() > 1) {
            return "rule '" + r.name() + "': its endpoints disagree on the context length (" + describe(known)
                + "); requests are checked against the smallest, " + r.contextLength() + " tokens";
        }
        return null;
    }

    /** Each endpoint's discovered context length (those that reported one), in configuration order. */
    public static Map<String, Integer> known(Rule r) {
        Map<String, Integer> out = new LinkedHashMap<>();
        for (EndpointState ep : r.endpoints()) {
            if (ep.facts().engineContextLen() > 0) {
                out.put(ep.key(), ep.facts().engineContextLen());
            }
        }
        return out;
    }

    private static String describe(Map<String, Integer> values) {
        StringBuilder b = new StringBuilder();
        values.forEach((k, v) -> b.append(b.isEmpty() ? "" : ", ").append(k).append(": ").append(v));
        return b.toString();
    }

    /** Logs each rule whose context length state changed since the last review; forgets rules that are gone. */
    public synchronized void review(Iterable<Rule> rules) {
        Set<String> names = new TreeSet<>();
        for (Rule r : rules) {
            names.add(r.name());
            String state = r.contextLength() + "|" + r.config().maxModelLen() + "|" + known(r);
            if (state.equals(reported.put(r.name(), state))) {
                continue;
            }
            String problem = problem(r);
            if (problem != null) {
                warn.accept(problem);
            } else if (r.config().maxModelLen() == 0 && r.contextLength() > 0) {
                info.accept("rule '" + r.name() + "': context length " + r.contextLength() + " tokens (from its endpoints)");
            }
        }
        reported.keySet().retainAll(names);
    }
}
