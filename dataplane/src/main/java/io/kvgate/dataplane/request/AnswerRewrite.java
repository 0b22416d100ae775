package io.kvgate.dataplane.request;

import io.kvgate.control.config.ModelEntry;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.engine.EngineProfiles;
import io.kvgate.dataplane.request.RequestFields.Member;
import io.netty.buffer.ByteBuf;

/**
 * What the gateway changes in the engine's answers to one request, decided with the request edits that make it
 * necessary (issue #13 items 2, 4 and 5):
 * <ul>
 *   <li><b>alias</b>: the client asked for a name the engines serve under another ({@code served_as}): the engine
 *       gets {@code "model": served_as} and every answer's {@code model} (JSON body, each SSE chunk) is written
 *       back to {@link #clientModel}.</li>
 *   <li><b>greedy replication</b>: {@code n > 1} at {@code temperature: 0} on an engine that refuses it (vLLM,
 *       TensorRT-LLM) under {@code greedy_n: replicate}: the engine gets {@code n: 1} (greedy choices are identical)
 *       and each choice is answered {@link #replicas} times, indices {@code j·n .. j·n+n−1} for the engine's choice
 *       {@code j} (a completions batch keeps OpenAI's prompt-major order), usage completion tokens ×n.</li>
 *   <li><b>forced usage</b>: a stream whose client did not ask for usage ({@code stream_options.include_usage} not
 *       {@code true}) is sent with it, so the gateway can count tokens; the final usage-only chunk is then removed
 *       before the client sees it ({@link #stripUsage}).</li>
 * </ul>
 * A request that needs none of them has no {@code AnswerRewrite} at all (null): its answer is relayed byte for byte.
 * Immutable.
 */
public final class AnswerRewrite {
    private final String clientModel;
    private final byte[] clientModelJson;
    private final int replicas;
    private final boolean stripUsage;
    private final boolean usageChunkExtras;

    public AnswerRewrite(String clientModel, int replicas, boolean stripUsage) {
        this(clientModel, replicas, stripUsage, false);
    }

    /**
     * @param usageChunkExtras the engine puts members of its own on the stream's last chunk, which the forced usage
     *                         makes the usage chunk (llama.cpp's {@code timings}): when that chunk is removed they move
     *                         to the last chunk the client gets
     */
    public AnswerRewrite(String clientModel, int replicas, boolean stripUsage, boolean usageChunkExtras) {
        this.clientModel = clientModel;
        this.clientModelJson = clientModel == null ? null : RequestEdits.jsonString(clientModel);
        this.replicas = Math.max(1, replicas);
        this.stripUsage = stripUsage;
        this.usageChunkExtras = stripUsage && usageChunkExtras;
    }

    /** The client's model name to write back into answers, or null (no alias). */
    public String clientModel() {
        return clientModel;
    }

    /** {@link #clientModel} as a JSON string literal (null without an alias). */
    public byte[] clientModelJson() {
        return clientModelJson;
    }

    /** Copies of each engine choice (1: no replication). */
    public int replicas() {
        return replicas;
    }

    /** Remove the final usage-only chunk of a stream (the gateway asked for it, the client did not). */
    public boolean stripUsage() {
        return stripUsage;
    }

    /**
     * Whether the members the engine wrote on a removed usage chunk besides the usage itself (llama.cpp's
     * {@code timings}, which it writes on its last chunk: {@code to_json_oaicompat_chat_stream}'s
     * {@code deltas.back()}) move to the stream's last finish chunk, as the engine would have sent them unasked.
     */
    public boolean usageChunkExtras() {
        return usageChunkExtras;
    }

    /** Whether a JSON answer's bytes change (alias or replication); forced usage only concerns streams. */
    public boolean rewritesJson() {
        return clientModel != null || replicas > 1;
    }

    /**
     * Decides the rewrite for a validated request of {@code rule} and records the request edits it needs in
     * {@code edits}; returns null when the answer can be relayed untouched (no edit is recorded then). When edits
     * are needed and {@code body} changed since it was parsed, {@code f} is read again from it first
     * ({@link RequestEdits#refreshIfEdited}).
     *
     * @param body the request body as it will be sent (engine-internal members already removed)
     */
    public static AnswerRewrite plan(RequestFields f, RuleConfig rule, ByteBuf body, RequestEdits edits) {
        ModelEntry entry = rule.entryFor(f.model);
        String alias = entry != null && entry.renamed() ? f.model : null;
        int replicas = greedyN(f) && rule.greedyN() == RuleConfig.GreedyN.REPLICATE && EngineProfiles.of(rule).refusesGreedyN()
            ? f.n : 1;
        // stream_options absent, null or an object without include_usage: true (any other value the engine refuses
        // itself, so it is left for the engine to judge)
        boolean strip = f.stream && !f.includeUsageTrue && (f.streamOptionsObject || !f.hasStreamOptions);
        if (alias == null && replicas == 1 && !strip) {
            return null;
        }
        RequestEdits.refreshIfEdited(body, f); // the ranges the edits splice at must be this body's
        if (alias != null) {
            edits.set(Member.MODEL, RequestEdits.jsonString(entry.engineName()));
        }
        if (replicas > 1) {
            edits.set(Member.N, "1");
        }
        if (strip) {
            edits.set(Member.STREAM_OPTIONS, RequestEdits.streamOptionsWithUsage(body, f));
        }
        return new AnswerRewrite(alias, replicas, strip, EngineProfiles.of(rule).putsExtrasOnLastChunk());
    }

    /** {@code n > 1} with {@code temperature: 0}: greedy choices, which vLLM refuses and SGLang answers identically. */
    public static boolean greedyN(RequestFields f) {
        return f.n > 1 && f.temperatureZero;
    }

    @Override
    public String toString() {
        return "AnswerRewrite[model=" + clientModel + ", replicas=" + replicas + ", stripUsage=" + stripUsage + "]";
    }
}
