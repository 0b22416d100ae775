package io.kvgate.tools.cli;

import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;

/**
 * {@code ./kvgate ctl}: the operator's CLI over a running gateway's admin API ({@code admin_listen}). Prints the
 * JSON answer; exits 0 on 2xx, 1 on an error answer, 2 on usage errors, 3 when the gateway cannot be reached.
 */
public final class ControlCommand {
    static final String USAGE = """
        usage: ./kvgate ctl [--admin URL] [--token T] <command>
          --admin URL          admin API base (default http://127.0.0.1:8081, or $KVGATE_ADMIN)
          --token T            admin token when admin_token is configured (or $KVGATE_ADMIN_TOKEN)
        commands:
          endpoints            health, breaker, load and counters of every endpoint
          inventory            KV inventory: blocks per endpoint, subscriber state per DP rank
          lookup  [FILE|-]     cached prefix per endpoint for a chat/completions body (or {"model":..,"prompt_token_ids":[..]})
          explain [FILE|-]     the routing decision for a body, without sending it
          config               the applied configuration
          apply FILE           validate a YAML configuration and swap it in without dropping traffic
          parity [RULE]        probe each KV endpoint: do the engine's published block keys equal the gateway's?
          drain                report draining on /health (before a restart)
        """;

    private ControlCommand() {}

    public static int run(String[] args) {
        String admin = System.getenv().getOrDefault("KVGATE_ADMIN", "http://127.0.0.1:8081");
        String token = System.getenv("KVGATE_ADMIN_TOKEN");
        int i = 0;
        while (i < args.length && args[i].startsWith("--")) {
            switch (args[i]) {
                case "--admin" -> admin = args.length > i + 1 ? args[++i] : admin;
                case "--token" -> token = args.length > i + 1 ? args[++i] : token;
                case "--help" -> {
                    System.out.print(USAGE);
                    return 0;
                }
                default -> {
                    System.err.println("ctl: unknown option '" + args[i] + "'\n" + USAGE);
                    return 2;
                }
            }
            i++;
        }
        if (i >= args.length) {
            System.err.print(USAGE);
            return 2;
        }
        String cmd = args[i];
        String arg = i + 1 < args.length ? args[i + 1] : null;
        try {
            return switch (cmd) {
                case "endpoints" -> call(admin, token, "GET", "/admin/v1/endpoints", null);
                case "inventory" -> call(admin, token, "GET", "/admin/v1/inventory", null);
                case "config" -> call(admin, token, "GET", "/admin/v1/config", null);
                case "drain" -> call(admin, token, "POST", "/admin/v1/drain", "");
                case "parity" -> call(admin, token, "POST", "/admin/v1/parity" + (arg == null ? ""
                    : "?rule=" + java.net.URLEncoder.encode(arg, java.nio.charset.StandardCharsets.UTF_8)), "");
                case "lookup" -> call(admin, token, "POST", "/admin/v1/lookup", body(arg));
                case "explain" -> call(admin, token, "POST", "/admin/v1/explain", body(arg));
                case "apply" -> {
                    if (arg == null) {
                        System.err.println("ctl apply: a YAML configuration FILE is required");
                        yield 2;
                    }
                    yield call(admin, token, "PUT", "/admin/v1/config", Files.readString(Path.of(arg)));
                }
                default -> {
                    System.err.println("ctl: unknown command '" + cmd + "'\n" + USAGE);
                    yield 2;
                }
            };
        } catch (IOException e) {
            System.err.println("ctl: cannot reach the admin API at " + admin + ": " + e.getMessage());
            return 3;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return 3;
        }
    }

    private static String body(String arg) throws IOException {
        if (arg == null || arg.equals("-")) {
            InputStream in = System.in;
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
        return Files.readString(Path.of(arg));
    }

    private static int call(String admin, String token, String method, String path, String body)
        throws IOException, InterruptedException {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(admin + path)).timeout(Duration.ofSeconds(30))
            .method(method, body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body));
        if (token != null) {
            b.header("Authorization", "Bearer " + token);
        }
        if (body != null) {
            b.header("Content-Type", path.endsWith("/config") ? "application/yaml" : "application/json");
        }
        HttpResponse<String> r = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build()
            .send(b.build(), HttpResponse.BodyHandlers.ofString());
        (r.statusCode() / 100 == 2 ? System.out : System.err).println(r.body());
        return r.statusCode() / 100 == 2 ? 0 : 1;
    }
}
