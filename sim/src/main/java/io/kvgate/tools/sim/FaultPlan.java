package io.kvgate.tools.sim;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * Injected faults, set through {@code POST /sim/faults}. Event-loop confined (single writer: the admin route and
 * the request handler both run on the engine loop). Each "next N" fault is consumed by generation requests
 * ({@code /v1/chat/completions}, {@code /v1/completions}) in arrival order.
 * <pre>
 * {"fail_next": N, "status": 500, "message": "..."}   answer N requests with this error (dialect error shape)
 * {"die_after_chunks": K, "count": N}                 close the connection after K SSE events (non-stream: no answer)
 * {"error_after_chunks": K, "count": N}               after K SSE events send the dialect's error frame and [DONE]
 * {"end_without_done": N}                             end the next N streams cleanly but without data: [DONE]
 * {"hang_next": N}                                    accept N requests and never answer
 * {"refuse_connections": true|false}                  close the listening socket until cleared
 * {"unhealthy": true|false}                           /health answers 503 (vLLM: engine core dead)
 * {"clear": true}                                     remove every fault
 * </pre>
 */
final class FaultPlan {
    int failNext;
    int failStatus = 500;
    String failMessage = "simulated engine failure";
    int dieCount;
    int dieAfterChunks;
    int errorCount;
    int errorAfterChunks;
    int hangNext;
    int noDoneCount;
    boolean refuseConnections;
    boolean unhealthy;

    /** Applies an admin command; throws {@link SimError} naming the bad field. */
    void apply(JsonNode cmd) {
        if (!cmd.isObject()) {
            throw SimError.badRequest("faults: body must be a JSON object");
        }
        if (cmd.path("clear").asBoolean(false)) {
            failNext = dieCount = errorCount = hangNext = noDoneCount = 0;
            refuseConnections = false;
            unhealthy = false;
        }
        if (cmd.has("fail_next")) {
            failNext = nonNegative(cmd, "fail_next");
            failStatus = cmd.has("status") ? nonNegative(cmd, "status") : 500;
            if (failStatus < 400 || failStatus > 599) {
                throw SimError.badRequest("faults: status=" + failStatus + " must be in 400..599", "status");
            }
            failMessage = cmd.path("message").asText("simulated engine failure");
        }
        if (cmd.has("die_after_chunks")) {
            dieAfterChunks = nonNegative(cmd, "die_after_chunks");
            dieCount = cmd.has("count") ? nonNegative(cmd, "count") : 1;
        }
        if (cmd.has("error_after_chunks")) {
            errorAfterChunks = nonNegative(cmd, "error_after_chunks");
            errorCount = cmd.has("count") ? nonNegative(cmd, "count") : 1;
        }
        if (cmd.has("end_without_done")) {
            noDoneCount = nonNegative(cmd, "end_without_done");
        }
        if (cmd.has("hang_next")) {
            hangNext = nonNegative(cmd, "hang_next");
        }
        if (cmd.has("refuse_connections")) {
            refuseConnections = cmd.get("refuse_connections").asBoolean();
        }
        if (cmd.has("unhealthy")) {
            unhealthy = cmd.get("unhealthy").asBoolean();
        }
    }

    com.fasterxml.jackson.databind.node.ObjectNode toJson() {
        var f = com.fasterxml.jackson.databind.node.JsonNodeFactory.instance.objectNode();
        f.put("fail_next", failNext);
        f.put("die_count", dieCount);
        f.put("error_count", errorCount);
        f.put("end_without_done", noDoneCount);
        f.put("hang_next", hangNext);
        f.put("refuse_connections", refuseConnections);
        f.put("unhealthy", unhealthy);
        return f;
    }

    private static int nonNegative(JsonNode cmd, String field) {
        JsonNode v = cmd.get(field);
        if (!v.canConvertToInt() || !v.isIntegralNumber() || v.asInt() < 0) {
            throw SimError.badRequest("faults: " + field + "=" + v + " must be a non-negative integer", field);
        }
        return v.asInt();
    }
}
