package io.kvgate.dataplane.relay;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.dataplane.engine.EngineProfile;
import io.kvgate.dataplane.engine.EngineProfiles;
import io.kvgate.dataplane.openai.OpenAiErrors;

/**
 * Engine error bodies come in two shapes: the OpenAI one ({@code {"error":{…}}}, newer vLLM) and the older flat one
 * ({@code {"object":"error","message":…}}, older vLLM and SGLang). Clients get the OpenAI shape with the engine's
 * message, whatever the engine sent — with the flat shape the official Node SDK reports only "status code (no body)".
 */
public final class EngineErrors {
    private static final ObjectMapper JSON = new ObjectMapper();

    private EngineErrors() {}

    /** As {@link #toOpenAiShape(String, int, boolean)} for a chat request. */
    public static String toOpenAiShape(String body, int status) {
        return toOpenAiShape(body, status, true);
    }

    /**
     * The engine's error answer {@code body} (sent with {@code status}) in the gateway's one vocabulary: the engine's
     * message, {@code type} from the status ({@link OpenAiErrors#typeFor}), the engine's {@code param} when it named
     * one, and a string {@code code} (the engine's when it sent a string, else one recognised from the message:
     * {@link #codeFor}). FastAPI's {@code {"detail": …}} becomes the detail text itself (a 422's list of validation
     * errors: each {@code msg}, the {@code param} from its location).
     *
     * @param chat the request was {@code /v1/chat/completions} (a context overflow's {@code param} is then
     *             {@code messages}, else {@code prompt}, as OpenAI names it)
     */
    public static String toOpenAiShape(String body, int status, boolean chat) {
        JsonNode err = null;
        try {
            JsonNode n = JSON.readTree(body);
            if (n != null && n.isObject()) {
                JsonNode inner = n.get("error");
                if (inner != null && inner.isObject() && inner.has("message")) {
                    err = inner;
                } else if (n.has("message") && (n.path("object").asText("").equals("error") || n.has("type"))) {
                    err = n;
                } else if (inner != null && inner.isTextual()) {
                    return normalized(inner.asText(), null, null, status, chat);
                } else if (n.has("detail")) {
                    return fromDetail(n.get("detail"), status, chat);
                }
            }
        } catch (Exception ignored) {
            // Not JSON: wrap the text below.
        }
        if (err == null) {
            String text = body.isBlank() ? "The engine answered HTTP " + status + " with no body" : body.strip();
            return normalized(text, null, null, status, chat);
        }
        String message = err.path("message").isTextual() ? err.get("message").asText() : err.path("message").toString();
        String param = err.path("param").isTextual() ? err.get("param").asText() : null;
        String code = err.path("code").isTextual() ? err.get("code").asText() : null;
        return normalized(message, param, code, status, chat);
    }

    /**
     * An engine's in-stream error event's JSON (the payload of one {@code data:} line) in the vocabulary, or null
     * when the payload is not an error: {@code {"error":{…}}} (vLLM; SGLang nests its flat object the same way) or
     * a flat {@code {"object":"error",…}}. The 200 is frozen by then and the engines' numbers there disagree for the
     * same failure (vLLM 500 {@code InternalServerError}, SGLang 400 {@code BadRequestError}: it only catches
     * {@code ValueError}s), so {@code type} is always {@link OpenAiErrors#STREAM_ERROR_TYPE}, as for the gateway's own
     * mid-stream errors; the message, a string code and the param are the engine's.
     */
    public static String streamErrorToOpenAiShape(String payload, boolean chat) {
        JsonNode n;
        try {
            n = JSON.readTree(payload);
        } catch (Exception e) {
            return null;
        }
        if (n == null || !n.isObject()) {
            return null;
        }
        JsonNode err = n.get("error");
        if (err == null || err.isNull()) {
            err = n.path("object").asText("").equals("error") ? n : null;
        }
        if (err == null) {
            return null;
        }
        if (err.isTextual()) {
            return normalized(err.asText(), null, null, 502, chat);
        }
        String message = err.path("message").isTextual() ? err.get("message").asText() : err.toString();
        String param = err.path("param").isTextual() ? err.get("param").asText() : null;
        String code = err.path("code").isTextual() ? err.get("code").asText() : null;
        if (code == null) {
            code = codeFor(message, 400); // a recognisable overflow keeps its code, whatever number the engine sent
        }
        return normalized(message, param, code, 502, chat);
    }

    private static String fromDetail(JsonNode detail, int status, boolean chat) {
        if (detail.isTextual()) {
            return normalized(detail.asText(), null, null, status, chat);
        }
        if (detail.isArray() && !detail.isEmpty()) {
            // FastAPI's RequestValidationError: [{"loc":["body","max_tokens"],"msg":"…","type":"…"}, …]
            StringBuilder msg = new StringBuilder();
            String param = null;
            for (JsonNode d : detail) {
                if (!msg.isEmpty()) {
                    msg.append("; ");
                }
                msg.append(d.path("msg").isTextual() ? d.get("msg").asText() : d.toString());
                JsonNode loc = d.path("loc");
                if (param == null && loc.isArray() && loc.size() >= 2 && "body".equals(loc.get(0).asText())) {
                    param = loc.get(1).asText();
                }
            }
            return normalized(msg.toString(), param, null, status, chat);
        }
        return normalized(detail.toString(), null, null, status, chat);
    }

    private static String normalized(String message, String param, String code, int status, boolean chat) {
        String c = code != null ? code : codeFor(message, status);
        String p = param;
        if ("context_length_exceeded".equals(c)) {
            p = chat ? "messages" : "prompt"; // as OpenAI names it; vLLM says "max_tokens"/"input_tokens", SGLang nothing
        }
        return OpenAiErrors.json(message, OpenAiErrors.typeFor(status), p, c);
    }

    /**
     * The OpenAI code an engine message means, from the engines' own wording (vLLM a556f3f, SGLang 7d89325): a
     * context overflow in any of their phrasings is {@code context_length_exceeded}; a 404 naming a model that
     * does not exist is {@code model_not_found}. Null when nothing is recognised (the code is then unknown, not
     * guessed).
     */
    static String codeFor(String message, int status) {
        if (status == 400 && isContextOverflow(message)) {
            return "context_length_exceeded";
        }
        if (status == 404 && message.startsWith("The model ") && message.contains("does not exist")) {
            return "model_not_found";
        }
        return null;
    }

    /**
     * Whether {@code message} is any engine's context-overflow wording ({@link EngineProfile#statesContextOverflow}):
     * an error body does not say which engine wrote it.
     */
    private static boolean isContextOverflow(String message) {
        for (EngineProfile engine : EngineProfiles.ALL) {
            if (engine.statesContextOverflow(message)) {
                return true;
            }
        }
        return false;
    }

    /**
     * A P/D decode leg's JSON answer without the engines' transfer objects: vLLM's top-level {@code kv_transfer_params}
     * and TensorRT-LLM's {@code disaggregated_params} (top level or per choice). They name internal hosts, ports and
     * opaque KV state and must never reach a client. Bodies without them are returned unchanged (no re-serialization).
     */
    public static String withoutKvTransferParams(String body) {
        if (!body.contains("\"kv_transfer_params\"") && !body.contains("\"disaggregated_params\"")) {
            return body;
        }
        try {
            JsonNode n = JSON.readTree(body);
            if (n instanceof ObjectNode o) {
                o.remove("kv_transfer_params");
                o.remove("disaggregated_params");
                for (JsonNode choice : o.path("choices")) {
                    if (choice instanceof ObjectNode c) {
                        c.remove("disaggregated_params");
                    }
                }
                return JSON.writeValueAsString(o);
            }
        } catch (Exception ignored) {
            // Not JSON: nothing structured to strip.
        }
        return body;
    }
}
