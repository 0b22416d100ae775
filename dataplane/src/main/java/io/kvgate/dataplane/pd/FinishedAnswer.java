package io.kvgate.dataplane.pd;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.dataplane.relay.AnswerJson;
import io.kvgate.dataplane.request.AnswerRewrite;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpVersion;
import java.nio.charset.StandardCharsets;

/**
 * The client's answer when the prefill's answer ended the request (TensorRT-LLM: the first token was EOS), in the
 * form the client asked for: the JSON as it is, or, for a streamed request, the same answer as the event stream a
 * generation leg would have sent (one chunk with the text and the finish reason, the usage chunk when
 * {@code stream_options.include_usage} asked for it, {@code [DONE]}). TensorRT-LLM's own orchestrator answers such a
 * stream with {@code [DONE]} alone and loses the token; the gateway keeps it. Stateless.
 */
final class FinishedAnswer {
    private static final ObjectMapper JSON = new ObjectMapper();

    private FinishedAnswer() {}

    static FullHttpResponse response(ByteBufAllocator alloc, String json, PdBodies client, AnswerRewrite rewrite) {
        if (rewrite != null && rewrite.rewritesJson()) {
            json = AnswerJson.rewriteAnswer(json, rewrite); // the client's model name, its n
        }
        boolean stream = client.fields().stream;
        String body = stream ? events(json, client.chat(), client.fields().includeUsageTrue) : json;
        ByteBuf buf = alloc.buffer(body.length() + 16);
        buf.writeCharSequence(body, StandardCharsets.UTF_8);
        FullHttpResponse r = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK, buf);
        r.headers().set(HttpHeaderNames.CONTENT_TYPE, stream ? HttpHeaderValues.TEXT_EVENT_STREAM : HttpHeaderValues.APPLICATION_JSON);
        r.headers().setInt(HttpHeaderNames.CONTENT_LENGTH, buf.readableBytes());
        return r;
    }

    /** A whole answer as the event stream of the same answer; {@code usage}: end with the usage chunk. */
    static String events(String json, boolean chat, boolean usage) {
        JsonNode answer;
        try {
            answer = JSON.readTree(json);
        } catch (Exception e) {
            throw new IllegalStateException("a finished answer is JSON the dialect parsed", e);
        }
        String object = chat ? "chat.completion.chunk" : "text_completion";
        StringBuilder out = new StringBuilder(json.length() + 128);
        ObjectNode chunk = head(answer, object);
        ArrayNode choices = chunk.putArray("choices");
        for (JsonNode c : answer.path("choices")) {
            ObjectNode choice = choices.addObject();
            choice.set("index", value(c.get("index")));
            if (chat) {
                ObjectNode delta = choice.putObject("delta");
                delta.put("role", "assistant");
                delta.set("content", value(c.path("message").get("content")));
            } else {
                choice.set("text", value(c.get("text")));
            }
            choice.set("logprobs", value(c.get("logprobs")));
            choice.set("finish_reason", value(c.get("finish_reason")));
        }
        out.append("data: ").append(chunk).append("\n\n");
        if (usage && answer.has("usage")) {
            ObjectNode last = head(answer, object);
            last.putArray("choices");
            last.set("usage", answer.get("usage"));
            out.append("data: ").append(last).append("\n\n");
        }
        return out.append("data: [DONE]\n\n").toString();
    }

    private static ObjectNode head(JsonNode answer, String object) {
        ObjectNode o = JSON.createObjectNode();
        o.set("id", value(answer.get("id")));
        o.put("object", object);
        o.set("created", value(answer.get("created")));
        o.set("model", value(answer.get("model")));
        return o;
    }

    /** A member's value, JSON null when the answer lacks it. */
    private static JsonNode value(JsonNode n) {
        return n == null ? com.fasterxml.jackson.databind.node.NullNode.instance : n;
    }
}
