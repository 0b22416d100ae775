package io.kvgate.tools.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * {@code ./kvgate ctl quality}: the gateway's routing-quality accounting ({@code /control/v1/quality}) as two tables.
 * Per rule: the accounted requests, prompt tokens, and the reachable / predicted / observed tokens with their share of
 * the prompt (observed over reachable is what the router turned into hits of what it could have had); then each
 * rule's computed prompt tokens by cause with their share of the rule's losses. How to read them:
 * docs/routing.md, "Reading the accounting".
 */
final class QualityCommand {
    private static final ObjectMapper JSON = new ObjectMapper();

    private QualityCommand() {}

    static void print(PrintStream out, String body) throws IOException {
        JsonNode rules = JSON.readTree(body).path("rules");
        if (rules.isEmpty()) {
            out.println("no accounted requests yet (an answer is accounted when it reports usage.prompt_tokens_details"
                + ".cached_tokens; vLLM: --enable-prompt-tokens-details)");
            return;
        }
        List<String[]> rows = new ArrayList<>();
        rows.add(new String[] {"RULE", "REQUESTS", "UNREPORTED", "PROMPT", "REACHABLE", "PREDICTED", "OBSERVED",
            "OBSERVED/REACHABLE"});
        List<String[]> losses = new ArrayList<>();
        losses.add(new String[] {"RULE", "CAUSE", "TOKENS", "SHARE"});
        for (Map.Entry<String, JsonNode> e : rules.properties()) {
            JsonNode r = e.getValue();
            JsonNode t = r.path("tokens");
            JsonNode ratio = r.path("hit_ratio");
            rows.add(new String[] {e.getKey(), r.path("requests").asText(), r.path("unreported_requests").asText(),
                t.path("prompt").asText(), withRatio(t, ratio, "reachable"), withRatio(t, ratio, "predicted"),
                withRatio(t, ratio, "observed"), percent(ratio.path("observed_of_reachable").asDouble())});
            long lost = 0;
            for (JsonNode v : r.path("loss")) {
                lost += v.asLong();
            }
            for (Map.Entry<String, JsonNode> cause : r.path("loss").properties()) {
                long n = cause.getValue().asLong();
                if (n > 0) {
                    losses.add(new String[] {e.getKey(), cause.getKey(), Long.toString(n), percent((double) n / lost)});
                }
            }
        }
        ControlCommand.printTable(out, rows);
        out.println();
        if (losses.size() == 1) {
            out.println("no prompt token was computed: every one was served from the engines' caches");
            return;
        }
        ControlCommand.printTable(out, losses);
        out.println("(cold: no endpoint held them; speculative, index_stale: the chosen endpoint was expected to;"
            + " unknown: no index lookup; any other cause: an endpoint held them and the router chose another)");
    }

    private static String withRatio(JsonNode tokens, JsonNode ratio, String kind) {
        return tokens.path(kind).asText() + " (" + percent(ratio.path(kind).asDouble()) + ")";
    }

    private static String percent(double share) {
        return String.format(Locale.ROOT, "%.1f%%", 100 * share);
    }
}
