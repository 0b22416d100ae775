package io.kvgate.tools.sim;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * llama.cpp's prompt cache: {@code --parallel N} slots, each with its own share of the context
 * ({@code n_ctx / N}) and the tokens of the last prompt it ran. A request runs on one slot:
 * <ul>
 *   <li>{@code id_slot} pins it to that slot (it waits while the slot is busy);</li>
 *   <li>otherwise the idle slot whose cached tokens share the longest common prefix with the prompt, if that
 *       prefix covers more than {@code slot_prompt_similarity} (0.5) of the prompt;</li>
 *   <li>otherwise the least recently used idle slot.</li>
 * </ul>
 * With {@code cache_prompt} (default true) the common prefix is not recomputed (at least the last prompt token
 * is). There is no cross-slot sharing and no KV event stream: a slot's cache is simply overwritten by its next
 * prompt. Engine-loop confined.
 */
final class LlamaSlots {
    static final double SLOT_PROMPT_SIMILARITY = 0.5;
    private static final JsonNodeFactory JSON = JsonNodeFactory.instance;

    private static final class Slot {
        final int id;
        int[] tokens = new int[0];
        Generation running;
        long lastUsed;

        Slot(int id) {
            this.id = id;
        }
    }

    private final Slot[] slots;
    private final int slotContext;
    private long clock;

    LlamaSlots(int parallel, int contextLen) {
        this.slots = new Slot[parallel];
        for (int i = 0; i < parallel; i++) {
            slots[i] = new Slot(i);
        }
        this.slotContext = Math.max(1, contextLen / parallel);
    }

    int slotContext() {
        return slotContext;
    }

    int count() {
        return slots.length;
    }

    /** Whether the generation could start now: its pinned slot, or any slot, is idle. */
    boolean ready(Generation g) {
        if (g.req.idSlot >= 0) {
            return slots[g.req.idSlot].running == null;
        }
        for (Slot s : slots) {
            if (s.running == null) {
                return true;
            }
        }
        return false;
    }

    /** Takes the slot the engine would pick and sets the generation's cached-token count. */
    void acquire(Generation g) {
        int[] prompt = g.req.prompts.get(0);
        Slot chosen = null;
        if (g.req.idSlot >= 0) {
            chosen = slots[g.req.idSlot];
        } else {
            int bestLcp = 0;
            for (Slot s : slots) {
                if (s.running != null) {
                    continue;
                }
                int lcp = commonPrefix(s.tokens, prompt);
                if (lcp > bestLcp && (double) lcp / prompt.length > SLOT_PROMPT_SIMILARITY) {
                    bestLcp = lcp;
                    chosen = s;
                }
            }
            if (chosen == null) {
                for (Slot s : slots) {
                    if (s.running == null && (chosen == null || s.lastUsed < chosen.lastUsed)) {
                        chosen = s;
                    }
                }
            }
        }
        if (chosen == null || chosen.running != null) {
            throw new IllegalStateException("no idle slot for a generation admission let start");
        }
        int cached = g.req.cachePrompt ? Math.min(commonPrefix(chosen.tokens, prompt), prompt.length - 1) : 0;
        chosen.running = g;
        chosen.tokens = prompt.clone();
        chosen.lastUsed = ++clock;
        g.slot = chosen.id;
        g.cachedTokens = cached;
    }

    void release(Generation g) {
        if (g.slot >= 0 && slots[g.slot].running == g) {
            slots[g.slot].running = null;
        }
    }

    /** Tokens held by the slots' caches over the whole context (llama.cpp's kv_cache_usage_ratio). */
    double usage() {
        long used = 0;
        for (Slot s : slots) {
            used += s.tokens.length;
        }
        return (double) used / ((long) slotContext * slots.length);
    }

    int busy() {
        int n = 0;
        for (Slot s : slots) {
            if (s.running != null) {
                n++;
            }
        }
        return n;
    }

    boolean anyIdle() {
        return busy() < slots.length;
    }

    /** {@code GET /slots}: one object per slot. */
    ArrayNode toJson(String model) {
        ArrayNode out = JSON.arrayNode();
        for (Slot s : slots) {
            ObjectNode o = out.addObject();
            o.put("id", s.id);
            o.put("id_task", s.running == null ? -1 : s.running.requestId.hashCode() & 0x7fffffff);
            o.put("n_ctx", slotContext);
            o.put("speculative", false);
            o.put("is_processing", s.running != null);
            ObjectNode params = o.putObject("params");
            params.put("n_predict", -1);
            params.put("cache_prompt", true);
            o.put("n_prompt_tokens", s.tokens.length);
            ObjectNode next = o.putArray("next_token").addObject();
            next.put("has_next_token", s.running != null);
            next.put("n_decoded", s.running == null ? 0 : s.running.completionTokens());
        }
        return out;
    }

    void clear() {
        for (Slot s : slots) {
            s.tokens = new int[0];
        }
    }

    private static int commonPrefix(int[] a, int[] b) {
        int n = Math.min(a.length, b.length);
        int i = 0;
        while (i < n && a[i] == b[i]) {
            i++;
        }
        return i;
    }
}
