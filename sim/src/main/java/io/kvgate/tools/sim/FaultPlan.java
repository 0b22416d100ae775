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
 * {"die_after_tokens": K, "count": N}                 close the connection once K tokens were generated (stream or not)
 * {"stall_after_tokens": K, "count": N}               after K tokens send nothing more, connection left open
 * {"error_after_tokens": K, "count": N}               after K tokens the dialect's in-stream error frame (then as above)
 * {"slow_first_token_ms": T, "count": N}              the first token T ms later than the latency model says
 *   (count -1: every request until cleared; the token faults take the first of them that is armed, in this order)
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
    int dieTokensCount;
    int dieAfterTokens;
    int stallTokensCount;
    int stallAfterTokens;
    int errorTokensCount;
    int errorAfterTokens;
    int slowFirstCount;
    long slowFirstTokenMs;
    boolean refuseConnections;
    boolean unhealthy;

    /** Applies an admin command; throws {@link SimError} naming the bad field. */
    void apply(JsonNode cmd) {
        if (!cmd.isObject()) {
            throw SimError.badRequest("faults: body must be a JSON object");
        }
        if (cmd.path("clear").asBoolean(false)) {
            failNext = dieCount = errorCount = hangNext = noDoneCount = 0;
            dieTokensCount = stallTokensCount = errorTokensCount = slowFirstCount = 0;
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
        if (cmd.has("die_after_tokens")) {
            dieAfterTokens = nonNegative(cmd, "die_after_tokens");
            dieTokensCount = count(cmd);
        }
        if (cmd.has("stall_after_tokens")) {
            stallAfterTokens = nonNegative(cmd, "stall_after_tokens");
            stallTokensCount = count(cmd);
        }
        if (cmd.has("error_after_tokens")) {
            errorAfterTokens = nonNegative(cmd, "error_after_tokens");
            errorTokensCount = count(cmd);
        }
        if (cmd.has("slow_first_token_ms")) {
            slowFirstTokenMs = nonNegative(cmd, "slow_first_token_ms");
            slowFirstCount = count(cmd);
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
        f.put("die_tokens_count", dieTokensCount);
        f.put("stall_tokens_count", stallTokensCount);
        f.put("error_tokens_count", errorTokensCount);
        f.put("slow_first_count", slowFirstCount);
        f.put("refuse_connections", refuseConnections);
        f.put("unhealthy", unhealthy);
        return f;
    }

    /** A token fault's {@code count}: how many requests it hits (default 1; -1 every request until cleared). */
    private static int count(JsonNode cmd) {
        if (!cmd.has("count")) {
            return 1;
        }
        JsonNode v = cmd.get("count");
        if (v.isIntegralNumber() && v.canConvertToInt() && v.asInt() == -1) {
            return -1;
        }
        return nonNegative(cmd, "count");
    }

    private static int nonNegative(JsonNode cmd, String field) {
        JsonNode v = cmd.get(field);
        if (!v.canConvertToInt() || !v.isIntegralNumber() || v.asInt() < 0) {
            throw SimError.badRequest("faults: " + field + "=" + v + " must be a non-negative integer", field);
        }
        return v.asInt();
    }
}
