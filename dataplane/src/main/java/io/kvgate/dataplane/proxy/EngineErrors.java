package io.kvgate.dataplane.proxy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.dataplane.openai.OpenAiErrors;

/**
 * Engine error bodies come in two shapes: the OpenAI one ({@code {"error":{…}}}, newer vLLM) and the older flat one
 * ({@code {"object":"error","message":…}}, older vLLM and SGLang). Clients get the OpenAI shape with the engine's
 * message, whatever the engine sent — with the flat shape the official Node SDK reports only "status code (no body)".
 */
public final class EngineErrors {
    private static final ObjectMapper JSON = new ObjectMapper();

    private EngineErrors() {}

    public static String toOpenAiShape(String body, int status) {
        try {
            JsonNode n = JSON.readTree(body);
            if (n != null && n.isObject()) {
                JsonNode err = n.get("error");
                if (err != null && err.isObject() && err.has("message")) {
                    return normalizeInner((ObjectNode) err, status);
                }
                if (n.has("message") && (n.path("object").asText("").equals("error") || n.has("type"))) {
                    return normalizeInner((ObjectNode) n, status);
                }
                if (err != null && err.isTextual()) {
                    return OpenAiErrors.json(err.asText(), OpenAiErrors.typeFor(status), null, status);
                }
                if (n.has("detail")) {
                    return OpenAiErrors.json(n.get("detail").toString(), OpenAiErrors.typeFor(status), null, status);
                }
            }
        } catch (Exception ignored) {
            // Not JSON: wrap the text below.
        }
        String text = body.isBlank() ? "The engine answered HTTP " + status + " with no body" : body.strip();
        return OpenAiErrors.json(text, OpenAiErrors.typeFor(status), null, status);
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

    private static String normalizeInner(ObjectNode e, int status) {
        String message = e.path("message").isTextual() ? e.get("message").asText() : e.path("message").toString();
        String type = e.path("type").isTextual() ? e.get("type").asText() : OpenAiErrors.typeFor(status);
        String param = e.path("param").isTextual() ? e.get("param").asText() : null;
        JsonNode code = e.get("code");
        Object c = code == null || code.isNull() ? null : code.isNumber() ? code.numberValue() : code.asText();
        return OpenAiErrors.json(message, type, param, c);
    }
}
