package io.kvgate.tools.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.control.ControlSocketLocation;
import io.kvgate.control.client.ControlClient;
import java.io.IOException;
import java.io.PrintStream;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;
import picocli.CommandLine;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Model.OptionSpec;
import picocli.CommandLine.Model.PositionalParamSpec;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.ParseResult;
import picocli.CommandLine.ScopeType;

/**
 * {@code ./kvgate ctl}: the operator's CLI over a running gateway. Talks to the control socket by default (no token:
 * the kernel tells the gateway who we are), or to the admin HTTP listener with {@code --admin URL --token T}.
 * Human-readable tables by default, the gateway's JSON with {@code --json}. Exit status: 0 done, 1 refused by the
 * gateway (the reason is printed) or, for {@code doctor}, a check that does not match, 2 usage error, 3 gateway
 * unreachable.
 */
public final class ControlCommand {
    static final String USAGE = """
        usage: ./kvgate ctl [--socket PATH | --admin URL [--token T]] [--json] <command> [args]
          --socket PATH        control socket (default $KVGATE_SOCKET, else the first that exists of
                               $RUNTIME_DIRECTORY/kvgate.sock, /run/kvgate/kvgate.sock,
                               $XDG_RUNTIME_DIR/kvgate/kvgate.sock, /tmp/kvgate-$UID/kvgate.sock)
          --admin URL          use the admin HTTP listener instead (or $KVGATE_ADMIN), e.g. http://127.0.0.1:8081
          --token T            admin token for --admin when admin_token is configured (or $KVGATE_ADMIN_TOKEN)
          --json               print the gateway's JSON instead of tables
        commands:
          status               configuration version and digest, drain state, what readiness waits for
          rules                each rule's effective settings: engine, policy, topology, hash, tokenizer, KV subscribers
          endpoints            health, drain, breaker, load and counters of every endpoint
          tenants              each tenant's usage on this replica against its limits (and this replica's share)
          drain [ENDPOINT]     ENDPOINT (id, host:port or url): no new requests, in-flight ones finish
                               (--migrate [--within MS]: its live streams move to other endpoints, those that
                               cannot finish within MS, default 2000, then end);
                               without ENDPOINT: the whole gateway refuses new requests (503) until undrain
          undrain [ENDPOINT]   undo drain
          weight ENDPOINT N    change an endpoint's weight live (a new configuration version)
          patch RULE k=v...    change rule tunables live, e.g. patch chat kv.load_cap_factor=1.2 (a new version)
          reload               re-read the gateway's --config file and apply it (as SIGHUP does)
          apply FILE           validate a YAML configuration and apply it
          check [FILE]         run every start-up check on FILE (default: the gateway's --config file); applies nothing
          diff [FILE]          what FILE (default: the --config file) would change against the running configuration
          config               the applied configuration as editable YAML (secrets shown as <redacted>)
          log-level LEVEL      error|warn|info|debug
          inventory            KV inventory: blocks per endpoint, subscriber state per DP rank
          lookup  [FILE|-]     cached prefix per endpoint for a chat/completions body
          explain [FILE|-]     the routing decision for a body, without sending it
          quality              routing-quality accounting per rule: prompt tokens reachable (held by any endpoint),
                               predicted (held by the chosen one) and observed (served from the engine's cache),
                               and every computed prompt token by cause (cold, load_bound, index_stale, ...)
          parity [RULE]        probe each KV endpoint: do the engine's published block keys equal the gateway's?
          doctor [RULE] [--timeout-ms N]
                               check what the gateway assumes about each engine (seed and hash, block size, DP ranks,
                               event topic, metrics, context length, routes) and print each mismatch with its fix;
                               exit 1 when something does not match
        """;
    private static final ObjectMapper JSON = new ObjectMapper();

    private ControlCommand() {}

    public static int run(String[] args) {
        return run(args, System.out, System.err);
    }

    /** The verbs, in USAGE's order: each a picocli subcommand taking free arguments, so completion knows them. */
    static final List<String> VERBS = List.of("status", "rules", "endpoints", "tenants", "drain", "undrain", "weight", "patch",
        "reload", "apply", "check", "diff", "config", "log-level", "inventory", "lookup", "explain", "quality", "parity", "doctor");

    /**
     * The ctl command line as picocli sees it: the connection options and {@code --json} are inherited by every verb,
     * so they go before or after it ({@code ctl rules --json} as {@code ctl --json rules}); {@code -h}/{@code --help}
     * anywhere prints USAGE. The verbs' own arguments stay free-form (parsed below, as before).
     */
    public static CommandSpec spec() {
        CommandSpec ctl = CommandSpec.create().name("ctl");
        ctl.addOption(inherited("--socket", "PATH", "control socket"));
        ctl.addOption(inherited("--admin", "URL", "admin HTTP listener instead of the socket"));
        ctl.addOption(inherited("--token", "T", "admin token for --admin"));
        ctl.addOption(OptionSpec.builder("--json").arity("0").type(boolean.class).scopeType(ScopeType.INHERIT)
            .description("print the gateway's JSON").build());
        ctl.addOption(OptionSpec.builder("-h", "--help").usageHelp(true).arity("0").type(boolean.class)
            .scopeType(ScopeType.INHERIT).description("show this help").build());
        for (String verb : VERBS) {
            CommandSpec v = CommandSpec.create().name(verb);
            v.addPositional(PositionalParamSpec.builder().paramLabel("ARG").arity("0..*").type(List.class)
                .auxiliaryTypes(String.class).build());
            if (verb.equals("drain")) {
                v.addOption(OptionSpec.builder("--migrate").arity("0").type(boolean.class)
                    .description("ENDPOINT's live streams move to other endpoints (mid-stream failover)").build());
                v.addOption(OptionSpec.builder("--within").paramLabel("MS").type(String.class)
                    .description("with --migrate: streams that cannot move may finish this long (default 2000)").build());
            }
            if (verb.equals("doctor")) {
                v.addOption(OptionSpec.builder("--timeout-ms").paramLabel("N").type(String.class)
                    .description("how long the parity probe waits for the engines' events").build());
            }
            ctl.addSubcommand(verb, v);
        }
        return ctl;
    }

    private static OptionSpec inherited(String name, String label, String description) {
        return OptionSpec.builder(name).paramLabel(label).type(String.class).scopeType(ScopeType.INHERIT)
            .description(description).build();
    }

    static int run(String[] args, PrintStream out, PrintStream err) {
        ParseResult parsed;
        try {
            parsed = new CommandLine(spec()).setExpandAtFiles(false).parseArgs(args);
        } catch (ParameterException e) {
            err.println("ctl: " + e.getMessage() + "\n" + USAGE);
            return 2;
        }
        List<ParseResult> chain = new ArrayList<>();
        for (ParseResult r = parsed; r != null; r = r.subcommand()) {
            chain.add(r);
        }
        if (chain.stream().anyMatch(ParseResult::isUsageHelpRequested)) {
            out.print(USAGE);
            return 0;
        }
        if (chain.size() < 2) {
            err.print(USAGE);
            return 2;
        }
        String socket = option(chain, "--socket");
        String admin = firstNonNull(option(chain, "--admin"), System.getenv("KVGATE_ADMIN"));
        String token = firstNonNull(option(chain, "--token"), System.getenv("KVGATE_ADMIN_TOKEN"));
        boolean json = chain.stream().anyMatch(r -> r.hasMatchedOption("--json"));
        ControlClient client = socket == null && admin != null ? ControlClient.http(admin, token)
            : ControlClient.socket(Path.of(socket != null ? socket : defaultSocket()));
        ParseResult verb = chain.getLast();
        String cmd = verb.commandSpec().name();
        List<String> rest = verb.hasMatchedPositional(0) ? verb.matchedPositional(0).getValue() : List.of();
        String arg = rest.isEmpty() ? null : rest.get(0);
        try {
            Call c = switch (cmd) {
                case "status" -> new Call("GET", "/control/v1/status", null, ControlCommand::printStatus);
                case "rules" -> new Call("GET", "/control/v1/rules", null, ControlCommand::printRules);
                case "endpoints" -> new Call("GET", "/admin/v1/endpoints", null, ControlCommand::printEndpoints);
                case "tenants" -> new Call("GET", "/control/v1/tenants", null, ControlCommand::printTenants);
                case "drain", "undrain" -> {
                    boolean migrate = verb.hasMatchedOption("--migrate");
                    String within = verb.hasMatchedOption("--within") ? verb.matchedOptionValue("--within", "") : null;
                    if ((migrate || within != null) && arg == null) {
                        yield usage(err, "ctl drain ENDPOINT --migrate [--within MS] (an endpoint's streams move; the gateway's cannot)");
                    }
                    if (within != null && !migrate) {
                        yield usage(err, "ctl drain ENDPOINT --migrate --within MS (--within comes with --migrate)");
                    }
                    String query = migrate ? "?migrate=true" + (within == null ? "" : "&within=" + enc(within)) : "";
                    yield arg == null
                        ? new Call("POST", "/control/v1/" + cmd, "", ControlCommand::printDrain)
                        : new Call("POST", "/control/v1/endpoints/" + enc(arg) + "/" + cmd + query, "", ControlCommand::printDrain);
                }
                case "weight" -> {
                    if (rest.size() != 2) {
                        yield usage(err, "ctl weight ENDPOINT N");
                    }
                    yield new Call("POST", "/control/v1/endpoints/" + enc(arg) + "/weight", "{\"weight\":" + JSON.writeValueAsString(rest.get(1)) + "}",
                        ControlCommand::printOutcome);
                }
                case "patch" -> {
                    if (rest.size() < 2) {
                        yield usage(err, "ctl patch RULE key=value [key=value...]");
                    }
                    ObjectNode body = JSON.createObjectNode();
                    for (String kv : rest.subList(1, rest.size())) {
                        int eq = kv.indexOf('=');
                        if (eq <= 0) {
                            yield usage(err, "ctl patch: '" + kv + "' is not key=value");
                        }
                        body.set(kv.substring(0, eq), scalar(kv.substring(eq + 1)));
                    }
                    yield new Call("PATCH", "/control/v1/rules/" + enc(arg), body.toString(), ControlCommand::printOutcome);
                }
                case "reload" -> new Call("POST", "/control/v1/reload", "", ControlCommand::printOutcome);
                case "apply" -> arg == null ? usage(err, "ctl apply FILE")
                    : new Call("PUT", "/admin/v1/config", Files.readString(Path.of(arg)), ControlCommand::printOutcome);
                case "check" -> new Call("POST", "/control/v1/config/check", arg == null ? "" : Files.readString(Path.of(arg)),
                    ControlCommand::printCheck);
                case "diff" -> new Call("POST", "/control/v1/config/diff", arg == null ? "" : Files.readString(Path.of(arg)),
                    ControlCommand::printDiff);
                case "config" -> new Call("GET", "/admin/v1/config", null, (o, b) -> o.print(b));
                case "log-level" -> arg == null ? new Call("GET", "/control/v1/log-level", null, null)
                    : new Call("PUT", "/control/v1/log-level", "{\"level\":" + JSON.writeValueAsString(arg) + "}", null);
                case "inventory" -> new Call("GET", "/admin/v1/inventory", null, null);
                case "parity" -> new Call("POST", "/admin/v1/parity" + (arg == null ? "" : "?rule=" + enc(arg)), "", null);
                case "lookup" -> new Call("POST", "/admin/v1/lookup", body(arg), null);
                case "explain" -> new Call("POST", "/admin/v1/explain", body(arg), null);
                case "quality" -> new Call("GET", "/control/v1/quality", null, QualityCommand::print);
                case "doctor" -> {
                    String path = DoctorCommand.path(rest, verb.matchedOptionValue("--timeout-ms", null), err);
                    yield path == null ? null : new Call("GET", path, null, DoctorCommand::print);
                }
                default -> throw new IllegalStateException("verb " + cmd + " is in VERBS but not handled");
            };
            if (c == null) {
                return 2;
            }
            ControlClient.Response r = client.send(c.method, c.path, c.body);
            if (!r.ok()) {
                printRefusal(err, r);
                return 1;
            }
            if (json || c.table == null) {
                out.println(r.body().strip());
            } else {
                c.table.print(out, r.body());
            }
            return cmd.equals("doctor") ? DoctorCommand.exitStatus(r.body()) : 0;
        } catch (IOException e) {
            String msg = String.valueOf(e.getMessage());
            err.println("ctl: cannot reach the " + client.target() + ": " + msg
                + (msg.contains("Permission denied") ? " (the socket is owner-only: run ctl as the gateway's user; other uids"
                    + " also need control_allowed_uids and access to the socket file)"
                    : socket != null || admin == null ? " (is the gateway running? see --socket / --admin)" : ""));
            return 3;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return 3;
        }
    }

    /**
     * Where {@code serve} puts its socket when {@code control_socket} is not set: {@code $KVGATE_SOCKET}, else the
     * first existing socket of {@link ControlSocketLocation}'s list (the one serve binds in), else the list's first
     * entry, so the "cannot reach" message names where a service's socket would be.
     */
    static String defaultSocket() {
        return defaultSocket(System.getenv(), ControlSocketLocation.currentUid(), Files::exists);
    }

    static String defaultSocket(Map<String, String> env, int uid, Predicate<Path> exists) {
        String explicit = env.get("KVGATE_SOCKET");
        if (explicit != null && !explicit.isBlank()) {
            return explicit;
        }
        return ControlSocketLocation.forClient(env, uid, exists)
            .orElse(ControlSocketLocation.candidates(env, uid).getFirst()).toString();
    }

    /** An inherited option's value, wherever on the line it was given (the last one given wins, as before). */
    private static String option(List<ParseResult> chain, String name) {
        String value = null;
        for (ParseResult r : chain) {
            if (r.hasMatchedOption(name)) {
                value = r.matchedOptionValue(name, null);
            }
        }
        return value;
    }

    private static String firstNonNull(String a, String b) {
        return a != null ? a : b;
    }

    @FunctionalInterface
    interface Table {
        void print(PrintStream out, String body) throws IOException;
    }

    private record Call(String method, String path, String body, Table table) {}

    private static Call usage(PrintStream err, String msg) {
        err.println("usage: " + msg);
        return null;
    }

    private static String enc(String s) {
        return URLEncoder.encode(s, StandardCharsets.UTF_8);
    }

    /** A command-line value as JSON: numbers and booleans typed, anything else a string. */
    static JsonNode scalar(String v) {
        if (v.equals("true") || v.equals("false")) {
            return JSON.getNodeFactory().booleanNode(Boolean.parseBoolean(v));
        }
        try {
            return JSON.getNodeFactory().numberNode(Long.parseLong(v));
        } catch (NumberFormatException e) {
            // not an integer
        }
        try {
            double d = Double.parseDouble(v);
            if (!Double.isNaN(d) && !Double.isInfinite(d)) {
                return JSON.getNodeFactory().numberNode(d);
            }
        } catch (NumberFormatException e) {
            // a string
        }
        return JSON.getNodeFactory().textNode(v);
    }

    private static String body(String arg) throws IOException {
        if (arg == null || arg.equals("-")) {
            return new String(System.in.readAllBytes(), StandardCharsets.UTF_8);
        }
        return Files.readString(Path.of(arg));
    }

    static void printRefusal(PrintStream err, ControlClient.Response r) {
        try {
            JsonNode e = JSON.readTree(r.body()).path("error");
            String message = e.path("message").asText(r.body());
            JsonNode problems = e.path("problems");
            boolean oneProblemIsTheMessage = problems.size() == 1 && message.endsWith(problems.get(0).asText());
            err.println("refused (" + r.status() + "): " + (problems.size() > 1 ? problems.size() + " problems" : message));
            if (!oneProblemIsTheMessage && problems.size() > 0) {
                for (JsonNode p : problems) {
                    err.println("  - " + p.asText());
                }
            }
            for (JsonNode p : e.path("restart_only")) {
                err.println("  restart-only: " + p.asText());
            }
        } catch (IOException ex) {
            err.println("refused (" + r.status() + "): " + r.body());
        }
    }

    private static void printOutcome(PrintStream out, String body) throws IOException {
        JsonNode n = JSON.readTree(body);
        if (n.has("drained")) {
            out.println(body);
            return;
        }
        out.println(n.path("applied").asBoolean() ? "applied: configuration version " + n.path("version").asLong()
            : "unchanged: configuration version " + n.path("version").asLong() + " already in effect");
        for (JsonNode c : n.path("changes")) {
            out.println("  " + c.asText());
        }
    }

    private static void printDrain(PrintStream out, String body) throws IOException {
        JsonNode n = JSON.readTree(body);
        if (n.has("endpoint")) {
            out.println("endpoint " + n.path("endpoint").asText() + (n.path("drained").asBoolean()
                ? " drained: no new requests, " + n.path("outstanding").asInt() + " in flight "
                    + (n.path("migrate").asBoolean() ? "move to other endpoints (those that cannot finish within "
                        + n.path("within_ms").asLong() + " ms)" : "finish") : " undrained: takes requests again"));
        } else {
            out.println(n.path("draining").asBoolean() ? "gateway draining: new requests are refused (503); undo with ctl undrain"
                : "gateway accepting requests");
        }
    }

    private static void printCheck(PrintStream out, String body) throws IOException {
        JsonNode n = JSON.readTree(body);
        out.println("configuration OK: " + n.path("rules").asInt() + " rule(s), digest " + n.path("digest").asText());
        for (JsonNode c : n.path("restart_only")) {
            out.println("  needs a restart to change: " + c.asText());
        }
    }

    private static void printDiff(PrintStream out, String body) throws IOException {
        JsonNode n = JSON.readTree(body);
        if (n.path("changes").isEmpty()) {
            out.println("no change against configuration version " + n.path("version").asLong());
        }
        for (JsonNode c : n.path("changes")) {
            out.println(c.asText());
        }
        for (JsonNode c : n.path("restart_only")) {
            out.println("restart-only (a reload would be refused): " + c.asText());
        }
    }

    private static void printStatus(PrintStream out, String body) throws IOException {
        JsonNode n = JSON.readTree(body);
        out.println("configuration  version " + n.path("config_version").asLong() + ", digest " + n.path("config_digest").asText()
            + (n.path("config_file").isTextual() ? ", file " + n.path("config_file").asText() : ""));
        out.println("draining       " + n.path("draining").asBoolean());
        out.println("log level      " + n.path("log_level").asText());
        JsonNode v = n.path("version");
        if (!v.isMissingNode()) { // a gateway older than this ctl has no version in its status
            out.println("version        kvgate " + v.path("version").asText() + " (commit " + v.path("commit").asText()
                + ", Java " + v.path("java").asText() + ")");
        }
        JsonNode r = n.path("readiness");
        if (!r.isMissingNode()) {
            out.println("ready          " + r.path("ready").asBoolean());
            for (JsonNode w : r.path("waiting_for")) {
                out.println("  waiting for: " + w.asText());
            }
        }
    }

    private static void printRules(PrintStream out, String body) throws IOException {
        JsonNode n = JSON.readTree(body);
        List<String[]> rows = new ArrayList<>();
        rows.add(new String[] {"RULE", "MODELS", "ENGINE", "POLICY", "TOPOLOGY", "HASH", "BLOCK", "SEED", "TOKENIZER", "TEMPLATE", "KV SUBS"});
        for (JsonNode r : n.path("rules")) {
            JsonNode t = r.path("topology");
            String topo = t.path("kind").asText().equals("prefill_decode")
                ? "P/D " + t.path("prefill").asInt() + "+" + t.path("decode").asInt() : "pool of " + t.path("endpoints").asInt();
            JsonNode tok = r.path("tokenizer");
            List<String> models = new ArrayList<>();
            r.path("models").forEach(m -> models.add(m.asText()));
            rows.add(new String[] {r.path("name").asText(), String.join(",", models), r.path("engine").asText(), r.path("policy").asText(),
                topo, r.path("hash_algo").asText(), r.path("block_size").asText(), r.path("hash_seed").asText(),
                tok.path("dir").isTextual() ? Path.of(tok.path("dir").asText()).getFileName() + " " + shortHash(tok.path("tokenizer_sha256")) : "-",
                r.path("chat_template").isObject()
                    ? r.path("chat_template").path("source").asText() + " " + shortHash(r.path("chat_template").path("sha256"))
                    : shortHash(tok.path("chat_template_sha256")),
                r.path("kv_subscribers").path("connected").asInt() + "/" + r.path("kv_subscribers").path("expected").asInt()});
        }
        printTable(out, rows);
        out.println("(config version " + n.path("config_version").asLong() + "; ctl --json rules shows every setting)");
    }

    private static String shortHash(JsonNode h) {
        return h.isTextual() && h.asText().length() >= 12 ? h.asText().substring(0, 12) : "-";
    }

    private static void printEndpoints(PrintStream out, String body) throws IOException {
        JsonNode n = JSON.readTree(body);
        List<String[]> rows = new ArrayList<>();
        rows.add(new String[] {"RULE", "ENDPOINT", "ID", "ROLE", "WEIGHT", "HEALTHY", "DRAINED", "BREAKER", "IN FLIGHT", "ROUTED", "FAILURES"});
        for (JsonNode r : n.path("rules")) {
            for (JsonNode e : r.path("endpoints")) {
                rows.add(new String[] {r.path("name").asText(), e.path("url").asText(), e.path("id").asText(),
                    e.path("role").asText("-"), e.path("weight").asText(), e.path("healthy").asText(), e.path("drained").asText(),
                    e.path("breaker").asText(), e.path("outstanding").asText(), e.path("routed").asText(), e.path("failures").asText()});
            }
        }
        printTable(out, rows);
    }

    /**
     * One row per tenant: each limit as {@code used/share} of this replica (the fleet-wide limit in parentheses when
     * the replica enforces a share), requests in flight, answers and 429s so far. Under a shared {@code rate_limit_store} each
     * limited tenant also gets a {@code shared} row: its usage in the store over every replica against the whole
     * limit (what the replicas enforce then; the tenant's own row is what {@code on_failure: local} held here), or why
     * the store could not be read.
     */
    static void printTenants(PrintStream out, String body) throws IOException {
        JsonNode n = JSON.readTree(body);
        List<String[]> rows = new ArrayList<>();
        rows.add(new String[] {"TENANT", "REQ/MIN", "TOKENS/MIN", "TOKENS/DAY", "IN FLIGHT", "ANSWERED", "LIMITED"});
        String store = null;
        for (JsonNode t : n.path("tenants")) {
            JsonNode used = t.path("used");
            long answered = 0;
            for (JsonNode c : t.path("requests")) {
                answered += c.asLong();
            }
            long limited = 0;
            for (JsonNode c : t.path("limited")) {
                limited += c.asLong();
            }
            rows.add(new String[] {t.path("tenant").asText(),
                usedOf(used.path("requests_last_minute"), t, "requests_per_minute"),
                usedOf(used.path("tokens_last_minute"), t, "tokens_per_minute"),
                usedOf(used.path("tokens_last_day"), t, "tokens_per_day"),
                usedOf(used.path("in_flight"), t, "max_concurrent"), Long.toString(answered), Long.toString(limited)});
            JsonNode shared = t.path("shared");
            if (shared.isObject()) {
                store = shared.path("store").asText();
                rows.add(shared.has("error")
                    ? new String[] {"  shared", "unknown: " + shared.path("error").asText(), "", "", "", "", ""}
                    : new String[] {"  shared", sharedOf(shared, t, "requests_last_minute", "requests_per_minute"),
                        sharedOf(shared, t, "tokens_last_minute", "tokens_per_minute"),
                        sharedOf(shared, t, "tokens_last_day", "tokens_per_day"),
                        sharedOf(shared, t, "in_flight", "max_concurrent"), "", ""});
            }
        }
        printTable(out, rows);
        if (store != null) {
            out.println("shared: the tenant's usage in rate_limit_store " + store + " over every replica, against the whole"
                + " limit; the tenant's own row: this replica's counters (what on_failure: local held here)");
        }
    }

    private static String sharedOf(JsonNode shared, JsonNode tenant, String field, String limit) {
        JsonNode whole = tenant.path("limits").path(limit);
        return shared.path(field).asText("0") + (whole.isMissingNode() ? "" : "/" + whole.asText());
    }

    private static String usedOf(JsonNode used, JsonNode tenant, String limit) {
        JsonNode share = tenant.path("replica_share").path(limit);
        JsonNode whole = tenant.path("limits").path(limit);
        if (share.isMissingNode()) {
            return used.asText("0");
        }
        return used.asText("0") + "/" + share.asText() + (share.asLong() == whole.asLong() ? "" : " (" + whole.asText() + ")");
    }

    static void printTable(PrintStream out, List<String[]> rows) {
        int[] w = new int[rows.get(0).length];
        for (String[] row : rows) {
            for (int c = 0; c < row.length; c++) {
                w[c] = Math.max(w[c], row[c].length());
            }
        }
        for (String[] row : rows) {
            StringBuilder sb = new StringBuilder();
            for (int c = 0; c < row.length; c++) {
                sb.append(row[c]).append(" ".repeat(w[c] - row[c].length() + (c + 1 < row.length ? 2 : 0)));
            }
            out.println(sb.toString().stripTrailing());
        }
    }
}
