package io.kvgate.dataplane.pd;

import io.kvgate.dataplane.request.RequestEdits;
import io.kvgate.dataplane.request.RequestFields;
import io.kvgate.dataplane.request.RequestFields.Member;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import java.nio.charset.StandardCharsets;
import java.util.function.LongSupplier;

/**
 * The request bodies of the P/D dialects ({@code ../shared/docs/engine-contracts.md} §4), each the client's bytes with
 * a few byte-range splices ({@link RequestEdits#copy}) at the member ranges the field extractor recorded while the
 * body streamed in: no parse, no tree, every other byte as the client sent it. A member the dialect must drop is
 * neutralised instead of removed ({@code stream_options: null}, {@code min_tokens: 0}): the edit lands on the last
 * occurrence, which is the one the engines read, so an earlier duplicate can never come back into force. The
 * engine-internal members a dialect adds ({@code kv_transfer_params}, {@code disaggregated_params},
 * {@code bootstrap_*}) are appended last; the front door already removed the client's own.
 *
 * <p>One per P/D request, over the body the exchange owns (it releases it). Event-loop only.
 */
final class PdBodies {
    private static final byte[] FALSE = "false".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] ONE = "1".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] ZERO = "0".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] NULL = "null".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] VLLM_PREFILL_PARAMS = ("{\"do_remote_decode\":true,\"do_remote_prefill\":false,"
        + "\"remote_engine_id\":null,\"remote_block_ids\":null,\"remote_host\":null,\"remote_port\":null}")
        .getBytes(StandardCharsets.US_ASCII);

    private final ByteBuf client;
    private final RequestFields fields;
    private final boolean chat;
    private final RequestEdits edits = new RequestEdits();

    /**
     * @param client the client's body as the engine would get it on a plain rule (front-door edits applied)
     * @param fields the body's fields; read again here only when an earlier stage changed the body since they were
     *               recorded (as the plain path's edits do)
     */
    PdBodies(ByteBuf client, RequestFields fields, boolean chat) {
        this.client = client;
        this.fields = fields;
        this.chat = chat;
        RequestEdits.refreshIfEdited(client, fields);
    }

    RequestFields fields() {
        return fields;
    }

    boolean chat() {
        return chat;
    }

    /** The client's body, for a leg that sends it unchanged (the leg takes over this reference). */
    ByteBuf original() {
        return client.retainedDuplicate();
    }

    /**
     * vLLM prefill: {@code stream:false}, {@code max_tokens:1} (and {@code max_completion_tokens:1} if present),
     * {@code stream_options}/{@code min_tokens}/{@code min_completion_tokens} neutralised, plus the request half of
     * {@code kv_transfer_params}.
     */
    ByteBuf vllmPrefill(ByteBufAllocator alloc) {
        edits.reset();
        oneUnstreamedToken();
        setIfPresent(Member.MIN_TOKENS, ZERO);
        setIfPresent(Member.MIN_COMPLETION_TOKENS, ZERO);
        edits.append("kv_transfer_params", VLLM_PREFILL_PARAMS);
        return splice(alloc);
    }

    /**
     * vLLM decode: the client's request plus the prefill's {@code kv_transfer_params} ({@code params}: the JSON
     * bytes, verbatim); with none (null: prompt shorter than a block, or first token EOS) the client's request, and
     * decode recomputes the prompt.
     */
    ByteBuf vllmDecode(byte[] params, ByteBufAllocator alloc) {
        if (params == null) {
            return original();
        }
        edits.reset();
        edits.append("kv_transfer_params", params);
        return splice(alloc);
    }

    /**
     * TensorRT-LLM context leg, as its own disaggregated service builds it ({@code _get_ctx_request}): the client's
     * request with {@code stream:false}, {@code stream_options} neutralised and
     * {@code disaggregated_params: {"request_type":"context_only","disagg_request_id":id}}. Its {@code max_tokens} is
     * the client's: a context server generates the first token only, and its answer says whether that ended the
     * request.
     */
    ByteBuf trtllmContext(long disaggRequestId, ByteBufAllocator alloc) {
        edits.reset();
        edits.set(Member.STREAM, FALSE);
        setIfPresent(Member.STREAM_OPTIONS, NULL);
        edits.append("disaggregated_params", ("{\"request_type\":\"context_only\",\"disagg_request_id\":" + disaggRequestId
            + "}").getBytes(StandardCharsets.US_ASCII));
        return splice(alloc);
    }

    /**
     * TensorRT-LLM generation leg ({@code _get_gen_request}): the client's request plus {@code params} (the context
     * answer's {@code disaggregated_params} as the dialect completed them: JSON bytes) and the prompt the context
     * server tokenized ({@code promptTokenIds}: its {@code prompt_token_ids}, JSON bytes, or null): completions get
     * it as {@code prompt}, chat as {@code prompt_token_ids}, so the generation server runs exactly the tokens whose
     * KV it receives instead of rendering and tokenizing the messages again.
     */
    ByteBuf trtllmGeneration(byte[] params, byte[] promptTokenIds, ByteBufAllocator alloc) {
        edits.reset();
        if (promptTokenIds != null) {
            edits.set(chat ? Member.PROMPT_TOKEN_IDS : Member.PROMPT, promptTokenIds);
        }
        edits.append("disaggregated_params", params);
        return splice(alloc);
    }

    /**
     * SGLang (both legs get the same body): the client's request plus {@code bootstrap_host/port/room}, arrays of
     * length {@code sequences} when it asks for more than one sequence.
     */
    ByteBuf sglang(int sequences, String host, int port, LongSupplier rooms, ByteBufAllocator alloc) {
        edits.reset();
        byte[] h = RequestEdits.jsonString(host);
        byte[] p = Integer.toString(port).getBytes(StandardCharsets.US_ASCII);
        if (sequences <= 1) {
            edits.append("bootstrap_host", h);
            edits.append("bootstrap_port", p);
            edits.append("bootstrap_room", Long.toString(rooms.getAsLong()).getBytes(StandardCharsets.US_ASCII));
        } else {
            StringBuilder hosts = new StringBuilder("[");
            StringBuilder ports = new StringBuilder("[");
            StringBuilder roomIds = new StringBuilder("[");
            String hs = new String(h, StandardCharsets.UTF_8);
            String ps = new String(p, StandardCharsets.US_ASCII);
            for (int i = 0; i < sequences; i++) {
                String sep = i == 0 ? "" : ",";
                hosts.append(sep).append(hs);
                ports.append(sep).append(ps);
                roomIds.append(sep).append(rooms.getAsLong());
            }
            edits.append("bootstrap_host", hosts.append(']').toString().getBytes(StandardCharsets.UTF_8));
            edits.append("bootstrap_port", ports.append(']').toString().getBytes(StandardCharsets.US_ASCII));
            edits.append("bootstrap_room", roomIds.append(']').toString().getBytes(StandardCharsets.US_ASCII));
        }
        return splice(alloc);
    }

    /** Sequences the request asks for: a batched completions prompt's length, or chat {@code n}; at least 1. */
    static int sequences(RequestFields f) {
        if (f.hasPrompt && f.promptCount > 1) {
            return f.promptCount;
        }
        return f.hasMessages && f.n > 1 ? f.n : 1;
    }

    private void oneUnstreamedToken() {
        edits.set(Member.STREAM, FALSE);
        edits.set(Member.MAX_TOKENS, ONE);
        setIfPresent(Member.MAX_COMPLETION_TOKENS, ONE);
        setIfPresent(Member.STREAM_OPTIONS, NULL);
    }

    private void setIfPresent(Member m, byte[] json) {
        if (fields.has(m)) {
            edits.set(m, json);
        }
    }

    private ByteBuf splice(ByteBufAllocator alloc) {
        try {
            return edits.copy(client, fields, alloc);
        } finally {
            edits.reset();
        }
    }
}
