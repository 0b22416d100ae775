package io.kvgate.dataplane;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
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
 * {@code dataplane} has no package cycles (issue #10): every reference from one of its packages to another, by import
 * or by a fully qualified name in the code, is collected from the sources, and the package graph must be acyclic.
 * A failure names the packages of each cycle and one source file per edge.
 */
class PackageCyclesTest {
    private static final String ROOT_PACKAGE = "io.kvgate.dataplane";
    /** {@code io.kvgate.dataplane.sub.Type} or {@code io.kvgate.dataplane.Type} (the root package). */
    private static final Pattern REFERENCE = Pattern.compile("\\bio\\.kvgate\\.dataplane\\.(?:([a-z][a-z0-9_]*)\\.)?[A-Z]");
    private static final Pattern COMMENT = Pattern.compile("(?s)/\\*.*?\\*/|//[^\\n]*");

    @Test
    void dataplanePackagesFormNoCycle() throws IOException {
        Path sources = Path.of(System.getProperty("kvgate.repo.root", ".."), "dataplane", "src", "main", "java",
            "io", "kvgate", "dataplane").toAbsolutePath().normalize();
        assertTrue(Files.isDirectory(sources), "dataplane sources not found at " + sources);
        Map<String, Map<String, String>> edges = new TreeMap<>(); // from -> (to -> one file that makes the edge)
        try (Stream<Path> files = Files.walk(sources)) {
            for (Path f : files.filter(p -> p.toString().endsWith(".java")).toList()) {
                String from = packageOf(sources, f);
                String code = COMMENT.matcher(Files.readString(f)).replaceAll("");
                Matcher m = REFERENCE.matcher(code);
                while (m.find()) {
                    String to = m.group(1) == null ? "" : m.group(1);
                    if (!to.equals(from)) {
                        edges.computeIfAbsent(from, k -> new TreeMap<>()).putIfAbsent(to, sources.relativize(f).toString());
                    }
                }
            }
        }
        assertTrue(edges.size() > 5, "the scan found the dataplane packages: " + edges.keySet());
        List<String> cycles = new ArrayList<>();
        for (Set<String> scc : stronglyConnected(edges)) {
            if (scc.size() > 1) {
                StringBuilder sb = new StringBuilder(String.valueOf(scc.stream().map(PackageCyclesTest::name).toList()));
                for (String a : scc) {
                    for (Map.Entry<String, String> e : edges.getOrDefault(a, Map.of()).entrySet()) {
                        if (scc.contains(e.getKey())) {
                            sb.append("\n  ").append(name(a)).append(" -> ").append(name(e.getKey())).append(" (").append(e.getValue()).append(')');
                        }
                    }
                }
                cycles.add(sb.toString());
            }
        }
        assertEquals(List.of(), cycles, "package cycles in dataplane");
    }

    private static String packageOf(Path sources, Path file) {
        Path rel = sources.relativize(file.getParent());
        return rel.toString().isEmpty() ? "" : rel.toString().replace(java.io.File.separatorChar, '.');
    }

    private static String name(String pkg) {
        return pkg.isEmpty() ? ROOT_PACKAGE : ROOT_PACKAGE + "." + pkg;
    }

    /** Tarjan's strongly connected components of the package graph. */
    private static List<Set<String>> stronglyConnected(Map<String, Map<String, String>> edges) {
        Set<String> nodes = new TreeSet<>(edges.keySet());
        edges.values().forEach(m -> nodes.addAll(m.keySet()));
        Map<String, Integer> index = new HashMap<>();
        Map<String, Integer> low = new HashMap<>();
        Deque<String> stack = new ArrayDeque<>();
        Set<String> onStack = new TreeSet<>();
        List<Set<String>> out = new ArrayList<>();
        int[] next = {0};
        for (String n : nodes) {
            if (!index.containsKey(n)) {
                visit(n, edges, index, low, stack, onStack, out, next);
            }
        }
        return out;
    }

    private static void visit(String v, Map<String, Map<String, String>> edges, Map<String, Integer> index,
                              Map<String, Integer> low, Deque<String> stack, Set<String> onStack, List<Set<String>> out, int[] next) {
        index.put(v, next[0]);
        low.put(v, next[0]);
        next[0]++;
        stack.push(v);
        onStack.add(v);
        for (String w : edges.getOrDefault(v, Map.of()).keySet()) {
            if (!index.containsKey(w)) {
                visit(w, edges, index, low, stack, onStack, out, next);
                low.put(v, Math.min(low.get(v), low.get(w)));
            } else if (onStack.contains(w)) {
                low.put(v, Math.min(low.get(v), index.get(w)));
            }
        }
        if (low.get(v).equals(index.get(v))) {
            Set<String> scc = new TreeSet<>();
            String w;
            do {
                w = stack.pop();
                onStack.remove(w);
                scc.add(w);
            } while (!w.equals(v));
            out.add(scc);
        }
    }
}
