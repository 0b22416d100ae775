package io.kvgate.dataplane.pd;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.ByteBufOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.function.LongSupplier;

/**
 * The request bodies of the two P/D dialects ({@code ../shared/docs/engine-contracts.md} §4), built from the client's
 * JSON as JSON (Jackson tree, never byte splicing) and serialized straight into a buffer. The client's tree is never
 * modified. Stateless.
 */
final class PdBodies {
    private static final ObjectMapper JSON = new ObjectMapper();

    private PdBodies() {}

    /**
     * vLLM prefill: the client's request with {@code stream:false}, {@code max_tokens:1} (and
     * {@code max_completion_tokens:1} if present), without {@code stream_options}/{@code min_tokens}/
     * {@code min_completion_tokens}, plus the request half of {@code kv_transfer_params}.
     */
    static ByteBuf vllmPrefill(ObjectNode client, ByteBufAllocator alloc) {
        ObjectNode p = client.deepCopy();
        p.put("stream", false);
        p.put("max_tokens", 1);
        if (p.has("max_completion_tokens")) {
            p.put("max_completion_tokens", 1);
        }
        p.remove("stream_options");
        p.remove("min_tokens");
        p.remove("min_completion_tokens");
        ObjectNode kv = p.putObject("kv_transfer_params");
        kv.put("do_remote_decode", true);
        kv.put("do_remote_prefill", false);
        kv.putNull("remote_engine_id");
        kv.putNull("remote_block_ids");
        kv.putNull("remote_host");
        kv.putNull("remote_port");
        return write(p, alloc);
    }

    /**
     * vLLM decode: the client's original request plus the prefill's {@code kv_transfer_params} verbatim; with none
     * ({@code params} null: prompt shorter than a block, or first token EOS) the original request, and decode
     * recomputes the prompt.
     */
    static ByteBuf vllmDecode(ObjectNode client, JsonNode params, ByteBufAllocator alloc) {
        ObjectNode d = client.deepCopy();
        if (params != null) {
            d.set("kv_transfer_params", params);
        } else {
            d.remove("kv_transfer_params");
        }
        return write(d, alloc);
    }

    /**
     * TensorRT-LLM context leg: the client's request with {@code stream:false}, {@code max_tokens:1} (and
     * {@code max_completion_tokens:1} if present), without {@code stream_options}/{@code min_tokens}, plus
     * {@code disaggregated_params: {"request_type": "context_only"}}.
     */
    static ByteBuf trtllmContext(ObjectNode client, ByteBufAllocator alloc) {
        ObjectNode p = client.deepCopy();
        p.put("stream", false);
        p.put("max_tokens", 1);
        if (p.has("max_completion_tokens")) {
            p.put("max_completion_tokens", 1);
        }
        p.remove("stream_options");
        p.remove("min_tokens");
        p.putObject("disaggregated_params").put("request_type", "context_only");
        return write(p, alloc);
    }

    /**
     * TensorRT-LLM generation leg: the client's original request plus the context answer's
     * {@code disaggregated_params} (every member kept verbatim) with {@code request_type: "generation_only"}; with
     * none ({@code contextParams} null) the original request.
     */
    static ByteBuf trtllmGeneration(ObjectNode client, JsonNode contextParams, ByteBufAllocator alloc) {
        ObjectNode d = client.deepCopy();
        if (contextParams != null) {
            ObjectNode params = ((ObjectNode) contextParams).deepCopy();
            params.put("request_type", "generation_only");
            d.set("disaggregated_params", params);
        } else {
            d.remove("disaggregated_params");
        }
        return write(d, alloc);
    }

    /**
     * SGLang (both legs get the same body): the client's request plus {@code bootstrap_host/port/room}, arrays of
     * length {@code sequences} when it asks for more than one sequence.
     */
    static ByteBuf sglang(ObjectNode client, int sequences, String host, int port, LongSupplier rooms, ByteBufAllocator alloc) {
        ObjectNode b = client.deepCopy();
        if (sequences <= 1) {
            b.put("bootstrap_host", host);
            b.put("bootstrap_port", port);
            b.put("bootstrap_room", rooms.getAsLong());
        } else {
            ArrayNode hosts = b.putArray("bootstrap_host");
            ArrayNode ports = b.putArray("bootstrap_port");
            ArrayNode roomIds = b.putArray("bootstrap_room");
            for (int i = 0; i < sequences; i++) {
                hosts.add(host);
                ports.add(port);
                roomIds.add(rooms.getAsLong());
            }
        }
        return write(b, alloc);
    }

    /** Sequences the request asks for: a batched completions prompt's length, or chat {@code n}; at least 1. */
    static int sequences(ObjectNode client) {
        JsonNode prompt = client.get("prompt");
        if (prompt != null && prompt.isArray() && prompt.size() > 0 && (prompt.get(0).isTextual() || prompt.get(0).isArray())) {
            return prompt.size();
        }
        JsonNode n = client.get("n");
        return client.has("messages") && n != null && n.isInt() && n.asInt() > 1 ? n.asInt() : 1;
    }

    private static ByteBuf write(ObjectNode node, ByteBufAllocator alloc) {
        ByteBuf buf = alloc.buffer(256);
        try (ByteBufOutputStream out = new ByteBufOutputStream(buf)) {
            JSON.writeValue((java.io.OutputStream) out, node);
        } catch (IOException e) {
            buf.release();
            throw new UncheckedIOException(e);
        }
        return buf;
    }
}
