package io.kvgate.index.template;

import io.kvgate.index.template.PyOps.PyError;
import io.kvgate.index.template.Values.LoopContext;
import io.kvgate.index.template.Values.Namespace;
import io.kvgate.index.template.Values.PyCallable;
import io.kvgate.index.template.Values.PyTuple;
import io.kvgate.index.template.Values.Undefined;

import java.time.ZonedDateTime;
import java.time.format.TextStyle;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * Jinja2's built-in filters and tests, transformers' chat-template globals ({@code raise_exception},
 * {@code strftime_now}, its {@code tojson}), and the Python methods templates call on str, dict and list.
 *
 * <p>Threading contract: stateless, thread-safe.
 */
final class Builtins {
    private Builtins() {
    }

    /** Jinja2's sandbox refuses larger ranges (MAX_RANGE). */
    static final int MAX_RANGE = 100_000;

    private static final Set<String> FILTERS = Set.of("abs", "attr", "capitalize", "center", "count", "d", "default",
            "dictsort", "e", "escape", "first", "float", "forceescape", "format", "indent", "int", "items", "join", "last",
            "length", "list", "lower", "map", "max", "min", "reject", "rejectattr", "replace", "reverse", "round", "safe",
            "select", "selectattr", "sort", "string", "sum", "title", "tojson", "trim", "truncate", "unique", "upper",
            "wordcount");
    private static final Set<String> TESTS = Set.of("boolean", "callable", "defined", "divisibleby", "eq", "equalto",
            "escaped", "even", "false", "filter", "float", "ge", "gt", "greaterthan", "in", "integer", "iterable", "le",
            "lessthan", "lower", "lt", "mapping", "ne", "none", "number", "odd", "sameas", "sequence", "string", "test",
            "true", "undefined", "upper", "==", "!=", "<", "<=", ">", ">=");

    static boolean hasFilter(String name) {
        return FILTERS.contains(name);
    }

    static boolean hasTest(String name) {
        return TESTS.contains(name);
    }

    // ---------------- argument helpers ----------------

    private static Object arg(List<Object> args, List<String> kwNames, List<Object> kwValues, int index, String name,
            Object dflt) {
        if (index < args.size()) {
            return args.get(index);
        }
        int k = kwNames.indexOf(name);
        return k >= 0 ? kwValues.get(k) : dflt;
    }

    private static String strArg(Object o, String what) throws PyError {
        if (o instanceof String s) {
            return s;
        }
        if (o instanceof Undefined u) {
            throw new PyError(u.message);
        }
        throw new PyError(what + " must be str, not " + PyOps.typeName(o));
    }

    private static long intArg(Object o, String what) throws PyError {
        if (PyOps.isInt(o) || o instanceof Boolean) {
            return PyOps.asLong(o);
        }
        if (o instanceof Undefined u) {
            throw new PyError(u.message);
        }
        throw new PyError(what + ": '" + PyOps.typeName(o) + "' object cannot be interpreted as an integer");
    }

    // ---------------- globals ----------------

    private static final Map<String, PyCallable> GLOBALS = Map.of(
            "range", Builtins::range,
            "namespace", Builtins::namespace,
            "dict", (ev, args, kn, kv, at) -> {
                Map<Object, Object> m = new LinkedHashMap<>();
                for (int i = 0; i < kn.size(); i++) {
                    m.put(kn.get(i), kv.get(i));
                }
                return m;
            },
            "raise_exception", (ev, args, kn, kv, at) -> {
                Object msg = arg(args, kn, kv, 0, "message", new Undefined("missing message"));
                throw new TemplateException(PyOps.str(msg), at.line(), at instanceof Node.Expr e ? e.column() : 0, true);
            },
            "strftime_now", (ev, args, kn, kv, at) -> {
                Object fmt = arg(args, kn, kv, 0, "format", "");
                try {
                    return strftime(strArg(fmt, "format"), ZonedDateTime.now(ev.clock));
                } catch (PyError e) {
                    throw Evaluator.error(e, at);
                }
            });

    static PyCallable global(String name) {
        return GLOBALS.get(name);
    }

    private static Object range(Evaluator ev, List<Object> args, List<String> kn, List<Object> kv, Node at)
            throws TemplateException {
        try {
            long start = 0;
            long stop;
            long step = 1;
            if (args.size() == 1) {
                stop = intArg(args.get(0), "range");
            } else if (args.size() == 2 || args.size() == 3) {
                start = intArg(args.get(0), "range");
                stop = intArg(args.get(1), "range");
                if (args.size() == 3) {
                    step = intArg(args.get(2), "range");
                }
            } else {
                throw new PyError("range expected 1 to 3 arguments, got " + args.size());
            }
            if (step == 0) {
                throw new PyError("range() arg 3 must not be zero");
            }
            long count = step > 0 ? Math.max(0, (stop - start + step - 1) / step) : Math.max(0, (start - stop - step - 1) / -step);
            if (count > MAX_RANGE) {
                throw new PyError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (" + MAX_RANGE + ").");
            }
            List<Object> out = new ArrayList<>((int) count);
            for (long i = 0, v = start; i < count; i++, v += step) {
                out.add(v);
            }
            return out;
        } catch (PyError e) {
            throw Evaluator.error(e, at);
        }
    }

    private static Object namespace(Evaluator ev, List<Object> args, List<String> kn, List<Object> kv, Node at)
            throws TemplateException {
        Namespace ns = new Namespace();
        for (Object a : args) {
            if (a instanceof Map<?, ?> m) {
                for (Map.Entry<?, ?> e : m.entrySet()) {
                    ns.attrs.put(PyOps.str(e.getKey()), e.getValue());
                }
            } else {
                throw Evaluator.error("namespace() positional argument must be a mapping", at);
            }
        }
        for (int i = 0; i < kn.size(); i++) {
            ns.attrs.put(kn.get(i), kv.get(i));
        }
        return ns;
    }

    // ---------------- strftime ----------------

    static String strftime(String fmt, ZonedDateTime t) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < fmt.length(); i++) {
            char c = fmt.charAt(i);
            if (c != '%' || i + 1 >= fmt.length()) {
                sb.append(c);
                continue;
            }
            char d = fmt.charAt(++i);
            boolean noPad = false;
            if (d == '-' && i + 1 < fmt.length()) {
                noPad = true;
                d = fmt.charAt(++i);
            }
            switch (d) {
                case 'a' -> sb.append(t.getDayOfWeek().getDisplayName(TextStyle.SHORT, Locale.US));
                case 'A' -> sb.append(t.getDayOfWeek().getDisplayName(TextStyle.FULL, Locale.US));
                case 'b', 'h' -> sb.append(t.getMonth().getDisplayName(TextStyle.SHORT, Locale.US));
                case 'B' -> sb.append(t.getMonth().getDisplayName(TextStyle.FULL, Locale.US));
                case 'd' -> pad(sb, t.getDayOfMonth(), 2, noPad);
                case 'e' -> sb.append(t.getDayOfMonth() < 10 ? " " : "").append(t.getDayOfMonth());
                case 'm' -> pad(sb, t.getMonthValue(), 2, noPad);
                case 'y' -> pad(sb, t.getYear() % 100, 2, noPad);
                case 'Y' -> sb.append(t.getYear());
                case 'H' -> pad(sb, t.getHour(), 2, noPad);
                case 'I' -> pad(sb, t.getHour() % 12 == 0 ? 12 : t.getHour() % 12, 2, noPad);
                case 'p' -> sb.append(t.getHour() < 12 ? "AM" : "PM");
                case 'M' -> pad(sb, t.getMinute(), 2, noPad);
                case 'S' -> pad(sb, t.getSecond(), 2, noPad);
                case 'f' -> pad(sb, t.getNano() / 1000, 6, false);
                case 'j' -> pad(sb, t.getDayOfYear(), 3, noPad);
                case 'w' -> sb.append(t.getDayOfWeek().getValue() % 7);
                case 'u' -> sb.append(t.getDayOfWeek().getValue());
                case 'F' -> sb.append(strftime("%Y-%m-%d", t));
                case 'T' -> sb.append(strftime("%H:%M:%S", t));
                case 'D' -> sb.append(strftime("%m/%d/%y", t));
                case 'R' -> sb.append(strftime("%H:%M", t));
                case 'Z', 'z' -> { }
                case '%' -> sb.append('%');
                default -> sb.append('%').append(d);
            }
        }
        return sb.toString();
    }

    private static void pad(StringBuilder sb, int v, int width, boolean noPad) {
        String s = Integer.toString(v);
        if (!noPad) {
            for (int i = s.length(); i < width; i++) {
                sb.append('0');
            }
        }
        sb.append(s);
    }

    // ---------------- tests ----------------

    static boolean test(Evaluator ev, String name, Object v, List<Object> args) throws PyError {
        Object a0 = args.isEmpty() ? null : args.get(0);
        return switch (name) {
            case "defined" -> !(v instanceof Undefined);
            case "undefined" -> v instanceof Undefined;
            case "none" -> v == null;
            case "boolean" -> v instanceof Boolean;
            case "false" -> Boolean.FALSE.equals(v);
            case "true" -> Boolean.TRUE.equals(v);
            case "integer" -> PyOps.isInt(v);
            case "float" -> v instanceof Double || v instanceof Float;
            case "number" -> PyOps.isNumber(v);
            case "string" -> v instanceof String;
            case "mapping" -> v instanceof Map<?, ?>;
            case "iterable" -> v instanceof String || v instanceof List<?> || v instanceof Map<?, ?> || v instanceof PyTuple
                    || v instanceof Undefined;
            case "sequence" -> v instanceof String || v instanceof List<?> || v instanceof Map<?, ?> || v instanceof PyTuple;
            case "callable" -> v instanceof PyCallable;
            case "escaped" -> false;
            case "sameas" -> v == a0 || (v instanceof Boolean && v.equals(a0)) || (v instanceof Long && v.equals(a0)
                    && (long) v >= -5 && (long) v <= 256);
            case "in" -> PyOps.contains(a0, v);
            case "eq", "equalto", "==" -> PyOps.eq(v, a0);
            case "ne", "!=" -> !PyOps.eq(v, a0);
            case "lt", "lessthan", "<" -> PyOps.compare(v, a0, "<") < 0;
            case "le", "<=" -> PyOps.compare(v, a0, "<=") <= 0;
            case "gt", "greaterthan", ">" -> PyOps.compare(v, a0, ">") > 0;
            case "ge", ">=" -> PyOps.compare(v, a0, ">=") >= 0;
            case "odd" -> Math.floorMod(intArg(v, "odd"), 2) == 1;
            case "even" -> Math.floorMod(intArg(v, "even"), 2) == 0;
            case "divisibleby" -> {
                long d = intArg(a0, "divisibleby");
                if (d == 0) {
                    throw new PyError("integer division or modulo by zero");
                }
                yield Math.floorMod(intArg(v, "divisibleby"), d) == 0;
            }
            case "lower" -> PyOps.str(v).equals(PyStr.lower(PyOps.str(v)));
            case "upper" -> PyOps.str(v).equals(PyStr.upper(PyOps.str(v)));
            case "filter" -> v instanceof String s && FILTERS.contains(s);
            case "test" -> v instanceof String s && TESTS.contains(s);
            default -> throw new PyError("No test named '" + name + "'");
        };
    }

    // ---------------- filters ----------------

    private static Object attrPath(Object item, String attribute) throws PyError {
        Object v = item;
        for (String part : attribute.split("\\.")) {
            Object key = part;
            if (!part.isEmpty() && part.chars().allMatch(Character::isDigit)) {
                key = Long.parseLong(part);
            }
            v = PyOps.getitem(v, key);
        }
        return v;
    }

    private static Object sortKey(Object v, boolean caseSensitive) {
        return !caseSensitive && v instanceof String s ? PyStr.lower(s) : v;
    }

    private static int cmp(Object a, Object b, List<PyError> failure) {
        try {
            return PyOps.compare(a, b, "<");
        } catch (PyError e) {
            failure.add(e);
            return 0;
        }
    }

    static Object filter(Evaluator ev, String name, Object v, List<Object> args, List<String> kn, List<Object> kv, Node at)
            throws PyError, TemplateException {
        switch (name) {
            case "abs" -> {
                if (v instanceof Double d) {
                    return Math.abs(d);
                }
                if (PyOps.isNumber(v)) {
                    return Math.abs(PyOps.asLong(v));
                }
                throw new PyError("bad operand type for abs(): '" + PyOps.typeName(v) + "'");
            }
            case "attr" -> {
                // Jinja2's attr filter looks up attributes only, never items.
                String attrName = strArg(arg(args, kn, kv, 0, "name", null), "attr");
                if (v instanceof Map<?, ?> && !Set.of("get", "items", "keys", "values", "copy").contains(attrName)) {
                    return Undefined.missingAttr(v, attrName);
                }
                return PyOps.getattr(v, attrName);
            }
            case "capitalize" -> {
                return PyStr.capitalize(PyOps.str(v));
            }
            case "center" -> {
                String s = PyOps.str(v);
                int width = (int) intArg(arg(args, kn, kv, 0, "width", 80L), "center");
                int len = PyStr.length(s);
                if (width <= len) {
                    return s;
                }
                int total = width - len;
                int left = total / 2 + (total & width & 1);
                return " ".repeat(left) + s + " ".repeat(total - left);
            }
            case "count", "length" -> {
                return length(v);
            }
            case "d", "default" -> {
                Object dflt = arg(args, kn, kv, 0, "default_value", "");
                boolean bool = PyOps.truthy(arg(args, kn, kv, 1, "boolean", false));
                if (v instanceof Undefined || (bool && !PyOps.truthy(v))) {
                    return dflt;
                }
                return v;
            }
            case "dictsort" -> {
                if (!(v instanceof Map<?, ?> m)) {
                    throw new PyError("You can only sort by either \"key\" or \"value\"");
                }
                boolean cs = PyOps.truthy(arg(args, kn, kv, 0, "case_sensitive", false));
                String by = PyOps.str(arg(args, kn, kv, 1, "by", "key"));
                boolean rev = PyOps.truthy(arg(args, kn, kv, 2, "reverse", false));
                List<Object> items = items(m);
                int pos = by.equals("value") ? 1 : 0;
                List<PyError> failure = new ArrayList<>();
                items.sort((x, y) -> cmp(sortKey(((PyTuple) x).items().get(pos), cs), sortKey(((PyTuple) y).items().get(pos), cs), failure));
                if (!failure.isEmpty()) {
                    throw failure.get(0);
                }
                if (rev) {
                    Collections.reverse(items);
                }
                return items;
            }
            case "e", "escape", "forceescape" -> {
                return htmlEscape(PyOps.str(v));
            }
            case "first" -> {
                if (v instanceof Undefined u) {
                    throw new PyError(u.message);
                }
                List<Object> items = PyOps.iterate(v);
                return items.isEmpty() ? new Undefined("No first item, sequence was empty.") : items.get(0);
            }
            case "last" -> {
                if (v instanceof Undefined u) {
                    throw new PyError(u.message);
                }
                List<Object> items = PyOps.iterate(v);
                return items.isEmpty() ? new Undefined("No last item, sequence was empty.") : items.get(items.size() - 1);
            }
            case "float" -> {
                Object dflt = arg(args, kn, kv, 0, "default", 0.0);
                if (PyOps.isNumber(v)) {
                    return PyOps.asDouble(v);
                }
                if (v instanceof String s) {
                    try {
                        String t = PyStr.strip(s, null).replace("_", "");
                        return switch (t.toLowerCase(Locale.ROOT)) {
                            case "nan", "+nan", "-nan" -> Double.NaN;
                            case "inf", "+inf", "infinity", "+infinity" -> Double.POSITIVE_INFINITY;
                            case "-inf", "-infinity" -> Double.NEGATIVE_INFINITY;
                            default -> {
                                if (t.isEmpty() || t.endsWith("d") || t.endsWith("f") || t.endsWith("D") || t.endsWith("F")
                                        || t.startsWith("0x") || t.startsWith("0X")) {
                                    yield dflt;
                                }
                                yield Double.parseDouble(t);
                            }
                        };
                    } catch (NumberFormatException e) {
                        return dflt;
                    }
                }
                return dflt;
            }
            case "format" -> {
                List<Object> all = new ArrayList<>(args);
                return percentFormat(PyOps.str(v), all.size() == 1 ? all.get(0) : new PyTuple(Collections.unmodifiableList(all)));
            }
            case "indent" -> {
                Object w = arg(args, kn, kv, 0, "width", 4L);
                String ind = w instanceof String ws ? ws : " ".repeat((int) Math.max(0, intArg(w, "indent")));
                boolean first = PyOps.truthy(arg(args, kn, kv, 1, "first", false));
                boolean blank = PyOps.truthy(arg(args, kn, kv, 2, "blank", false));
                // Jinja2: rv = "\n".join(...) on value + "\n" then strips the added trailing newline handling.
                return jinjaIndent(PyOps.str(v), ind, first, blank);
            }
            case "int" -> {
                Object dflt = arg(args, kn, kv, 0, "default", 0L);
                long base = intArg(arg(args, kn, kv, 1, "base", 10L), "int");
                if (v instanceof Boolean || PyOps.isInt(v)) {
                    return PyOps.asLong(v);
                }
                if (v instanceof Double d) {
                    return Double.isFinite(d) ? (Object) (long) d.doubleValue() : dflt;
                }
                if (v instanceof String s) {
                    String t = PyStr.strip(s, null).replace("_", "");
                    String digits = t.startsWith("+") || t.startsWith("-") ? t.substring(1) : t;
                    String sign = t.startsWith("-") ? "-" : "";
                    String lower = digits.toLowerCase(Locale.ROOT);
                    int b = (int) base;
                    if ((b == 16 || b == 0) && lower.startsWith("0x")) {
                        digits = digits.substring(2);
                        b = 16;
                    } else if ((b == 8 || b == 0) && lower.startsWith("0o")) {
                        digits = digits.substring(2);
                        b = 8;
                    } else if ((b == 2 || b == 0) && lower.startsWith("0b")) {
                        digits = digits.substring(2);
                        b = 2;
                    } else if (b == 0) {
                        b = 10;
                    }
                    try {
                        return Long.parseLong(sign + digits, b);
                    } catch (NumberFormatException e) {
                        try {
                            double d = Double.parseDouble(t);
                            return Double.isFinite(d) && !t.matches(".*[dDfFxX].*") ? (Object) (long) d : dflt;
                        } catch (NumberFormatException e2) {
                            return dflt;
                        }
                    }
                }
                return dflt;
            }
            case "items" -> {
                if (v instanceof Undefined) {
                    return new ArrayList<>();
                }
                if (v instanceof Map<?, ?> m) {
                    return items(m);
                }
                throw new PyError("Can only get item pairs from a mapping.");
            }
            case "join" -> {
                String sep = PyOps.str(arg(args, kn, kv, 0, "d", ""));
                Object attribute = arg(args, kn, kv, 1, "attribute", null);
                StringBuilder sb = new StringBuilder();
                boolean first = true;
                for (Object item : PyOps.iterate(v)) {
                    if (!first) {
                        sb.append(sep);
                    }
                    first = false;
                    PyOps.appendStr(sb, attribute == null ? item : attrPath(item, PyOps.str(attribute)));
                }
                return sb.toString();
            }
            case "list" -> {
                return new ArrayList<>(PyOps.iterate(v));
            }
            case "lower" -> {
                return PyStr.lower(PyOps.str(v));
            }
            case "upper" -> {
                return PyStr.upper(PyOps.str(v));
            }
            case "map" -> {
                List<Object> items = PyOps.iterate(v);
                List<Object> out = new ArrayList<>(items.size());
                int ak = kn.indexOf("attribute");
                if (ak >= 0) {
                    String attribute = PyOps.str(kv.get(ak));
                    int dk = kn.indexOf("default");
                    for (Object item : items) {
                        Object r = attrPath(item, attribute);
                        out.add(r instanceof Undefined && dk >= 0 ? kv.get(dk) : r);
                    }
                    return out;
                }
                if (args.isEmpty()) {
                    throw new PyError("map requires a filter argument");
                }
                String fname = strArg(args.get(0), "map");
                if (!FILTERS.contains(fname)) {
                    throw new PyError("No filter named '" + fname + "'.");
                }
                List<Object> rest = new ArrayList<>(args.subList(1, args.size()));
                for (Object item : items) {
                    out.add(filter(ev, fname, item, rest, kn, kv, at));
                }
                return out;
            }
            case "max", "min" -> {
                boolean cs = PyOps.truthy(arg(args, kn, kv, 0, "case_sensitive", false));
                Object attribute = arg(args, kn, kv, 1, "attribute", null);
                List<Object> items = PyOps.iterate(v);
                if (items.isEmpty()) {
                    return new Undefined("No aggregated item, sequence was empty.");
                }
                Object best = null;
                Object bestKey = null;
                for (Object item : items) {
                    Object key = sortKey(attribute == null ? item : attrPath(item, PyOps.str(attribute)), cs);
                    if (best == null && bestKey == null) {
                        best = item;
                        bestKey = key;
                        continue;
                    }
                    int c = PyOps.compare(key, bestKey, "<");
                    if (name.equals("max") ? c > 0 : c < 0) {
                        best = item;
                        bestKey = key;
                    }
                }
                return best;
            }
            case "select", "reject", "selectattr", "rejectattr" -> {
                boolean byAttr = name.endsWith("attr");
                boolean want = name.startsWith("select");
                int off = 0;
                String attribute = null;
                if (byAttr) {
                    attribute = strArg(arg(args, kn, kv, 0, "attribute", null), name);
                    off = 1;
                }
                String testName = args.size() > off ? strArg(args.get(off), name) : null;
                if (testName != null && !TESTS.contains(testName)) {
                    throw new PyError("No test named '" + testName + "'.");
                }
                List<Object> testArgs = args.size() > off + 1 ? new ArrayList<>(args.subList(off + 1, args.size())) : List.of();
                List<Object> out = new ArrayList<>();
                for (Object item : PyOps.iterate(v)) {
                    Object probe = byAttr ? attrPath(item, attribute) : item;
                    boolean r = testName == null ? PyOps.truthy(probe) : test(ev, testName, probe, testArgs);
                    if (r == want) {
                        out.add(item);
                    }
                }
                return out;
            }
            case "replace" -> {
                String s = PyOps.str(v);
                String old = PyOps.str(arg(args, kn, kv, 0, "old", ""));
                String neu = PyOps.str(arg(args, kn, kv, 1, "new", ""));
                Object count = arg(args, kn, kv, 2, "count", null);
                return PyStr.replace(s, old, neu, count == null ? -1 : intArg(count, "replace"));
            }
            case "reverse" -> {
                if (v instanceof String s) {
                    return new StringBuilder(s).reverse().toString();
                }
                List<Object> items = new ArrayList<>(PyOps.iterate(v));
                Collections.reverse(items);
                return items;
            }
            case "round" -> {
                long precision = intArg(arg(args, kn, kv, 0, "precision", 0L), "round");
                String method = PyOps.str(arg(args, kn, kv, 1, "method", "common"));
                double d = PyOps.asDouble(v);
                double f = Math.pow(10, precision);
                double r = switch (method) {
                    case "ceil" -> Math.ceil(d * f) / f;
                    case "floor" -> Math.floor(d * f) / f;
                    // Python round(): correctly rounded from the exact binary value, ties to even.
                    case "common" -> Double.isFinite(d) ? new java.math.BigDecimal(d)
                            .setScale((int) precision, java.math.RoundingMode.HALF_EVEN).doubleValue() : d;
                    default -> throw new PyError("method must be common, ceil or floor");
                };
                return r;
            }
            case "safe", "string" -> {
                return name.equals("safe") ? v : PyOps.str(v);
            }
            case "sort" -> {
                boolean rev = PyOps.truthy(arg(args, kn, kv, 0, "reverse", false));
                boolean cs = PyOps.truthy(arg(args, kn, kv, 1, "case_sensitive", false));
                Object attribute = arg(args, kn, kv, 2, "attribute", null);
                List<Object> items = new ArrayList<>(PyOps.iterate(v));
                List<Object> keys = new ArrayList<>(items.size());
                for (Object item : items) {
                    keys.add(sortKey(attribute == null ? item : attrPath(item, PyOps.str(attribute)), cs));
                }
                Integer[] idx = new Integer[items.size()];
                for (int i = 0; i < idx.length; i++) {
                    idx[i] = i;
                }
                List<PyError> failure = new ArrayList<>();
                java.util.Arrays.sort(idx, (x, y) -> rev ? cmp(keys.get(y), keys.get(x), failure) : cmp(keys.get(x), keys.get(y), failure));
                if (!failure.isEmpty()) {
                    throw failure.get(0);
                }
                List<Object> out = new ArrayList<>(items.size());
                for (Integer i : idx) {
                    out.add(items.get(i));
                }
                return out;
            }
            case "sum" -> {
                Object attribute = arg(args, kn, kv, 0, "attribute", null);
                Object acc = arg(args, kn, kv, 1, "start", 0L);
                for (Object item : PyOps.iterate(v)) {
                    acc = PyOps.binary("+", acc, attribute == null ? item : attrPath(item, PyOps.str(attribute)));
                }
                return acc;
            }
            case "title" -> {
                return jinjaTitle(PyOps.str(v));
            }
            case "tojson" -> {
                boolean ensureAscii = PyOps.truthy(arg(args, kn, kv, 0, "ensure_ascii", false));
                Object indent = arg(args, kn, kv, 1, "indent", null);
                Object separators = arg(args, kn, kv, 2, "separators", null);
                boolean sortKeys = PyOps.truthy(arg(args, kn, kv, 3, "sort_keys", false));
                String ind = null;
                if (indent instanceof String s) {
                    ind = s;
                } else if (indent != null) {
                    ind = " ".repeat((int) Math.max(0, intArg(indent, "indent")));
                }
                String itemSep = null;
                String keySep = null;
                if (separators != null) {
                    List<Object> seps = PyOps.iterate(separators);
                    if (seps.size() != 2) {
                        throw new PyError("separators must be a (item_separator, key_separator) pair");
                    }
                    itemSep = strArg(seps.get(0), "separators");
                    keySep = strArg(seps.get(1), "separators");
                }
                String json = PyOps.toJson(v, ind, itemSep, keySep, sortKeys);
                return ensureAscii ? asciiEscape(json) : json;
            }
            case "trim" -> {
                Object chars = arg(args, kn, kv, 0, "chars", null);
                return PyStr.strip(PyOps.str(v), chars == null ? null : strArg(chars, "trim"));
            }
            case "truncate" -> {
                String s = PyOps.str(v);
                long length = intArg(arg(args, kn, kv, 0, "length", 255L), "truncate");
                boolean killwords = PyOps.truthy(arg(args, kn, kv, 1, "killwords", false));
                String end = PyOps.str(arg(args, kn, kv, 2, "end", "..."));
                Object leewayArg = arg(args, kn, kv, 3, "leeway", 5L);
                long leeway = leewayArg == null ? 5 : intArg(leewayArg, "truncate");
                int n = PyStr.length(s);
                if (n <= length + leeway) {
                    return s;
                }
                int cut = (int) Math.max(0, length - PyStr.length(end));
                String head = s.substring(0, PyStr.offset(s, cut));
                if (killwords) {
                    return head + end;
                }
                int sp = head.lastIndexOf(' ');
                return (sp >= 0 ? head.substring(0, sp) : head) + end;
            }
            case "unique" -> {
                boolean cs = PyOps.truthy(arg(args, kn, kv, 0, "case_sensitive", false));
                Object attribute = arg(args, kn, kv, 1, "attribute", null);
                List<Object> out = new ArrayList<>();
                List<Object> seen = new ArrayList<>();
                for (Object item : PyOps.iterate(v)) {
                    Object key = sortKey(attribute == null ? item : attrPath(item, PyOps.str(attribute)), cs);
                    if (!PyOps.contains(seen, key)) {
                        seen.add(key);
                        out.add(item);
                    }
                }
                return out;
            }
            case "wordcount" -> {
                java.util.regex.Matcher m = java.util.regex.Pattern.compile("\\w+", java.util.regex.Pattern.UNICODE_CHARACTER_CLASS)
                        .matcher(PyOps.str(v));
                long c = 0;
                while (m.find()) {
                    c++;
                }
                return c;
            }
            default -> throw new PyError("No filter named '" + name + "'.");
        }
    }

    static Object length(Object v) throws PyError {
        if (v instanceof String s) {
            return (long) PyStr.length(s);
        }
        if (v instanceof List<?> l) {
            return (long) l.size();
        }
        if (v instanceof Map<?, ?> m) {
            return (long) m.size();
        }
        if (v instanceof PyTuple t) {
            return (long) t.items().size();
        }
        if (v instanceof Undefined) {
            return 0L;
        }
        throw new PyError("object of type '" + PyOps.typeName(v) + "' has no len()");
    }

    static List<Object> items(Map<?, ?> m) {
        List<Object> out = new ArrayList<>(m.size());
        for (Map.Entry<?, ?> e : m.entrySet()) {
            out.add(new PyTuple(java.util.Arrays.asList(e.getKey(), e.getValue())));
        }
        return out;
    }

    private static String jinjaIndent(String s, String ind, boolean first, boolean blank) {
        String newline = "\n";
        s = s + newline;
        List<Object> lines = PyStr.splitlines(s, false);
        StringBuilder rv = new StringBuilder();
        if (blank) {
            for (int i = 1; i < lines.size(); i++) {
                rv.append(newline).append(ind).append((String) lines.get(i));
            }
        } else {
            for (int i = 1; i < lines.size(); i++) {
                String line = (String) lines.get(i);
                rv.append(newline);
                if (!line.isEmpty()) {
                    rv.append(ind).append(line);
                }
            }
        }
        String head = lines.isEmpty() ? "" : (String) lines.get(0);
        String out = head + rv;
        if (first) {
            out = ind + out;
        }
        return out;
    }

    private static String jinjaTitle(String s) {
        // Jinja2 do_title: split on runs of [-\s({\[<], capitalize the first char of each piece, lower the rest.
        StringBuilder sb = new StringBuilder();
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("([-\\s({\\[<]+)", java.util.regex.Pattern.UNICODE_CHARACTER_CLASS)
                .matcher(s);
        int last = 0;
        while (m.find()) {
            titlePiece(sb, s.substring(last, m.start()));
            titlePiece(sb, m.group());
            last = m.end();
        }
        titlePiece(sb, s.substring(last));
        return sb.toString();
    }

    private static void titlePiece(StringBuilder sb, String item) {
        if (item.isEmpty()) {
            return;
        }
        int c = item.codePointAt(0);
        sb.append(PyStr.upper(Character.toString(c))).append(PyStr.lower(item.substring(Character.charCount(c))));
    }

    private static String htmlEscape(String s) {
        StringBuilder sb = new StringBuilder(s.length());
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '&' -> sb.append("&amp;");
                case '<' -> sb.append("&lt;");
                case '>' -> sb.append("&gt;");
                case '"' -> sb.append("&#34;");
                case '\'' -> sb.append("&#39;");
                default -> sb.append(c);
            }
        }
        return sb.toString();
    }

    private static String asciiEscape(String json) {
        StringBuilder sb = new StringBuilder(json.length());
        for (int i = 0; i < json.length(); i++) {
            char c = json.charAt(i);
            if (c < 0x7f) {
                sb.append(c);
            } else {
                sb.append(String.format("\\u%04x", (int) c));
            }
        }
        return sb.toString();
    }

    // ---------------- %-formatting ----------------

    private static final java.util.regex.Pattern PCT =
            java.util.regex.Pattern.compile("%(?:\\(([^)]*)\\))?([-+ 0#]*)(\\d+)?(?:\\.(\\d+))?([diouxXeEfFgGcrsa%])");

    static String percentFormat(String fmt, Object args) throws PyError {
        List<Object> list = args instanceof PyTuple t ? t.items() : List.of(args == null ? "None" : args);
        if (args == null) {
            list = java.util.Arrays.asList((Object) null);
        }
        java.util.regex.Matcher m = PCT.matcher(fmt);
        StringBuilder sb = new StringBuilder();
        int last = 0;
        int ai = 0;
        while (m.find()) {
            sb.append(fmt, last, m.start());
            last = m.end();
            char conv = m.group(5).charAt(0);
            if (conv == '%') {
                sb.append('%');
                continue;
            }
            Object a;
            if (m.group(1) != null) {
                if (!(args instanceof Map<?, ?> mm)) {
                    throw new PyError("format requires a mapping");
                }
                a = mm.get(m.group(1));
            } else {
                if (ai >= list.size()) {
                    throw new PyError("not enough arguments for format string");
                }
                a = list.get(ai++);
            }
            String flags = m.group(2);
            int width = m.group(3) == null ? 0 : Integer.parseInt(m.group(3));
            Integer prec = m.group(4) == null ? null : Integer.parseInt(m.group(4));
            String body = switch (conv) {
                case 's' -> prec == null ? PyOps.str(a) : PyOps.str(a).substring(0, Math.min(prec, PyOps.str(a).length()));
                case 'r', 'a' -> PyOps.repr(a);
                case 'd', 'i', 'u' -> {
                    if (!PyOps.isNumber(a)) {
                        throw new PyError("%d format: a real number is required, not " + PyOps.typeName(a));
                    }
                    long val = a instanceof Double d ? (long) d.doubleValue() : PyOps.asLong(a);
                    yield (flags.contains("+") && val >= 0 ? "+" : "") + val;
                }
                case 'f', 'F' -> {
                    if (!PyOps.isNumber(a)) {
                        throw new PyError("must be real number, not " + PyOps.typeName(a));
                    }
                    yield new java.math.BigDecimal(PyOps.asDouble(a)).setScale(prec == null ? 6 : prec,
                            java.math.RoundingMode.HALF_EVEN).toPlainString();
                }
                case 'x' -> Long.toHexString(PyOps.asLong(a));
                case 'X' -> Long.toHexString(PyOps.asLong(a)).toUpperCase(Locale.ROOT);
                case 'o' -> Long.toOctalString(PyOps.asLong(a));
                case 'c' -> a instanceof String s ? s : Character.toString((int) PyOps.asLong(a));
                default -> String.format(Locale.ROOT, "%" + (prec == null ? "" : "." + prec) + conv, PyOps.asDouble(a));
            };
            if (body.length() < width) {
                if (flags.contains("-")) {
                    body = body + " ".repeat(width - body.length());
                } else if (flags.contains("0") && conv != 's' && conv != 'r') {
                    boolean neg = body.startsWith("-");
                    String digits = neg ? body.substring(1) : body;
                    body = (neg ? "-" : "") + "0".repeat(width - body.length()) + digits;
                } else {
                    body = " ".repeat(width - body.length()) + body;
                }
            }
            sb.append(body);
        }
        sb.append(fmt, last, fmt.length());
        if (ai < list.size() && !(args instanceof Map<?, ?>)) {
            throw new PyError("not all arguments converted during string formatting");
        }
        return sb.toString();
    }

    // ---------------- methods ----------------

    static Object callMethod(Evaluator ev, Object self, String name, List<Object> args, List<String> kn, List<Object> kv,
            Node at) throws TemplateException {
        try {
            if (self instanceof String s) {
                return strMethod(s, name, args, kn, kv);
            }
            if (self instanceof Map<?, ?> m) {
                return switch (name) {
                    case "get" -> {
                        Object k = PyOps.findKey(m, arg(args, kn, kv, 0, "key", null));
                        yield k == PyOps.NO_KEY ? arg(args, kn, kv, 1, "default", null) : m.get(k);
                    }
                    case "items" -> new Values.DictView("dict_items", items(m));
                    case "keys" -> new Values.DictView("dict_keys", m.keySet());
                    case "values" -> new Values.DictView("dict_values", m.values());
                    case "copy" -> new LinkedHashMap<Object, Object>(m);
                    default -> throw new PyError("'dict' object has no attribute '" + name + "'");
                };
            }
            if (self instanceof List<?> || self instanceof PyTuple) {
                List<?> l = self instanceof PyTuple t ? t.items() : (List<?>) self;
                Object a0 = arg(args, kn, kv, 0, "value", null);
                return switch (name) {
                    case "index" -> {
                        for (int i = 0; i < l.size(); i++) {
                            if (PyOps.eq(l.get(i), a0)) {
                                yield (long) i;
                            }
                        }
                        throw new PyError(PyOps.repr(a0) + " is not in list");
                    }
                    case "count" -> {
                        long c = 0;
                        for (Object o : l) {
                            if (PyOps.eq(o, a0)) {
                                c++;
                            }
                        }
                        yield c;
                    }
                    case "copy" -> new ArrayList<Object>(l);
                    default -> throw new PyError("'list' object has no attribute '" + name + "'");
                };
            }
            if (self instanceof LoopContext lc) {
                if (name.equals("cycle")) {
                    if (args.isEmpty()) {
                        throw new PyError("no items for cycling given");
                    }
                    return args.get(lc.index0 % args.size());
                }
                // loop.changed(*values): true on the first call and whenever the values differ from the last call's
                boolean changed = lc.lastChanged == null || !PyOps.eq(lc.lastChanged, args);
                lc.lastChanged = new ArrayList<>(args);
                return changed;
            }
            if (self instanceof Double d && name.equals("is_integer")) {
                return d == Math.rint(d) && !Double.isInfinite(d);
            }
            throw new PyError("'" + PyOps.typeName(self) + "' object has no attribute '" + name + "'");
        } catch (PyError e) {
            throw Evaluator.error(e, at);
        }
    }

    private static String charsArg(Object o, String method) throws PyError {
        if (o == null) {
            return null;
        }
        if (o instanceof String s) {
            return s;
        }
        throw new PyError(method + " arg must be None or str");
    }

    private static Object strMethod(String s, String name, List<Object> args, List<String> kn, List<Object> kv)
            throws PyError {
        switch (name) {
            case "startswith", "endswith" -> {
                Object p = arg(args, kn, kv, 0, "prefix", null);
                String target = s;
                if (args.size() > 1) {
                    int n = PyStr.length(s);
                    long st = args.get(1) == null ? 0 : intArg(args.get(1), name);
                    long en = args.size() > 2 && args.get(2) != null ? intArg(args.get(2), name) : n;
                    st = st < 0 ? Math.max(0, st + n) : Math.min(st, n);
                    en = en < 0 ? Math.max(0, en + n) : Math.min(en, n);
                    if (st > en) {
                        return false;
                    }
                    target = s.substring(PyStr.offset(s, (int) st), PyStr.offset(s, (int) en));
                }
                List<Object> options = p instanceof PyTuple t ? t.items() : List.of(p == null ? new Undefined("") : p);
                for (Object o : options) {
                    if (!(o instanceof String x)) {
                        throw new PyError(name + " first arg must be str or a tuple of str, not " + PyOps.typeName(o));
                    }
                    if (name.equals("startswith") ? target.startsWith(x) : target.endsWith(x)) {
                        return true;
                    }
                }
                return false;
            }
            case "split", "rsplit" -> {
                Object sep = arg(args, kn, kv, 0, "sep", null);
                long max = intArg(arg(args, kn, kv, 1, "maxsplit", -1L), name);
                String sepStr = charsArg(sep, name);
                if (sepStr != null && sepStr.isEmpty()) {
                    throw new PyError("empty separator");
                }
                return name.equals("split") ? PyStr.split(s, sepStr, max) : PyStr.rsplit(s, sepStr, max);
            }
            case "splitlines" -> {
                return PyStr.splitlines(s, PyOps.truthy(arg(args, kn, kv, 0, "keepends", false)));
            }
            case "strip" -> {
                return PyStr.strip(s, charsArg(arg(args, kn, kv, 0, "chars", null), name));
            }
            case "lstrip" -> {
                return PyStr.lstrip(s, charsArg(arg(args, kn, kv, 0, "chars", null), name));
            }
            case "rstrip" -> {
                return PyStr.rstrip(s, charsArg(arg(args, kn, kv, 0, "chars", null), name));
            }
            case "replace" -> {
                String old = strArg(arg(args, kn, kv, 0, "old", null), "replace() argument 1");
                String neu = strArg(arg(args, kn, kv, 1, "new", null), "replace() argument 2");
                return PyStr.replace(s, old, neu, intArg(arg(args, kn, kv, 2, "count", -1L), "replace"));
            }
            case "upper" -> {
                return PyStr.upper(s);
            }
            case "lower", "casefold" -> {
                return PyStr.lower(s);
            }
            case "title" -> {
                return PyStr.title(s);
            }
            case "capitalize" -> {
                return PyStr.capitalize(s);
            }
            case "swapcase" -> {
                StringBuilder sb = new StringBuilder();
                s.codePoints().forEach(c -> sb.append(Character.isUpperCase(c) ? PyStr.lower(Character.toString(c))
                        : Character.isLowerCase(c) ? PyStr.upper(Character.toString(c)) : Character.toString(c)));
                return sb.toString();
            }
            case "find", "rfind", "index", "rindex", "count" -> {
                String sub = strArg(arg(args, kn, kv, 0, "sub", null), name);
                int n = PyStr.length(s);
                long st = args.size() > 1 && args.get(1) != null ? intArg(args.get(1), name) : 0;
                long en = args.size() > 2 && args.get(2) != null ? intArg(args.get(2), name) : n;
                st = st < 0 ? Math.max(0, st + n) : Math.min(st, n);
                en = en < 0 ? Math.max(0, en + n) : Math.min(en, n);
                if (name.equals("count")) {
                    if (st > en) {
                        return 0L;
                    }
                    String region = s.substring(PyStr.offset(s, (int) st), PyStr.offset(s, (int) en));
                    if (sub.isEmpty()) {
                        return (long) PyStr.length(region) + 1;
                    }
                    long c = 0;
                    for (int i = region.indexOf(sub); i >= 0; i = region.indexOf(sub, i + sub.length())) {
                        c++;
                    }
                    return c;
                }
                long r = -1;
                if (st <= en) {
                    int so = PyStr.offset(s, (int) st);
                    int eo = PyStr.offset(s, (int) en);
                    String region = s.substring(so, eo);
                    int i = name.startsWith("r") ? region.lastIndexOf(sub) : region.indexOf(sub);
                    if (i >= 0) {
                        r = PyStr.cpIndex(s, so + i);
                    }
                }
                if (r < 0 && name.contains("index")) {
                    throw new PyError("substring not found");
                }
                return r;
            }
            case "join" -> {
                StringBuilder sb = new StringBuilder();
                boolean first = true;
                for (Object o : PyOps.iterate(arg(args, kn, kv, 0, "iterable", null))) {
                    if (!(o instanceof String x)) {
                        throw new PyError("sequence item: expected str instance, " + PyOps.typeName(o) + " found");
                    }
                    if (!first) {
                        sb.append(s);
                    }
                    first = false;
                    sb.append(x);
                }
                return sb.toString();
            }
            case "format" -> {
                return strFormat(s, args, kn, kv);
            }
            case "isdigit", "isnumeric", "isdecimal" -> {
                return !s.isEmpty() && s.codePoints().allMatch(Character::isDigit);
            }
            case "isalpha" -> {
                return !s.isEmpty() && s.codePoints().allMatch(Character::isLetter);
            }
            case "isalnum" -> {
                return !s.isEmpty() && s.codePoints().allMatch(Character::isLetterOrDigit);
            }
            case "isspace" -> {
                return !s.isEmpty() && s.chars().allMatch(PyStr::isSpace);
            }
            case "isupper", "islower" -> {
                boolean cased = false;
                for (int i = 0; i < s.length(); ) {
                    int c = s.codePointAt(i);
                    i += Character.charCount(c);
                    if (name.equals("isupper") ? Character.isLowerCase(c) || Character.isTitleCase(c)
                            : Character.isUpperCase(c) || Character.isTitleCase(c)) {
                        return false;
                    }
                    cased |= Character.isUpperCase(c) || Character.isLowerCase(c) || Character.isTitleCase(c);
                }
                return cased;
            }
            case "istitle" -> {
                return !s.isEmpty() && PyStr.title(s).equals(s) && !PyStr.lower(s).equals(PyStr.upper(s));
            }
            case "zfill" -> {
                int width = (int) intArg(arg(args, kn, kv, 0, "width", 0L), name);
                int n = PyStr.length(s);
                if (n >= width) {
                    return s;
                }
                boolean sign = !s.isEmpty() && (s.charAt(0) == '-' || s.charAt(0) == '+');
                return (sign ? s.substring(0, 1) : "") + "0".repeat(width - n) + (sign ? s.substring(1) : s);
            }
            case "center", "ljust", "rjust" -> {
                int width = (int) intArg(arg(args, kn, kv, 0, "width", 0L), name);
                String fill = PyOps.str(arg(args, kn, kv, 1, "fillchar", " "));
                int n = PyStr.length(s);
                if (n >= width) {
                    return s;
                }
                int total = width - n;
                int left = switch (name) {
                    case "ljust" -> 0;
                    case "rjust" -> total;
                    default -> total / 2 + (total & width & 1);
                };
                return fill.repeat(left) + s + fill.repeat(total - left);
            }
            case "partition", "rpartition" -> {
                String sep = strArg(arg(args, kn, kv, 0, "sep", null), name);
                int i = name.equals("partition") ? s.indexOf(sep) : s.lastIndexOf(sep);
                List<Object> parts = i < 0
                        ? (name.equals("partition") ? java.util.Arrays.asList(s, "", "") : java.util.Arrays.asList("", "", s))
                        : java.util.Arrays.asList(s.substring(0, i), sep, s.substring(i + sep.length()));
                return new PyTuple(Collections.unmodifiableList(parts));
            }
            case "removeprefix" -> {
                String p = strArg(arg(args, kn, kv, 0, "prefix", null), name);
                return s.startsWith(p) ? s.substring(p.length()) : s;
            }
            case "removesuffix" -> {
                String p = strArg(arg(args, kn, kv, 0, "suffix", null), name);
                return s.endsWith(p) && !p.isEmpty() ? s.substring(0, s.length() - p.length()) : s;
            }
            case "expandtabs" -> {
                return s.replace("\t", " ".repeat((int) intArg(arg(args, kn, kv, 0, "tabsize", 8L), name)));
            }
            default -> throw new PyError("'str' object has no attribute '" + name + "'");
        }
    }

    /** str.format with auto/explicit positional and keyword fields; format specs other than empty are not supported. */
    private static String strFormat(String s, List<Object> args, List<String> kn, List<Object> kv) throws PyError {
        StringBuilder sb = new StringBuilder();
        int auto = 0;
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '{') {
                if (i + 1 < s.length() && s.charAt(i + 1) == '{') {
                    sb.append('{');
                    i++;
                    continue;
                }
                int j = s.indexOf('}', i);
                if (j < 0) {
                    throw new PyError("Single '{' encountered in format string");
                }
                String field = s.substring(i + 1, j);
                String spec = "";
                int colon = field.indexOf(':');
                if (colon >= 0) {
                    spec = field.substring(colon + 1);
                    field = field.substring(0, colon);
                }
                Object v;
                if (field.isEmpty()) {
                    if (auto >= args.size()) {
                        throw new PyError("Replacement index " + auto + " out of range for positional args tuple");
                    }
                    v = args.get(auto++);
                } else if (field.chars().allMatch(Character::isDigit)) {
                    int k = Integer.parseInt(field);
                    if (k >= args.size()) {
                        throw new PyError("Replacement index " + k + " out of range for positional args tuple");
                    }
                    v = args.get(k);
                } else {
                    int k = kn.indexOf(field);
                    if (k < 0) {
                        throw new PyError("KeyError: " + PyStr.repr(field));
                    }
                    v = kv.get(k);
                }
                if (!spec.isEmpty()) {
                    throw new PyError("format spec '" + spec + "' is not supported");
                }
                PyOps.appendStr(sb, v);
                i = j;
            } else if (c == '}') {
                if (i + 1 < s.length() && s.charAt(i + 1) == '}') {
                    i++;
                    sb.append('}');
                } else {
                    throw new PyError("Single '}' encountered in format string");
                }
            } else {
                sb.append(c);
            }
        }
        return sb.toString();
    }
}
