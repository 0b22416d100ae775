package io.kvgate.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The allowed package edges, read from the main sources of every module (imports and fully qualified names, comments
 * stripped), so the layering stays as designed when code moves: an instrument that does not link what it measures, a
 * router that knows nothing of HTTP, floors that import nothing above them. PackageCyclesTest (dataplane) forbids
 * cycles; this test forbids edges that would be legal as a DAG but point the wrong way. A failure names the rule, the
 * edge and one source file that makes it.
 *
 * <p>Rules name packages as they are meant to be; a rule on a package that does not exist yet (relay, exchange,
 * engine while they are being built) holds vacuously and starts guarding the moment the package appears.
 */
class LayeringTest {
    /** A reference to a kvgate type: {@code io.kvgate.a.b.Type} yields the package {@code io.kvgate.a.b}. */
    private static final Pattern REFERENCE = Pattern.compile("\\b(io\\.kvgate(?:\\.[a-z][a-z0-9_]*)+)\\.(?:[A-Z]|\\*)");
    private static final Pattern COMMENT = Pattern.compile("(?s)/\\*.*?\\*/|//[^\\n]*");
    private static final Pattern STRING = Pattern.compile("\"(?:[^\"\\\\\\n]|\\\\.)*\"");
    private static final String DP = "io.kvgate.dataplane";

    /** One rule: packages starting with {@code from} must reference no package starting with any of {@code forbidden}. */
    private record Rule(String why, String from, List<String> forbidden) {
        boolean applies(String pkg) {
            return within(pkg, from);
        }

        boolean forbids(String pkg) {
            return forbidden.stream().anyMatch(f -> within(pkg, f));
        }
    }

    /** A package is within a prefix when it is the prefix itself or one of its sub-packages. */
    private static boolean within(String pkg, String prefix) {
        return pkg.equals(prefix) || pkg.startsWith(prefix + ".");
    }

    private static List<String> dp(String... packages) {
        return Stream.of(packages).map(p -> DP + "." + p).toList();
    }

    private static final List<Rule> RULES = List.of(
        // Modules, by package (Maven enforces declared dependencies; these keep a transitive one from creeping in).
        new Rule("control is the shared contract: it names no other module", "io.kvgate.control",
            List.of("io.kvgate.index", "io.kvgate.ingest", "io.kvgate.net", "io.kvgate.discovery", DP, "io.kvgate.tools")),
        new Rule("discovery finds endpoints and hands them over as configuration; the gateway applies them", "io.kvgate.discovery",
            List.of("io.kvgate.index", "io.kvgate.ingest", "io.kvgate.net", DP, "io.kvgate.tools")),
        new Rule("index sits on control only", "io.kvgate.index",
            List.of("io.kvgate.ingest", "io.kvgate.net", DP, "io.kvgate.tools")),
        new Rule("ingest sits on control and index only", "io.kvgate.ingest", List.of("io.kvgate.net", DP, "io.kvgate.tools")),
        new Rule("net (the socket transport) is shared by the gateway and the simulator and names neither", "io.kvgate.net",
            List.of("io.kvgate.control", "io.kvgate.index", "io.kvgate.ingest", DP, "io.kvgate.tools")),
        new Rule("the gateway never names its tools", DP, List.of("io.kvgate.tools")),
        new Rule("the load generator is an instrument: it must not link the system under test", "io.kvgate.tools.bench",
            List.of(DP, "io.kvgate.index", "io.kvgate.ingest", "io.kvgate.net", "io.kvgate.tools.sim",
                "io.kvgate.tools.cli", "io.kvgate.tools.demo")),
        new Rule("the engine simulator stands in for engines, not for the gateway", "io.kvgate.tools.sim",
            List.of(DP, "io.kvgate.tools.bench", "io.kvgate.tools.cli", "io.kvgate.tools.demo")),
        new Rule("the CLI talks to a gateway through its control socket, it does not link one", "io.kvgate.tools.cli",
            List.of(DP, "io.kvgate.tools.sim", "io.kvgate.tools.bench", "io.kvgate.tools.demo")),
        // The endpoint picker is a second front door over the data plane: nothing below it names it, and it names no tool.
        new Rule("the endpoint picker sits on the data plane; the gateway finds it on the class path, never by name",
            "io.kvgate.control", List.of("io.kvgate.epp")),
        new Rule("the endpoint picker sits on the data plane; the gateway finds it on the class path, never by name", DP,
            List.of("io.kvgate.epp")),
        new Rule("the endpoint picker names no tool", "io.kvgate.epp", List.of("io.kvgate.tools")),
        new Rule("epp-check and the protocol's names hold for any picker: they must not link kvgate's", "io.kvgate.epp.check",
            List.of(DP, "io.kvgate.index", "io.kvgate.ingest", "io.kvgate.net", "io.kvgate.epp.picker", "io.kvgate.tools")),
        new Rule("epp-check and the protocol's names hold for any picker: they must not link kvgate's", "io.kvgate.epp.protocol",
            List.of(DP, "io.kvgate.index", "io.kvgate.ingest", "io.kvgate.net", "io.kvgate.control", "io.kvgate.tools")),
        // The data plane's packages.
        new Rule("wire, metrics, openai, tls and trace are floors: they import no other data-plane package",
            DP + ".wire", notFloors()),
        new Rule("wire, metrics, openai, tls and trace are floors: they import no other data-plane package",
            DP + ".metrics", notFloors()),
        new Rule("wire, metrics, openai, tls and trace are floors: they import no other data-plane package",
            DP + ".openai", notFloors()),
        new Rule("wire, metrics, openai, tls and trace are floors: they import no other data-plane package",
            DP + ".tls", notFloors()),
        new Rule("wire, metrics, openai, tls and trace are floors: they import no other data-plane package",
            DP + ".trace", notFloors()),
        new Rule("route decides; it knows nothing of HTTP, request bodies, prompts or exchanges", DP + ".route",
            dp("http", "request", "prompt", "exchange", "relay", "pd", "upstream", "admin", "config", "kv",
                "load", "ready", "accesslog")),
        new Rule("upstream legs carry bytes to an engine; the exchanges and the front door drive them", DP + ".upstream",
            dp("http", "request", "prompt", "exchange", "relay", "pd", "admin", "config", "kv")),
        new Rule("request (lexing, validation, body edits) is below the exchanges and the front door", DP + ".request",
            dp("http", "exchange", "relay", "pd", "prompt", "admin", "config", "kv")),
        new Rule("relay carries one engine answer to the client; the orchestrators above it drive it", DP + ".relay",
            dp("http", "exchange", "pd", "prompt", "admin", "config", "kv")),
        new Rule("exchange orchestrates engine legs; the front door and P/D sit above it", DP + ".exchange",
            dp("http", "pd", "admin", "config", "kv")),
        new Rule("engine profiles hold engine facts; the front door and the admin API use them, not the reverse",
            DP + ".engine", dp("http", "admin", "config")),
        new Rule("the admin API reads the gateway's state; the request path never calls into it", DP + ".http",
            dp("admin", "config")),
        new Rule("the admin API reads the gateway's state; the request path never calls into it", DP + ".exchange",
            dp("admin")),
        new Rule("the admin API reads the gateway's state; the request path never calls into it", DP + ".pd",
            dp("admin", "http", "config")),
        new Rule("quality accounts what the router and the relays report to it; it calls neither, nor anything above",
            DP + ".quality", dp("accesslog", "admin", "config", "engine", "exchange", "http", "kv", "load", "pd",
                "prompt", "ready", "relay", "request", "route", "upstream", "wire", "openai", "tls", "trace")));

    private static List<String> notFloors() {
        return dp("accesslog", "admin", "config", "engine", "exchange", "http", "kv", "load", "pd", "prompt",
            "ready", "relay", "request", "route", "upstream");
    }

    @Test
    void everyPackageEdgeIsAllowed() throws IOException {
        Map<String, Map<String, String>> edges = edges(); // from -> (to -> one file that makes the edge)
        assertTrue(edges.keySet().containsAll(List.of(DP + ".route", "io.kvgate.tools.bench", "io.kvgate.tools.sim")),
            "the scan found the modules' packages: " + edges.keySet());
        List<String> broken = new ArrayList<>();
        for (Rule rule : RULES) {
            edges.forEach((from, targets) -> {
                if (rule.applies(from)) {
                    targets.forEach((to, file) -> {
                        if (rule.forbids(to)) {
                            broken.add(rule.why() + ": " + from + " -> " + to + " (" + file + ")");
                        }
                    });
                }
            });
        }
        // A root package wires or launches its sub-packages, so none of them may name it: the data plane's composition
        // root (Gateway, GatewayMain; the launcher and the demo outside it do start a gateway) and the launcher (Main).
        for (String top : List.of(DP, "io.kvgate.tools")) {
            edges.forEach((from, targets) -> {
                if (within(from, top) && !from.equals(top) && targets.containsKey(top)) {
                    broken.add("only " + top + " itself names " + top + ": " + from + " -> " + top + " (" + targets.get(top) + ")");
                }
            });
        }
        assertEquals(List.of(), broken, "package edges against the layering");
    }

    private static final Pattern PACKAGE = Pattern.compile("(?m)^package\\s+([a-z][a-z0-9_.]*)\\s*;");

    /**
     * Benchmark code lives in {@code io.kvgate.perf.*}: a perf class in a product package would reach package-private
     * code, so product code could not change without breaking a benchmark, and the split package would hide on the
     * class path. Reach product code through a public seam instead (a public constructor or factory whose comment
     * says a benchmark needs it).
     */
    @Test
    void perfClassesLiveInPerfPackages() throws IOException {
        Path root = Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize();
        Path perf = root.resolve("perf/src");
        assertTrue(Files.isDirectory(perf), "no perf sources under " + perf);
        List<String> misplaced = new ArrayList<>();
        try (Stream<Path> files = Files.walk(perf)) {
            for (Path p : files.filter(f -> f.toString().endsWith(".java")).sorted().toList()) {
                String rel = root.relativize(p).toString().replace('\\', '/');
                Matcher m = PACKAGE.matcher(Files.readString(p));
                String pkg = m.find() ? m.group(1) : "(no package)";
                if (!within(pkg, "io.kvgate.perf")) {
                    misplaced.add(rel + " declares package " + pkg);
                }
            }
        }
        assertEquals(List.of(), misplaced, "perf classes outside io.kvgate.perf");
    }

    /** The scan itself: a forbidden reference in a synthetic source is found, with or without an import. */
    @Test
    void theScanSeesImportsAndQualifiedNamesButNotCommentsOrStrings() {
        Set<String> seen = references("""
            package io.kvgate.tools.bench;
            import io.kvgate.control.clock.NanoClock;
            // io.kvgate.dataplane.Gateway in a comment is no edge
            /* nor io.kvgate.index.block.BlockIndex here */
            import io.kvgate.tools.sim.*;
            class X { String s = "io.kvgate.ingest.zmq.KvEventIngest"; Object o = io.kvgate.dataplane.route.Rule.class; }
            """);
        assertEquals(Set.of("io.kvgate.control.clock", "io.kvgate.tools.sim", "io.kvgate.dataplane.route"), seen);
        Rule bench = RULES.stream().filter(r -> r.from().equals("io.kvgate.tools.bench")).findFirst().orElseThrow();
        assertTrue(bench.forbids("io.kvgate.dataplane.route") && !bench.forbids("io.kvgate.control.clock"), bench.toString());
    }

    private static Set<String> references(String source) {
        String code = STRING.matcher(COMMENT.matcher(source).replaceAll("")).replaceAll("\"\"");
        Set<String> out = new TreeSet<>();
        Matcher m = REFERENCE.matcher(code);
        while (m.find()) {
            out.add(m.group(1));
        }
        return out;
    }

    private static Map<String, Map<String, String>> edges() throws IOException {
        Path root = Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize();
        Map<String, Map<String, String>> edges = new TreeMap<>();
        try (Stream<Path> modules = Files.list(root)) {
            for (Path sources : modules.map(m -> m.resolve("src/main/java")).filter(Files::isDirectory).sorted().toList()) {
                if (sources.startsWith(root.resolve("perf"))) {
                    continue; // the benchmarks measure every layer and are no layer themselves
                }
                try (Stream<Path> files = Files.walk(sources)) {
                    for (Path f : files.filter(p -> p.toString().endsWith(".java")).toList()) {
                        String from = sources.relativize(f.getParent()).toString().replace(java.io.File.separatorChar, '.');
                        for (String to : references(Files.readString(f))) {
                            if (!to.equals(from)) {
                                edges.computeIfAbsent(from, k -> new TreeMap<>()).putIfAbsent(to, root.relativize(f).toString());
                            }
                        }
                    }
                }
            }
        }
        return edges;
    }
}
