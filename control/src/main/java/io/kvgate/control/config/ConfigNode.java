package io.kvgate.control.config;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A strict reader over one YAML/JSON mapping: every accessor records the key as known, {@link #finish()} reports
 * every key nobody asked for, and every problem names the path, the value and the rule. Problems accumulate in a
 * shared list so one run of the validator reports all of them. Not thread-safe (used once, at load time).
 */
public final class ConfigNode {
    private final String path;
    private final Map<String, Object> map;
    private final List<String> problems;
    private final Set<String> seen = new HashSet<>();
    private final Function<String, String> env;
    /** Every key path any node of this document was asked for (shared with the children): the schema drift test reads it. */
    private final Set<String> asked;

    public ConfigNode(String path, Map<String, Object> map, List<String> problems) {
        this(path, map, problems, name -> null);
    }

    /** @param env looks up {@code ${NAME}} references in string values (null = not set) */
    public ConfigNode(String path, Map<String, Object> map, List<String> problems, Function<String, String> env) {
        this(path, map, problems, env, new java.util.LinkedHashSet<>());
    }

    private ConfigNode(String path, Map<String, Object> map, List<String> problems, Function<String, String> env,
                       Set<String> asked) {
        this.path = path;
        this.map = map == null ? Map.of() : map;
        this.problems = problems;
        this.env = env;
        this.asked = asked;
    }

    /** The key paths this document's nodes were asked for, as labelled ({@code rules[0] (name=chat).kv.mode}). */
    Set<String> asked() {
        return asked;
    }

    private void mark(String key) {
        seen.add(key);
        asked.add(where(key));
    }

    public String path() {
        return path;
    }

    public List<String> problems() {
        return problems;
    }

    /** The environment lookup this node expands {@code ${NAME}} with (children share it). */
    public Function<String, String> env() {
        return env;
    }

    /** A list of integers (e.g. uids). */
    public List<Integer> intList(String key, long min, long max) {
        mark(key);
        Object v = map.get(key);
        if (v == null) {
            return List.of();
        }
        List<?> list = v instanceof List<?> l ? l : List.of(v);
        List<Integer> out = new ArrayList<>();
        for (Object o : list) {
            if (!(o instanceof Integer i) || i < min || i > max) {
                problem(key, v, "must be a list of integers in [" + min + ", " + max + "]");
                return List.of();
            }
            out.add(i);
        }
        return out;
    }

    /** The value as YAML read it (String, Boolean, Number, List, Map), or null; the key counts as known. */
    public Object raw(String key) {
        mark(key);
        return map.get(key);
    }

    public boolean has(String key) {
        mark(key);
        return map.containsKey(key) && map.get(key) != null;
    }

    public void problem(String key, Object value, String rule) {
        problems.add(where(key) + ": " + (value == null ? "" : "value " + show(value) + " ") + rule);
    }

    public String where(String key) {
        return path.isEmpty() ? key : path + "." + key;
    }

    public String string(String key, String dflt) {
        mark(key);
        Object v = map.get(key);
        if (v == null) {
            return dflt;
        }
        if (v instanceof String s) {
            return expand(key, s);
        }
        if (v instanceof Number || v instanceof Boolean) {
            return String.valueOf(v);
        }
        problem(key, v, "must be a string");
        return dflt;
    }

    private static final Pattern ENV_REF = Pattern.compile("\\$\\$|\\$\\{([A-Za-z_][A-Za-z0-9_]*)}");

    /**
     * Replaces {@code ${NAME}} by the environment variable NAME ({@code $$} writes one {@code $}), so secrets need
     * not be written into the file. An unset variable is a problem naming the key and the variable.
     */
    String expand(String key, String s) {
        if (s.indexOf('$') < 0) {
            return s;
        }
        Matcher m = ENV_REF.matcher(s);
        StringBuilder out = new StringBuilder();
        while (m.find()) {
            String name = m.group(1);
            String value;
            if (name == null) {
                value = "$";
            } else {
                value = env.apply(name);
                if (value == null) {
                    problems.add(where(key) + ": refers to environment variable " + name + ", which is not set");
                    value = "";
                }
            }
            m.appendReplacement(out, Matcher.quoteReplacement(value));
        }
        m.appendTail(out);
        return out.toString();
    }

    public String requiredString(String key) {
        int before = problems.size();
        String s = string(key, null);
        if (problems.size() > before) {
            return null; // already reported (an unset ${VAR}, a non-string)
        }
        if (s == null || s.isBlank()) {
            if (!map.containsKey(key)) {
                problems.add(where(key) + ": is required");
            } else {
                problem(key, map.get(key), "must be a non-empty string");
            }
            return null;
        }
        return s;
    }

    public String oneOf(String key, String dflt, List<String> allowed) {
        String s = string(key, dflt);
        if (s != null && !allowed.contains(s)) {
            problem(key, s, "must be one of " + String.join("|", allowed));
            return dflt;
        }
        return s;
    }

    public long longValue(String key, long dflt, long min, long max) {
        mark(key);
        Object v = map.get(key);
        if (v == null) {
            return dflt;
        }
        long value;
        if (v instanceof Integer || v instanceof Long || v instanceof Short || v instanceof Byte) {
            value = ((Number) v).longValue();
        } else if (v instanceof java.math.BigInteger b && b.bitLength() < 64) {
            value = b.longValue();
        } else {
            problem(key, v, "must be an integer");
            return dflt;
        }
        if (value < min || value > max) {
            problem(key, v, "must be in [" + min + ", " + max + "]");
            return dflt;
        }
        return value;
    }

    public int intValue(String key, int dflt, int min, int max) {
        return (int) longValue(key, dflt, min, max);
    }

    public double doubleValue(String key, double dflt, double min, double max) {
        mark(key);
        Object v = map.get(key);
        if (v == null) {
            return dflt;
        }
        if (!(v instanceof Number n)) {
            problem(key, v, "must be a number");
            return dflt;
        }
        double d = n.doubleValue();
        if (!(d >= min && d <= max)) {
            problem(key, v, "must be in [" + min + ", " + max + "]");
            return dflt;
        }
        return d;
    }

    public boolean bool(String key, boolean dflt) {
        mark(key);
        Object v = map.get(key);
        if (v == null) {
            return dflt;
        }
        if (v instanceof Boolean b) {
            return b;
        }
        problem(key, v, "must be true or false");
        return dflt;
    }

    public List<String> stringList(String key) {
        mark(key);
        Object v = map.get(key);
        if (v == null) {
            return List.of();
        }
        if (v instanceof String s) {
            return List.of(s);
        }
        if (!(v instanceof List<?> list)) {
            problem(key, v, "must be a list of strings");
            return List.of();
        }
        List<String> out = new ArrayList<>();
        for (Object o : list) {
            if (o instanceof String s && !s.isBlank()) {
                out.add(expand(key, s));
            } else {
                problem(key, v, "must be a list of non-empty strings");
                return List.of();
            }
        }
        return out;
    }

    /**
     * A mapping of names to strings (e.g. a fingerprint to a class), in document order; empty when absent. Keys and
     * values are taken as written (no {@code ${NAME}} expansion: they are not secrets).
     */
    public Map<String, String> stringMap(String key) {
        mark(key);
        Object v = map.get(key);
        if (v == null) {
            return Map.of();
        }
        if (!(v instanceof Map<?, ?> m)) {
            problem(key, v, "must be a mapping of names to strings");
            return Map.of();
        }
        Map<String, String> out = new LinkedHashMap<>();
        m.forEach((k, val) -> {
            if (val instanceof String s) {
                out.put(String.valueOf(k), s);
            } else {
                problems.add(where(key) + "." + k + ": value " + show(val) + " must be a string");
            }
        });
        return out;
    }

    /** A child mapping, or an empty node when absent. */
    public ConfigNode child(String key) {
        mark(key);
        Object v = map.get(key);
        if (v == null) {
            return new ConfigNode(where(key), Map.of(), problems, env, asked);
        }
        if (!(v instanceof Map<?, ?> m)) {
            problem(key, v, "must be a mapping");
            return new ConfigNode(where(key), Map.of(), problems, env, asked);
        }
        return new ConfigNode(where(key), cast(m), problems, env, asked);
    }

    /** A list of mappings, each wrapped as a node named {@code key[i]} (plus {@code (name=…)} when it has a name). */
    public List<ConfigNode> children(String key) {
        mark(key);
        Object v = map.get(key);
        if (v == null) {
            return List.of();
        }
        if (!(v instanceof List<?> list)) {
            problem(key, v, "must be a list");
            return List.of();
        }
        List<ConfigNode> out = new ArrayList<>();
        for (int i = 0; i < list.size(); i++) {
            Object o = list.get(i);
            if (!(o instanceof Map<?, ?> m)) {
                problems.add(where(key) + "[" + i + "]: value " + show(o) + " must be a mapping");
                continue;
            }
            Map<String, Object> cm = cast(m);
            String label = where(key) + "[" + i + "]";
            Object name = cm.containsKey("name") ? cm.get("name") : cm.get("url");
            if (name instanceof String s) {
                label += " (" + (cm.containsKey("name") ? "name" : "url") + "=" + s + ")";
            }
            out.add(new ConfigNode(label, cm, problems, env, asked));
        }
        return out;
    }

    /**
     * A list whose items are non-empty strings or mappings (a rule's {@code models}): a string comes back as a
     * {@code String} (with {@code ${NAME}} expanded), a mapping as a node named like {@link #children}'s. A single
     * string stands for a one-item list. Any other item is a problem naming its index.
     */
    public List<Object> stringsOrChildren(String key) {
        mark(key);
        Object v = map.get(key);
        if (v == null) {
            return List.of();
        }
        List<?> list = v instanceof List<?> l ? l : List.of(v);
        List<Object> out = new ArrayList<>();
        for (int i = 0; i < list.size(); i++) {
            Object o = list.get(i);
            String label = where(key) + "[" + i + "]";
            if (o instanceof String s && !s.isBlank()) {
                out.add(expand(key, s));
            } else if (o instanceof Map<?, ?> m) {
                Map<String, Object> cm = cast(m);
                if (cm.get("name") instanceof String s) {
                    label += " (name=" + s + ")";
                }
                out.add(new ConfigNode(label, cm, problems, env, asked));
            } else {
                problems.add(label + ": value " + show(o) + " must be a non-empty string or a mapping");
            }
        }
        return out;
    }

    /** Reports every key present in the mapping that no accessor asked for: unknown keys are errors. */
    public void finish() {
        for (String key : map.keySet()) {
            if (!seen.contains(key)) {
                problems.add(where(key) + ": unknown key (check the spelling; see docs/configuration.md)");
            }
        }
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> cast(Map<?, ?> m) {
        Map<String, Object> out = new LinkedHashMap<>();
        m.forEach((k, val) -> out.put(String.valueOf(k), val));
        return (Map<String, Object>) (Map<?, ?>) out;
    }

    static String show(Object v) {
        if (v instanceof String s) {
            return "'" + s + "'";
        }
        return String.valueOf(v);
    }
}
