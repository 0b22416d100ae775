package io.kvgate.dataplane.route;

import io.kvgate.control.config.ModelEntry;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.control.log.Log;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;

/**
 * LoRA adapters discovered on vLLM endpoints (issue #13 item 4): vLLM lists each adapter it serves in
 * {@code GET /v1/models} as a card whose {@code parent} is the base model's name
 * (vllm/entrypoints/openai/models/serving.py {@code show_available_models}: {@code ModelCard(id=lora_name,
 * root=lora_path, parent=base_model_name)}). The model probe hands each endpoint's listing here at the health
 * checker's cadence; an adapter whose parent is a base model of a vLLM rule becomes a client name of that rule,
 * served by exactly the endpoints whose latest listing names it.
 *
 * <p>Precedence: a configured client name (a model or a {@code models[].adapters} entry of any rule) is never
 * shadowed by a discovered one; an adapter discovered under two rules belongs to the first in configuration order
 * (logged once). An endpoint whose probe fails keeps its last listing (its requests then get the usual 503 while it
 * is down); an endpoint that answers without the adapter stops serving it, and an adapter no endpoint lists any more
 * is an unknown model again (404 {@code model_not_found}).
 *
 * <p>Threading: {@link #observe} runs on the probe's thread (synchronized, off the request path) and publishes an
 * immutable snapshot; {@link #lookup} is a lock-free map read on I/O threads.
 */
public final class AdapterDirectory {
    /**
     * A discovered adapter: the rule serving it, the ids of the endpoints listing it (sorted) and its base model as the
     * engines name it (the cards' {@code parent}; the first endpoint's in configuration order).
     */
    public record Served(Rule rule, String adapter, int[] endpointIds, String parent) {
        /** Whether {@code ep} lists the adapter. */
        public boolean servedBy(EndpointState ep) {
            return Arrays.binarySearch(endpointIds, ep.id()) >= 0;
        }
    }

    /** One endpoint's LoRA cards: adapter id → parent. */
    private final Map<String, Map<String, String>> listings = new ConcurrentHashMap<>();
    private final Set<String> conflictsLogged = ConcurrentHashMap.newKeySet();
    private volatile Map<String, Served> byName = Map.of();

    /**
     * The adapter {@code model} names on the current {@code table}, or null (not discovered, or discovered under a
     * rule the table no longer holds as it was: the next probe round re-resolves it).
     */
    public Served lookup(RouteTable table, String model) {
        if (model == null) {
            return null;
        }
        Served s = byName.get(model);
        return s != null && table.ruleByName(s.rule().name()) == s.rule() ? s : null;
    }

    /** Every adapter discovered now, by name (admin read-back). */
    public Map<String, Served> snapshot() {
        return byName;
    }

    /**
     * One endpoint's {@code GET /v1/models} answer: its cards with a string {@code parent} (LoRA adapters), as
     * adapter id → parent. Recomputes the directory against {@code table}.
     */
    public synchronized void observe(RouteTable table, String endpointKey, Map<String, String> loraCards) {
        listings.put(endpointKey, Map.copyOf(loraCards));
        rebuild(table);
    }

    /** Recomputes the directory against {@code table} (after a reload, endpoints that left are forgotten). */
    public synchronized void rebuild(RouteTable table) {
        Set<String> live = new HashSet<>();
        for (Rule r : table.rules()) {
            for (EndpointState ep : r.endpoints()) {
                live.add(ep.key());
            }
        }
        listings.keySet().retainAll(live);
        Map<String, Rule> owner = new LinkedHashMap<>();
        Map<String, String> parents = new HashMap<>();
        Map<String, List<Integer>> eps = new HashMap<>();
        for (Rule r : table.rules()) {
            RuleConfig rc = r.config();
            if (!r.profile().listsAdapterCards()) {
                continue; // only vLLM lists its adapters with a parent; SGLang's /v1/models lists none
            }
            Set<String> bases = new HashSet<>();
            for (ModelEntry e : rc.modelEntries()) {
                bases.add(e.servedAs() != null ? e.servedAs() : e.name());
            }
            for (EndpointState ep : r.endpoints()) {
                Map<String, String> cards = listings.get(ep.key());
                if (cards == null) {
                    continue;
                }
                for (Map.Entry<String, String> c : new TreeMap<>(cards).entrySet()) {
                    String adapter = c.getKey();
                    if (!bases.contains(c.getValue()) || table.ruleForModel(adapter) != null) {
                        continue; // another model's adapter, or a name the configuration gives out
                    }
                    Rule prev = owner.putIfAbsent(adapter, r);
                    if (prev != null && prev != r) {
                        if (conflictsLogged.add(adapter + "\u0000" + r.name())) {
                            Log.warn("LoRA adapter '" + adapter + "' is listed under rule '" + prev.name() + "' and rule '"
                                + r.name() + "': it is served by '" + prev.name() + "' (the first in configuration order)");
                        }
                        continue;
                    }
                    eps.computeIfAbsent(adapter, k -> new ArrayList<>()).add(ep.id());
                    parents.putIfAbsent(adapter, c.getValue());
                }
            }
        }
        Map<String, Served> next = new HashMap<>();
        for (Map.Entry<String, Rule> e : owner.entrySet()) {
            int[] ids = eps.get(e.getKey()).stream().mapToInt(Integer::intValue).distinct().sorted().toArray();
            next.put(e.getKey(), new Served(e.getValue(), e.getKey(), ids, parents.get(e.getKey())));
        }
        byName = Map.copyOf(next);
    }
}
