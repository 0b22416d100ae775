package io.kvgate.epp.check;

import io.grpc.StatusRuntimeException;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.health.v1.HealthGrpc;
import io.kvgate.epp.protocol.EppProtocol;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * {@code ./kvgate epp-check --target HOST:PORT --model M}: drives an endpoint picker the way Envoy does
 * ({@link EnvoyEmulator}) and reports each requirement of the Inference Extension's protocol (proposal 004) as PASS or
 * FAIL: the gRPC health names, the decision's header and metadata, the order of answers per direction, the body echo
 * and its piece size, request and response trailers, the subset hint (a member honoured, none eligible and an empty
 * hint answered 503), the served-endpoint report, refusals as ImmediateResponse, and a clean end of every stream. The
 * engine behind the picker is not contacted: every response comes from a scripted answer, so the check needs nothing
 * but the picker. Exit status 0 when everything passes, 1 on any failure, 2 on a wrong command line.
 */
public final class EppCheck {
    private EppCheck() {}

    /** One requirement's verdict. */
    public record Result(String name, boolean passed, String detail) {
        @Override
        public String toString() {
            return (passed ? "PASS" : "FAIL") + "  " + name + (detail.isEmpty() ? "" : "  " + detail);
        }
    }

    /** What to send: the target, the model its rules serve, the path, extra headers (an API key). */
    public record Target(String host, int port, String model, String path, Map<String, String> headers, long timeoutMs,
                         EnvoyEmulator.ClientTls tls) {
        /** A cleartext (HTTP/2 prior knowledge) target: the shape before {@code --tls} existed. */
        public Target(String host, int port, String model, String path, Map<String, String> headers, long timeoutMs) {
            this(host, port, model, path, headers, timeoutMs, null);
        }

        /** The Envoy emulator that talks to this target (TLS or cleartext as the target says). */
        EnvoyEmulator envoy() {
            return new EnvoyEmulator(host, port, timeoutMs, tls);
        }
    }

    public static int run(String[] args) {
        return run(args, System.out, System.err);
    }

    public static int run(String[] args, PrintStream out, PrintStream err) {
        String target = null;
        String model = null;
        String path = "/v1/chat/completions";
        long timeoutMs = 10_000;
        Map<String, String> headers = new LinkedHashMap<>();
        boolean load = false;
        List<String> loadArgs = new ArrayList<>();
        boolean tls = false;
        String caFile = null;
        String certFile = null;
        String keyFile = null;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            String v = i + 1 < args.length ? args[i + 1] : null;
            if (a.equals("--load")) {
                load = true;
                continue;
            }
            if (a.equals("--tls")) {
                tls = true;
                continue;
            }
            switch (a) {
                case "--help", "-h" -> {
                    out.println("usage: kvgate epp-check --target HOST:PORT --model MODEL [--path /v1/chat/completions]"
                        + " [--header 'Name: value']... [--timeout-ms 10000]\n"
                        + "  [--tls [--ca FILE] [--cert FILE --key FILE]]  TLS (ALPN h2) to a picker with epp_tls: trust FILE's"
                        + " CAs\n       (default: the JDK's), present a client certificate (PEM, PKCS#8 key) for mTLS\n"
                        + "  drives an endpoint picker (Envoy ext_proc, Gateway API Inference Extension protocol 004) as Envoy"
                        + " does\n  and prints PASS/FAIL per protocol requirement; exit 1 on any FAIL\n"
                        + "  --load [--rate 100] [--seconds 10] [--prompt-bytes 100000] [--connections 4] [--max-in-flight 4096]\n"
                        + "       instead: open-loop load through the picker (distinct prompts, scripted engine answers); prints"
                        + " JSON\n       with the picker's request-phase (decision + body echo) and response-phase latencies in us");
                    return 0;
                }
                case "--target" -> target = v;
                case "--model" -> model = v;
                case "--ca" -> caFile = v;
                case "--cert" -> certFile = v;
                case "--key" -> keyFile = v;
                case "--path" -> path = v;
                case "--timeout-ms" -> {
                    try {
                        timeoutMs = Long.parseLong(v);
                    } catch (NumberFormatException | NullPointerException e) {
                        err.println("kvgate epp-check: --timeout-ms needs a number of milliseconds (got " + v + ")");
                        return 2;
                    }
                }
                case "--rate", "--seconds", "--prompt-bytes", "--connections", "--max-in-flight" -> {
                    loadArgs.add(a);
                    loadArgs.add(v == null ? "" : v);
                }
                case "--header" -> {
                    int colon = v == null ? -1 : v.indexOf(':');
                    if (colon <= 0) {
                        err.println("kvgate epp-check: --header needs 'Name: value' (got " + v + ")");
                        return 2;
                    }
                    headers.put(v.substring(0, colon).strip(), v.substring(colon + 1).strip());
                }
                default -> {
                    err.println("kvgate epp-check: unknown option '" + a + "' (see --help)");
                    return 2;
                }
            }
            i++;
        }
        if (target == null || model == null) {
            err.println("kvgate epp-check: --target HOST:PORT and --model MODEL are required (see --help)");
            return 2;
        }
        int colon = target.lastIndexOf(':');
        int port;
        try {
            port = Integer.parseInt(target.substring(colon + 1));
        } catch (NumberFormatException | StringIndexOutOfBoundsException e) {
            err.println("kvgate epp-check: --target must be HOST:PORT (got " + target + ")");
            return 2;
        }
        if (!tls && (caFile != null || certFile != null || keyFile != null)) {
            err.println("kvgate epp-check: --ca, --cert and --key need --tls");
            return 2;
        }
        if ((certFile == null) != (keyFile == null)) {
            err.println("kvgate epp-check: --cert and --key go together (a client certificate needs its key)");
            return 2;
        }
        for (String f : new String[] {caFile, certFile, keyFile}) {
            if (f != null && !java.nio.file.Files.isReadable(java.nio.file.Path.of(f))) {
                err.println("kvgate epp-check: " + f + " is not a readable file");
                return 2;
            }
        }
        Target t = new Target(target.substring(0, Math.max(0, colon)), port, model, path, headers, timeoutMs,
            tls ? new EnvoyEmulator.ClientTls(caFile, certFile, keyFile) : null);
        if (load) {
            try {
                return EppLoad.main(t, loadArgs.toArray(String[]::new), out, err);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return 1;
            }
        }
        if (!loadArgs.isEmpty()) {
            err.println("kvgate epp-check: " + loadArgs.getFirst() + " needs --load");
            return 2;
        }
        List<Result> results = check(t);
        results.forEach(out::println);
        long failed = results.stream().filter(r -> !r.passed()).count();
        out.println(failed == 0 ? "all " + results.size() + " requirements pass"
            : failed + " of " + results.size() + " requirements FAIL");
        return failed == 0 ? 0 : 1;
    }

    /** Runs every check against {@code t}. */
    public static List<Result> check(Target t) {
        List<Result> results = new ArrayList<>();
        try (EnvoyEmulator envoy = t.envoy()) {
            health(envoy, t, results);
            picks(envoy, t, results);
        }
        return results;
    }

    private static void health(EnvoyEmulator envoy, Target t, List<Result> results) {
        var health = HealthGrpc.newBlockingStub(envoy.channel());
        for (String service : List.of(EppProtocol.HEALTH_LIVENESS, EppProtocol.HEALTH_READINESS, EppProtocol.HEALTH_EXT_PROC)) {
            String name = "health." + service;
            try {
                ServingStatus s = health.withDeadlineAfter(t.timeoutMs(), TimeUnit.MILLISECONDS)
                    .check(HealthCheckRequest.newBuilder().setService(service).build()).getStatus();
                results.add(new Result(name, s == ServingStatus.SERVING, "status " + s));
            } catch (StatusRuntimeException e) {
                results.add(new Result(name, false, "grpc.health.v1.Health/Check failed: " + e.getStatus()));
            }
        }
        try {
            ServingStatus s = health.withDeadlineAfter(t.timeoutMs(), TimeUnit.MILLISECONDS)
                .check(HealthCheckRequest.newBuilder().setService("no.such.Service").build()).getStatus();
            results.add(new Result("health.unknown_service", false, "answered " + s + " (the health protocol says NOT_FOUND)"));
        } catch (StatusRuntimeException e) {
            results.add(new Result("health.unknown_service", e.getStatus().getCode() == io.grpc.Status.Code.NOT_FOUND,
                "status " + e.getStatus().getCode()));
        }
    }

    /** A chat (or completions) request for the target's model with {@code contentBytes} of prompt text. */
    static byte[] body(Target t, int contentBytes) {
        StringBuilder text = new StringBuilder(contentBytes + 16);
        String words = "the quick brown fox jumps over the lazy dog ";
        while (text.length() < contentBytes) {
            text.append(words);
        }
        text.setLength(contentBytes);
        String json = t.path().endsWith("/chat/completions")
            ? "{\"model\":\"" + t.model() + "\",\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"" + text + "\"}]}"
            : "{\"model\":\"" + t.model() + "\",\"max_tokens\":4,\"prompt\":\"" + text + "\"}";
        return json.getBytes(StandardCharsets.UTF_8);
    }

    private static EnvoyEmulator.Request request(Target t, int contentBytes) {
        Map<String, String> h = new LinkedHashMap<>(t.headers());
        h.put("content-type", "application/json");
        h.put("x-request-id", "epp-check-" + System.nanoTime());
        return EnvoyEmulator.Request.post(t.path(), h, body(t, contentBytes));
    }

    /** An engine's streamed answer with usage, in three pieces, and trailers when asked. */
    public static EnvoyEmulator.Upstream scripted(boolean trailers) {
        return (endpoint, req, body, added) -> new EnvoyEmulator.Response(200, Map.of("content-type", "text/event-stream"),
            List.of("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n".getBytes(StandardCharsets.UTF_8),
                ("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":1,\"total_tokens\":13}}\n\n")
                    .getBytes(StandardCharsets.UTF_8),
                "data: [DONE]\n\n".getBytes(StandardCharsets.UTF_8)), trailers);
    }

    private static void picks(EnvoyEmulator envoy, Target t, List<Result> results) {
        EnvoyEmulator.Request small = request(t, 64);
        EnvoyEmulator.Outcome o = attempt(results, "pick", () -> envoy.exchange(small, scripted(false), null));
        if (o == null) {
            return;
        }
        boolean picked = o.immediateStatus == null;
        results.add(new Result("pick.decision", picked, picked ? "" : "ImmediateResponse " + o.immediateStatus + ": "
            + o.immediateBody + " (is the model served and an endpoint healthy?)"));
        if (!picked) {
            return;
        }
        results.add(new Result("pick.headers_before_body", o.violations.stream().noneMatch(v -> v.startsWith("request direction")),
            String.join("; ", o.violations)));
        results.add(new Result("pick.destination_header", o.destinationHeader != null && endpoints(o.destinationHeader),
            EppProtocol.DESTINATION + ": " + o.destinationHeader));
        results.add(new Result("pick.destination_metadata", o.destinationHeader != null
            && o.destinationHeader.equals(o.destinationMetadata), "dynamic_metadata[envoy.lb]: " + o.destinationMetadata));
        results.add(new Result("pick.clear_route_cache", o.clearRouteCache, ""));
        results.add(new Result("body.echo", Arrays.equals(small.body(), o.echoedRequestBody),
            o.echoedRequestBody == null ? "no echo" : o.echoedRequestBody.length + " of " + small.body().length + " bytes"));
        results.add(new Result("response.headers_and_body", o.response != null && o.echoedResponseBody != null
            && Arrays.equals(concat(o.response.pieces()), o.echoedResponseBody)
            && o.violations.stream().noneMatch(v -> v.startsWith("response")), String.join("; ", o.violations)));
        results.add(new Result("stream.ends", o.streamCompleted && o.violations.isEmpty(), String.join("; ", o.violations)));
        String picked1 = o.endpoint();

        EnvoyEmulator.Request large = request(t, 300_000).withPieces(64 * 1024);
        EnvoyEmulator.Outcome big = attempt(results, "body.chunking", () -> envoy.exchange(large, scripted(false), null));
        if (big != null) {
            int max = big.echoedPieceSizes.stream().mapToInt(Integer::intValue).max().orElse(0);
            results.add(new Result("body.chunking", big.immediateStatus == null && Arrays.equals(large.body(), big.echoedRequestBody)
                && max <= EppProtocol.MAX_ECHO_CHUNK && big.violations.isEmpty(), large.body().length + " bytes sent in 64 KiB"
                + " pieces, echoed in " + big.echoedPieceSizes.size() + " pieces of at most " + max + " bytes"
                + (big.immediateStatus != null ? "; ImmediateResponse " + big.immediateStatus + " " + big.immediateBody : "")
                + (big.violations.isEmpty() ? "" : "; " + String.join("; ", big.violations))));
        }

        EnvoyEmulator.Outcome tr = attempt(results, "trailers", () -> envoy.exchange(request(t, 2000).withPieces(700).withTrailers(),
            scripted(true), null));
        if (tr != null) {
            results.add(new Result("trailers.request", tr.requestTrailersAnswered && tr.violations.stream()
                .noneMatch(v -> v.startsWith("request")), String.join("; ", tr.violations)));
            results.add(new Result("trailers.response", tr.responseTrailersAnswered && tr.violations.stream()
                .noneMatch(v -> v.startsWith("response")), String.join("; ", tr.violations)));
        }

        boolean kept = true;
        String seen = "";
        for (int i = 0; i < 3; i++) {
            EnvoyEmulator.Outcome s = attempt(results, "subset.member", () -> envoy.exchange(request(t, 64)
                .withSubset(List.of(picked1)), scripted(false), null));
            if (s == null) {
                return;
            }
            seen += (i == 0 ? "" : ", ") + (s.immediateStatus != null ? "ImmediateResponse " + s.immediateStatus : s.endpoint());
            kept &= s.immediateStatus == null && picked1.equals(s.endpoint());
        }
        results.add(new Result("subset.member", kept, "subset [" + picked1 + "] -> " + seen));
        immediate503(envoy, results, "subset.none_eligible", request(t, 64).withSubset(List.of("192.0.2.1:9")));
        immediate503(envoy, results, "subset.empty", request(t, 64).withSubset(List.of()));

        EnvoyEmulator.Outcome sv = attempt(results, "served.report", () -> envoy.exchange(request(t, 64), scripted(false),
            "192.0.2.1:9"));
        if (sv != null) {
            results.add(new Result("served.report", sv.immediateStatus == null && sv.streamCompleted && sv.violations.isEmpty(),
                "a report of another endpoint than the pick is taken and the stream ends cleanly"
                    + (sv.violations.isEmpty() ? "" : ": " + String.join("; ", sv.violations))));
        }

        Map<String, String> h = new LinkedHashMap<>(t.headers());
        h.put("content-type", "application/json");
        EnvoyEmulator.Outcome bad = attempt(results, "errors.immediate", () -> envoy.exchange(
            EnvoyEmulator.Request.post(t.path(), h, "{\"model\":".getBytes(StandardCharsets.UTF_8)), scripted(false), null));
        if (bad != null) {
            results.add(new Result("errors.immediate", bad.immediateStatus != null && bad.immediateStatus >= 400
                && bad.immediateStatus < 500 && bad.immediateBody != null && !bad.immediateBody.isEmpty() && bad.violations.isEmpty(),
                "a malformed body -> " + (bad.immediateStatus == null ? "a decision" : "ImmediateResponse " + bad.immediateStatus
                    + " " + bad.immediateBody)));
        }

        EnvoyEmulator.Outcome eos = attempt(results, "eos.headers", () -> envoy.exchange(
            new EnvoyEmulator.Request("POST", t.path(), h, new byte[0], 1, false, null), scripted(false), null));
        if (eos != null) {
            results.add(new Result("eos.headers", eos.violations.isEmpty() && eos.streamCompleted,
                "request headers with end_of_stream -> " + (eos.immediateStatus == null ? "decision " + eos.destinationHeader
                    : "ImmediateResponse " + eos.immediateStatus)));
        }
    }

    private static void immediate503(EnvoyEmulator envoy, List<Result> results, String name, EnvoyEmulator.Request req) {
        EnvoyEmulator.Outcome o = attempt(results, name, () -> envoy.exchange(req, scripted(false), null));
        if (o != null) {
            results.add(new Result(name, Integer.valueOf(503).equals(o.immediateStatus) && o.violations.isEmpty(),
                "subset " + req.subset() + " -> " + (o.immediateStatus == null ? "picked " + o.endpoint()
                    : "ImmediateResponse " + o.immediateStatus)));
        }
    }

    /** Runs one exchange; a failure to run it at all is its check's FAIL. */
    private static EnvoyEmulator.Outcome attempt(List<Result> results, String name, Callable call) {
        try {
            return call.get();
        } catch (Exception e) {
            results.add(new Result(name, false, "the exchange failed: " + e));
            return null;
        }
    }

    @FunctionalInterface
    private interface Callable {
        EnvoyEmulator.Outcome get() throws Exception;
    }

    /** A destination value: one or more host:port, comma separated. */
    static boolean endpoints(String value) {
        for (String e : value.split(",")) {
            int colon = e.strip().lastIndexOf(':');
            if (colon <= 0) {
                return false;
            }
            try {
                int p = Integer.parseInt(e.strip().substring(colon + 1));
                if (p <= 0 || p > 65535) {
                    return false;
                }
            } catch (NumberFormatException x) {
                return false;
            }
        }
        return true;
    }

    private static byte[] concat(List<byte[]> pieces) {
        int n = pieces.stream().mapToInt(p -> p.length).sum();
        byte[] out = new byte[n];
        int at = 0;
        for (byte[] p : pieces) {
            System.arraycopy(p, 0, out, at, p.length);
            at += p.length;
        }
        return out;
    }
}
