package io.kvgate.index.template;

import io.kvgate.index.template.Values.LoopContext;
import io.kvgate.index.template.Values.Namespace;
import io.kvgate.index.template.Values.PyCallable;
import io.kvgate.index.template.Values.PyTuple;
import io.kvgate.index.template.Values.Undefined;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Python/Jinja2 value semantics: {@code str()}, {@code repr()}, truthiness, equality, ordering, arithmetic, membership,
 * attribute and item lookup (sandboxed), iteration and transformers' {@code tojson} ({@code json.dumps} with
 * {@code ensure_ascii=False}).
 *
 * <p>Threading contract: stateless, thread-safe. Failures are thrown as {@link PyError} and positioned by the caller.
 */
final class PyOps {
    private PyOps() {
    }

    /** A Python-level error without a position; the evaluator adds line/column. */
    static final class PyError extends Exception {
        final boolean raised;

        PyError(String msg) {
            this(msg, false);
        }

        PyError(String msg, boolean raised) {
            super(msg, null, false, false);
            this.raised = raised;
        }
    }

    static boolean isInt(Object o) {
        return o instanceof Long || o instanceof Integer || o instanceof Short || o instanceof Byte || o instanceof BigInteger;
    }

    static boolean isNumber(Object o) {
        return o instanceof Number || o instanceof Boolean;
    }

    /** int value of an int or bool. */
    static long asLong(Object o) {
        if (o instanceof Boolean b) {
            return b ? 1 : 0;
        }
        return ((Number) o).longValue();
    }

    static double asDouble(Object o) {
        if (o instanceof Boolean b) {
            return b ? 1 : 0;
        }
        return ((Number) o).doubleValue();
    }

    static String typeName(Object o) {
        if (o == null) {
            return "NoneType";
        }
        if (o instanceof Boolean) {
            return "bool";
        }
        if (isInt(o)) {
            return "int";
        }
        if (o instanceof Number) {
            return "float";
        }
        if (o instanceof String) {
            return "str";
        }
        if (o instanceof List) {
            return "list";
        }
        if (o instanceof Map) {
            return "dict";
        }
        if (o instanceof PyTuple) {
            return "tuple";
        }
        if (o instanceof Undefined) {
            return "Undefined";
        }
        if (o instanceof Namespace) {
            return "Namespace";
        }
        if (o instanceof LoopContext) {
            return "LoopContext";
        }
        return o instanceof PyCallable ? "function" : o.getClass().getSimpleName();
    }

    /** How Jinja2 names an object in "has no attribute" messages. */
    static String objectDesc(Object o) {
        return o == null ? "None" : typeName(o) + " object";
    }

    static boolean truthy(Object o) {
        if (o == null || o instanceof Undefined) {
            return false;
        }
        if (o instanceof Boolean b) {
            return b;
        }
        if (o instanceof String s) {
            return !s.isEmpty();
        }
        if (o instanceof Double d) {
            return d != 0.0;
        }
        if (o instanceof Float f) {
            return f != 0.0f;
        }
        if (o instanceof BigInteger b) {
            return b.signum() != 0;
        }
        if (o instanceof Number n) {
            return n.longValue() != 0;
        }
        if (o instanceof List<?> l) {
            return !l.isEmpty();
        }
        if (o instanceof Map<?, ?> m) {
            return !m.isEmpty();
        }
        if (o instanceof PyTuple t) {
            return !t.items().isEmpty();
        }
        return true;
    }

    /** Python str(). */
    static String str(Object o) {
        if (o instanceof String s) {
            return s;
        }
        if (o instanceof Undefined) {
            return "";
        }
        StringBuilder sb = new StringBuilder();
        appendRepr(sb, o, false);
        return sb.toString();
    }

    static String repr(Object o) {
        StringBuilder sb = new StringBuilder();
        appendRepr(sb, o, true);
        return sb.toString();
    }

    static void appendStr(StringBuilder sb, Object o) {
        if (o instanceof String s) {
            sb.append(s);
        } else if (!(o instanceof Undefined)) {
            appendRepr(sb, o, false);
        }
    }

    private static void appendRepr(StringBuilder sb, Object o, boolean quoteStrings) {
        if (o == null) {
            sb.append("None");
        } else if (o instanceof String s) {
            sb.append(quoteStrings ? PyStr.repr(s) : s);
        } else if (o instanceof Boolean b) {
            sb.append(b ? "True" : "False");
        } else if (o instanceof Double || o instanceof Float) {
            sb.append(floatRepr(((Number) o).doubleValue()));
        } else if (o instanceof Number n) {
            sb.append(n.toString());
        } else if (o instanceof Values.DictView dv) {
            sb.append(dv.kind).append('(');
            appendRepr(sb, new ArrayList<Object>(dv), true);
            sb.append(')');
        } else if (o instanceof List<?> l) {
            sb.append('[');
            for (int i = 0; i < l.size(); i++) {
                if (i > 0) {
                    sb.append(", ");
                }
                appendRepr(sb, l.get(i), true);
            }
            sb.append(']');
        } else if (o instanceof PyTuple t) {
            sb.append('(');
            List<Object> l = t.items();
            for (int i = 0; i < l.size(); i++) {
                if (i > 0) {
                    sb.append(", ");
                }
                appendRepr(sb, l.get(i), true);
            }
            sb.append(l.size() == 1 ? ",)" : ")");
        } else if (o instanceof Map<?, ?> m) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                if (!first) {
                    sb.append(", ");
                }
                first = false;
                appendRepr(sb, e.getKey(), true);
                sb.append(": ");
                appendRepr(sb, e.getValue(), true);
            }
            sb.append('}');
        } else if (o instanceof Undefined) {
            sb.append(quoteStrings ? "Undefined" : "");
        } else if (o instanceof Namespace ns) {
            sb.append("<Namespace ");
            appendRepr(sb, ns.attrs, true);
            sb.append('>');
        } else {
            sb.append('<').append(typeName(o)).append('>');
        }
    }

    /** Python repr(float): shortest round-trip digits, fixed notation for 1e-4 <= |x| < 1e16, else d.ddde+XX. */
    static String floatRepr(double d) {
        if (Double.isNaN(d)) {
            return "nan";
        }
        if (Double.isInfinite(d)) {
            return d > 0 ? "inf" : "-inf";
        }
        if (d == 0) {
            return (Double.doubleToRawLongBits(d) < 0) ? "-0.0" : "0.0";
        }
        BigDecimal bd = new BigDecimal(Double.toString(Math.abs(d))).stripTrailingZeros();
        String digits = bd.unscaledValue().toString();
        int exp = digits.length() - 1 - bd.scale();
        StringBuilder sb = new StringBuilder();
        if (d < 0) {
            sb.append('-');
        }
        if (exp >= -4 && exp < 16) {
            if (exp >= 0) {
                if (digits.length() <= exp + 1) {
                    sb.append(digits).append("0".repeat(exp + 1 - digits.length())).append(".0");
                } else {
                    sb.append(digits, 0, exp + 1).append('.').append(digits, exp + 1, digits.length());
                }
            } else {
                sb.append("0.").append("0".repeat(-exp - 1)).append(digits);
            }
        } else {
            sb.append(digits.charAt(0));
            if (digits.length() > 1) {
                sb.append('.').append(digits, 1, digits.length());
            }
            sb.append('e').append(exp < 0 ? '-' : '+');
            int ae = Math.abs(exp);
            if (ae < 10) {
                sb.append('0');
            }
            sb.append(ae);
        }
        return sb.toString();
    }

    static boolean eq(Object a, Object b) {
        if (a == b) {
            return true;
        }
        if (a == null || b == null) {
            return false;
        }
        if (isNumber(a) && isNumber(b)) {
            if ((a instanceof Double || a instanceof Float) || (b instanceof Double || b instanceof Float)) {
                return asDouble(a) == asDouble(b);
            }
            return asLong(a) == asLong(b);
        }
        if (a instanceof String x && b instanceof String y) {
            return x.equals(y);
        }
        if (a instanceof List<?> x && b instanceof List<?> y) {
            return seqEq(x, y);
        }
        if (a instanceof PyTuple x && b instanceof PyTuple y) {
            return seqEq(x.items(), y.items());
        }
        if (a instanceof Map<?, ?> x && b instanceof Map<?, ?> y) {
            if (x.size() != y.size()) {
                return false;
            }
            for (Map.Entry<?, ?> e : x.entrySet()) {
                Object k = findKey(y, e.getKey());
                if (k == NO_KEY || !eq(e.getValue(), y.get(k))) {
                    return false;
                }
            }
            return true;
        }
        if (a instanceof Undefined && b instanceof Undefined) {
            return true;
        }
        return false;
    }

    private static boolean seqEq(List<?> x, List<?> y) {
        if (x.size() != y.size()) {
            return false;
        }
        for (int i = 0; i < x.size(); i++) {
            if (!eq(x.get(i), y.get(i))) {
                return false;
            }
        }
        return true;
    }

    static final Object NO_KEY = new Object();

    /** The key of m equal (Python ==) to key, or NO_KEY. Fast path for exact Java equality. */
    static Object findKey(Map<?, ?> m, Object key) {
        if (key instanceof Integer i) {
            key = (long) i;
        }
        if (m.containsKey(key)) {
            return key;
        }
        if (key instanceof String || key == null) {
            return NO_KEY;
        }
        for (Object k : m.keySet()) {
            if (eq(k, key)) {
                return k;
            }
        }
        return NO_KEY;
    }

    static int compare(Object a, Object b, String op) throws PyError {
        if (isNumber(a) && isNumber(b)) {
            if (isInt(a) || a instanceof Boolean) {
                if (isInt(b) || b instanceof Boolean) {
                    return Long.compare(asLong(a), asLong(b));
                }
            }
            return Double.compare(asDouble(a), asDouble(b));
        }
        if (a instanceof String x && b instanceof String y) {
            return compareCodePoints(x, y);
        }
        if ((a instanceof List<?> || a instanceof PyTuple) && a.getClass() == b.getClass()
                || a instanceof List<?> && b instanceof List<?>) {
            List<?> x = a instanceof PyTuple t ? t.items() : (List<?>) a;
            List<?> y = b instanceof PyTuple t ? t.items() : (List<?>) b;
            for (int i = 0; i < Math.min(x.size(), y.size()); i++) {
                if (!eq(x.get(i), y.get(i))) {
                    return compare(x.get(i), y.get(i), op);
                }
            }
            return Integer.compare(x.size(), y.size());
        }
        if (a instanceof Undefined u) {
            throw new PyError(u.message);
        }
        if (b instanceof Undefined u) {
            throw new PyError(u.message);
        }
        throw new PyError("'" + op + "' not supported between instances of '" + typeName(a) + "' and '" + typeName(b) + "'");
    }

    static int compareCodePoints(String x, String y) {
        int i = 0;
        int j = 0;
        while (i < x.length() && j < y.length()) {
            int c1 = x.codePointAt(i);
            int c2 = y.codePointAt(j);
            if (c1 != c2) {
                return Integer.compare(c1, c2);
            }
            i += Character.charCount(c1);
            j += Character.charCount(c2);
        }
        return Integer.compare(x.length() - i, y.length() - j);
    }

    private static void failUndefined(Object a, Object b) throws PyError {
        if (a instanceof Undefined u) {
            throw new PyError(u.message);
        }
        if (b instanceof Undefined u) {
            throw new PyError(u.message);
        }
    }

    private static boolean isFloat(Object o) {
        return o instanceof Double || o instanceof Float;
    }

    static Object binary(String op, Object a, Object b) throws PyError {
        failUndefined(a, b);
        if (isNumber(a) && isNumber(b)) {
            boolean fl = isFloat(a) || isFloat(b);
            switch (op) {
                case "+" -> {
                    return fl ? (Object) (asDouble(a) + asDouble(b)) : (Object) Math.addExact(asLong(a), asLong(b));
                }
                case "-" -> {
                    return fl ? (Object) (asDouble(a) - asDouble(b)) : (Object) Math.subtractExact(asLong(a), asLong(b));
                }
                case "*" -> {
                    return fl ? (Object) (asDouble(a) * asDouble(b)) : (Object) Math.multiplyExact(asLong(a), asLong(b));
                }
                case "/" -> {
                    if (asDouble(b) == 0) {
                        throw new PyError("division by zero");
                    }
                    return asDouble(a) / asDouble(b);
                }
                case "//" -> {
                    if (asDouble(b) == 0) {
                        throw new PyError("integer division or modulo by zero");
                    }
                    return fl ? (Object) Math.floor(asDouble(a) / asDouble(b)) : (Object) Math.floorDiv(asLong(a), asLong(b));
                }
                case "%" -> {
                    if (asDouble(b) == 0) {
                        throw new PyError("integer modulo by zero");
                    }
                    if (fl) {
                        double x = asDouble(a);
                        double y = asDouble(b);
                        double r = x % y;
                        if (r != 0 && (r < 0) != (y < 0)) {
                            r += y;
                        }
                        return r;
                    }
                    return Math.floorMod(asLong(a), asLong(b));
                }
                case "**" -> {
                    if (!fl && asLong(b) >= 0) {
                        return BigInteger.valueOf(asLong(a)).pow((int) Math.min(asLong(b), 4096)).longValueExact();
                    }
                    return Math.pow(asDouble(a), asDouble(b));
                }
                default -> throw new PyError("unsupported operator " + op);
            }
        }
        if (op.equals("+")) {
            if (a instanceof String x && b instanceof String y) {
                return x + y;
            }
            if (a instanceof List<?> x && b instanceof List<?> y) {
                List<Object> r = new ArrayList<>(x.size() + y.size());
                r.addAll(x);
                r.addAll(y);
                return r;
            }
            if (a instanceof PyTuple x && b instanceof PyTuple y) {
                List<Object> r = new ArrayList<>(x.items());
                r.addAll(y.items());
                return new PyTuple(java.util.Collections.unmodifiableList(r));
            }
        }
        if (op.equals("*")) {
            if (a instanceof String s && (isInt(b) || b instanceof Boolean)) {
                return s.repeat((int) Math.max(0, Math.min(asLong(b), 1 << 20)));
            }
            if (b instanceof String s && (isInt(a) || a instanceof Boolean)) {
                return s.repeat((int) Math.max(0, Math.min(asLong(a), 1 << 20)));
            }
            if (a instanceof List<?> l && (isInt(b) || b instanceof Boolean)) {
                List<Object> r = new ArrayList<>();
                for (long k = 0; k < Math.min(asLong(b), 1 << 16); k++) {
                    r.addAll(l);
                }
                return r;
            }
        }
        if (op.equals("%") && a instanceof String fmt) {
            return Builtins.percentFormat(fmt, b);
        }
        if (op.equals("+") && (a instanceof String || b instanceof String)) {
            throw new PyError("can only concatenate str (not \"" + typeName(a instanceof String ? b : a) + "\") to str");
        }
        throw new PyError("unsupported operand type(s) for " + op + ": '" + typeName(a) + "' and '" + typeName(b) + "'");
    }

    static boolean contains(Object container, Object item) throws PyError {
        if (container instanceof String s) {
            if (item instanceof String x) {
                return s.contains(x);
            }
            if (item instanceof Undefined u) {
                throw new PyError(u.message);
            }
            throw new PyError("'in <string>' requires string as left operand, not " + typeName(item));
        }
        if (container instanceof List<?> l) {
            for (Object o : l) {
                if (eq(o, item)) {
                    return true;
                }
            }
            return false;
        }
        if (container instanceof PyTuple t) {
            return contains(t.items(), item);
        }
        if (container instanceof Map<?, ?> m) {
            return findKey(m, item) != NO_KEY;
        }
        if (container instanceof Undefined) {
            return false;
        }
        throw new PyError("argument of type '" + typeName(container) + "' is not iterable");
    }

    /** Python iter() materialized: list items, dict keys, string code points, undefined empty. */
    static List<Object> iterate(Object o) throws PyError {
        if (o instanceof List<?> l) {
            @SuppressWarnings("unchecked")
            List<Object> r = (List<Object>) l;
            return r;
        }
        if (o instanceof PyTuple t) {
            return t.items();
        }
        if (o instanceof Map<?, ?> m) {
            return new ArrayList<>(m.keySet());
        }
        if (o instanceof String s) {
            List<Object> r = new ArrayList<>(s.length());
            for (int i = 0; i < s.length(); ) {
                int c = s.codePointAt(i);
                r.add(Character.toString(c));
                i += Character.charCount(c);
            }
            return r;
        }
        if (o instanceof Undefined) {
            return List.of();
        }
        throw new PyError("'" + typeName(o) + "' object is not iterable");
    }

    private static final java.util.Set<String> DICT_METHODS = java.util.Set.of("get", "items", "keys", "values", "copy");
    private static final java.util.Set<String> DICT_UNSAFE =
            java.util.Set.of("clear", "pop", "popitem", "setdefault", "update", "fromkeys");
    private static final java.util.Set<String> LIST_METHODS = java.util.Set.of("index", "count", "copy");
    private static final java.util.Set<String> LIST_UNSAFE =
            java.util.Set.of("append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear");
    private static final java.util.Set<String> STR_METHODS = java.util.Set.of(
            "startswith", "endswith", "split", "rsplit", "splitlines", "strip", "lstrip", "rstrip", "replace", "upper",
            "lower", "title", "capitalize", "swapcase", "find", "rfind", "index", "rindex", "count", "join", "format",
            "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower", "isnumeric", "isdecimal", "istitle",
            "zfill", "center", "ljust", "rjust", "partition", "rpartition", "removeprefix", "removesuffix", "casefold",
            "expandtabs", "encode");

    /** Jinja2 sandbox getattr ({@code obj.name}): Python attribute first, then item; unsafe attributes are undefined. */
    static Object getattr(Object obj, String name) throws PyError {
        if (obj instanceof Undefined u) {
            throw new PyError(u.message);
        }
        if (name.startsWith("_")) {
            return new Undefined("access to attribute '" + name + "' of '" + typeName(obj) + "' object is unsafe.");
        }
        if (obj instanceof Map<?, ?> m) {
            if (DICT_METHODS.contains(name)) {
                return new Values.BoundMethod(obj, name);
            }
            if (DICT_UNSAFE.contains(name)) {
                return unsafe(obj, name);
            }
            Object k = findKey(m, name);
            return k == NO_KEY ? Undefined.missingAttr(obj, name) : m.get(k);
        }
        if (obj instanceof Namespace ns) {
            Object v = ns.attrs.get(name);
            return v != null || ns.attrs.containsKey(name) ? v : Undefined.missingAttr(obj, name);
        }
        if (obj instanceof LoopContext lc) {
            return lc.attr(name);
        }
        if (obj instanceof String) {
            return STR_METHODS.contains(name) ? new Values.BoundMethod(obj, name) : Undefined.missingAttr(obj, name);
        }
        if (obj instanceof List<?> || obj instanceof PyTuple) {
            if (LIST_METHODS.contains(name)) {
                return new Values.BoundMethod(obj, name);
            }
            if (obj instanceof List<?> && LIST_UNSAFE.contains(name)) {
                return unsafe(obj, name);
            }
            return Undefined.missingAttr(obj, name);
        }
        if (isFloat(obj) && name.equals("is_integer")) {
            return new Values.BoundMethod(obj, name);
        }
        return Undefined.missingAttr(obj, name);
    }

    private static Undefined unsafe(Object obj, String name) {
        return new Undefined("access to attribute '" + name + "' of '" + typeName(obj) + "' object is unsafe.");
    }

    /** Jinja2 sandbox getitem ({@code obj[key]}): item first, then attribute for string keys. */
    static Object getitem(Object obj, Object key) throws PyError {
        if (obj instanceof Undefined u) {
            throw new PyError(u.message);
        }
        if (key instanceof Undefined u && !(obj instanceof Map<?, ?>)) {
            throw new PyError(u.message);
        }
        if (obj instanceof Map<?, ?> m) {
            Object k = findKey(m, key);
            if (k != NO_KEY) {
                return m.get(k);
            }
        } else if (obj instanceof List<?> || obj instanceof PyTuple) {
            List<?> l = obj instanceof PyTuple t ? t.items() : (List<?>) obj;
            if (isInt(key) || key instanceof Boolean) {
                long i = asLong(key);
                if (i < 0) {
                    i += l.size();
                }
                if (i >= 0 && i < l.size()) {
                    return l.get((int) i);
                }
                return new Undefined(typeName(obj) + " index out of range");
            }
        } else if (obj instanceof String s) {
            if (isInt(key) || key instanceof Boolean) {
                long i = asLong(key);
                int n = PyStr.length(s);
                if (i < 0) {
                    i += n;
                }
                if (i >= 0 && i < n) {
                    int off = PyStr.offset(s, (int) i);
                    return Character.toString(s.codePointAt(off));
                }
                return new Undefined("string index out of range");
            }
        } else if (obj instanceof Namespace || obj instanceof LoopContext) {
            if (key instanceof String k) {
                return getattr(obj, k);
            }
        }
        if (key instanceof String k) {
            return getattr(obj, k);
        }
        return new Undefined("'" + objectDesc(obj) + "' has no attribute " + repr(key));
    }

    /** Python slice semantics (negative indexes and steps) over lists, tuples and strings (by code point). */
    static Object slice(Object obj, Object start, Object stop, Object step) throws PyError {
        if (obj instanceof Undefined u) {
            throw new PyError(u.message);
        }
        long st = step == null ? 1 : asIndex(step);
        if (st == 0) {
            throw new PyError("slice step cannot be zero");
        }
        int n;
        int[] cps = null;
        List<?> list = null;
        if (obj instanceof String s) {
            cps = PyStr.codePoints(s);
            n = cps.length;
        } else if (obj instanceof List<?> l) {
            list = l;
            n = l.size();
        } else if (obj instanceof PyTuple t) {
            list = t.items();
            n = list.size();
        } else {
            throw new PyError("'" + typeName(obj) + "' object is not subscriptable");
        }
        long lo;
        long hi;
        if (st > 0) {
            lo = start == null ? 0 : clampIndex(asIndex(start), n, 0, n);
            hi = stop == null ? n : clampIndex(asIndex(stop), n, 0, n);
        } else {
            lo = start == null ? n - 1 : clampIndex(asIndex(start), n, -1, n - 1);
            hi = stop == null ? -1 : clampIndex(asIndex(stop), n, -1, n - 1);
        }
        List<Object> out = new ArrayList<>();
        StringBuilder sb = cps != null ? new StringBuilder() : null;
        for (long i = lo; st > 0 ? i < hi : i > hi; i += st) {
            if (sb != null) {
                sb.appendCodePoint(cps[(int) i]);
            } else {
                out.add(list.get((int) i));
            }
        }
        if (sb != null) {
            return sb.toString();
        }
        return obj instanceof PyTuple ? new PyTuple(java.util.Collections.unmodifiableList(out)) : out;
    }

    private static long asIndex(Object o) throws PyError {
        if (o == null) {
            return 0;
        }
        if (isInt(o) || o instanceof Boolean) {
            return asLong(o);
        }
        throw new PyError("slice indices must be integers or None");
    }

    private static long clampIndex(long i, int n, long min, long max) {
        if (i < 0) {
            i += n;
        }
        return Math.max(min, Math.min(max, i));
    }

    // ---------------- json.dumps(ensure_ascii=False) ----------------

    static String toJson(Object o, String indent, String itemSep, String keySep, boolean sortKeys) throws PyError {
        StringBuilder sb = new StringBuilder();
        if (itemSep == null) {
            itemSep = indent != null ? "," : ", ";
        }
        if (keySep == null) {
            keySep = ": ";
        }
        json(sb, o, indent, itemSep, keySep, sortKeys, 0);
        return sb.toString();
    }

    private static void newline(StringBuilder sb, String indent, int level) {
        sb.append('\n');
        for (int i = 0; i < level; i++) {
            sb.append(indent);
        }
    }

    private static void json(StringBuilder sb, Object o, String indent, String itemSep, String keySep, boolean sortKeys,
            int level) throws PyError {
        if (level > 512) {
            throw new PyError("maximum recursion depth exceeded while encoding a JSON object");
        }
        if (o == null) {
            sb.append("null");
        } else if (o instanceof String s) {
            jsonString(sb, s);
        } else if (o instanceof Boolean b) {
            sb.append(b ? "true" : "false");
        } else if (isFloat(o)) {
            double d = ((Number) o).doubleValue();
            sb.append(Double.isNaN(d) ? "NaN" : Double.isInfinite(d) ? (d > 0 ? "Infinity" : "-Infinity") : floatRepr(d));
        } else if (o instanceof Number n) {
            sb.append(n.toString());
        } else if (o instanceof List<?> || o instanceof PyTuple) {
            List<?> l = o instanceof PyTuple t ? t.items() : (List<?>) o;
            if (l.isEmpty()) {
                sb.append("[]");
                return;
            }
            sb.append('[');
            for (int i = 0; i < l.size(); i++) {
                if (i > 0) {
                    sb.append(itemSep);
                }
                if (indent != null) {
                    newline(sb, indent, level + 1);
                }
                json(sb, l.get(i), indent, itemSep, keySep, sortKeys, level + 1);
            }
            if (indent != null) {
                newline(sb, indent, level);
            }
            sb.append(']');
        } else if (o instanceof Map<?, ?> m) {
            if (m.isEmpty()) {
                sb.append("{}");
                return;
            }
            List<Map.Entry<?, ?>> entries = new ArrayList<>(m.entrySet());
            if (sortKeys) {
                List<PyError> failure = new ArrayList<>();
                entries.sort((x, y) -> {
                    try {
                        return compare(x.getKey(), y.getKey(), "<");
                    } catch (PyError e) {
                        failure.add(e);
                        return 0;
                    }
                });
                if (!failure.isEmpty()) {
                    throw failure.get(0);
                }
            }
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : entries) {
                if (!first) {
                    sb.append(itemSep);
                }
                first = false;
                if (indent != null) {
                    newline(sb, indent, level + 1);
                }
                Object k = e.getKey();
                if (k instanceof String ks) {
                    jsonString(sb, ks);
                } else if (k == null || k instanceof Boolean || k instanceof Number) {
                    sb.append('"');
                    json(sb, k, indent, itemSep, keySep, sortKeys, level + 1);
                    sb.append('"');
                } else {
                    throw new PyError("keys must be str, int, float, bool or None, not " + typeName(k));
                }
                sb.append(keySep);
                json(sb, e.getValue(), indent, itemSep, keySep, sortKeys, level + 1);
            }
            if (indent != null) {
                newline(sb, indent, level);
            }
            sb.append('}');
        } else {
            throw new PyError("Object of type " + typeName(o) + " is not JSON serializable");
        }
    }

    private static final char[] HEX = "0123456789abcdef".toCharArray();

    static void jsonString(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                case '\n' -> sb.append("\\n");
                case '\r' -> sb.append("\\r");
                case '\t' -> sb.append("\\t");
                case '\b' -> sb.append("\\b");
                case '\f' -> sb.append("\\f");
                default -> {
                    if (c < 0x20) {
                        sb.append("\\u00").append(HEX[c >> 4]).append(HEX[c & 15]);
                    } else {
                        sb.append(c);
                    }
                }
            }
        }
        sb.append('"');
    }
}
