package io.kvgate.index.template;

import io.kvgate.index.template.PyOps.PyError;
import io.kvgate.index.template.Values.LoopContext;
import io.kvgate.index.template.Values.MacroValue;
import io.kvgate.index.template.Values.Namespace;
import io.kvgate.index.template.Values.PyCallable;
import io.kvgate.index.template.Values.PyTuple;
import io.kvgate.index.template.Values.Undefined;

import java.time.Clock;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Walks a compiled template's tree for one render. Holds all per-render state (frames, output, limits), so the tree
 * itself stays immutable and shared.
 *
 * <p>Threading contract: one instance per render call, confined to the calling thread.
 */
final class Evaluator {
    private static final int NORMAL = 0;
    private static final int BREAK = 1;
    private static final int CONTINUE = 2;
    /** Bounds a runaway template: macro recursion depth and rendered size. */
    static final int MAX_CALL_DEPTH = 64;

    /**
     * A variable scope. Jinja2 opens one per for-loop iteration, macro call and with-block; if-blocks share theirs.
     * Scopes hold a handful of names (loop target, {@code loop}, a few sets), so a linear array beats a HashMap per
     * iteration in both allocation and lookup.
     */
    static final class Frame {
        final Frame parent;
        private String[] names;
        private Object[] values;
        private int size;

        Frame(Frame parent) {
            this.parent = parent;
        }

        void set(String name, Object value) {
            for (int i = 0; i < size; i++) {
                if (names[i].equals(name)) {
                    values[i] = value;
                    return;
                }
            }
            if (names == null) {
                names = new String[4];
                values = new Object[4];
            } else if (size == names.length) {
                names = Arrays.copyOf(names, size * 2);
                values = Arrays.copyOf(values, size * 2);
            }
            names[size] = name;
            values[size++] = value;
        }

        /** Index of name in this frame, or -1. */
        int indexOf(String name) {
            for (int i = 0; i < size; i++) {
                String n = names[i];
                if (n == name || n.equals(name)) {
                    return i;
                }
            }
            return -1;
        }
    }

    private final Map<String, Object> context;
    final Clock clock;
    private final int maxOutputChars;
    private int callDepth;

    Evaluator(Map<String, Object> context, Clock clock, int maxOutputChars) {
        this.context = context;
        this.clock = clock;
        this.maxOutputChars = maxOutputChars;
    }

    String render(List<Node> body) throws TemplateException {
        StringBuilder out = new StringBuilder(1024);
        exec(body, new Frame(null), out);
        return out.toString();
    }

    static TemplateException error(String msg, Node at) {
        int col = at instanceof Node.Expr e ? e.column() : 0;
        return new TemplateException(msg, at.line(), col);
    }

    static TemplateException error(PyError e, Node at) {
        int col = at instanceof Node.Expr x ? x.column() : 0;
        return new TemplateException(e.getMessage(), at.line(), col, e.raised);
    }

    private void checkSize(StringBuilder out, Node at) throws TemplateException {
        if (out.length() > maxOutputChars) {
            throw error("rendered output exceeds " + maxOutputChars + " chars", at);
        }
    }

    private int exec(List<Node> nodes, Frame f, StringBuilder out) throws TemplateException {
        for (int k = 0, n = nodes.size(); k < n; k++) {
            Node node = nodes.get(k);
            switch (node) {
                case Node.Text t -> {
                    out.append(t.text());
                    checkSize(out, node);
                }
                case Node.Print p -> {
                    if (p.expr() instanceof Node.Chain c) {
                        appendChain(c, f, out);
                    } else {
                        PyOps.appendStr(out, eval(p.expr(), f));
                    }
                    checkSize(out, node);
                }
                case Node.If i -> {
                    List<Node> chosen = i.orElse();
                    for (int b = 0; b < i.tests().size(); b++) {
                        if (PyOps.truthy(eval(i.tests().get(b), f))) {
                            chosen = i.bodies().get(b);
                            break;
                        }
                    }
                    int st = exec(chosen, f, out);
                    if (st != NORMAL) {
                        return st;
                    }
                }
                case Node.For loop -> execFor(loop, f, out);
                case Node.Set s -> execSet(s, f);
                case Node.SetBlock sb -> {
                    StringBuilder inner = new StringBuilder();
                    exec(sb.body(), f, inner);
                    Object v = inner.toString();
                    for (Node.FilterCall fc : sb.filters()) {
                        v = applyFilter(fc, v, f, node);
                    }
                    f.set(sb.target(), v);
                }
                case Node.Macro m -> f.set(m.name(), new MacroValue(m, f));
                case Node.With w -> {
                    Frame inner = new Frame(f);
                    for (int a = 0; a < w.names().size(); a++) {
                        inner.set(w.names().get(a), eval(w.values().get(a), f));
                    }
                    int st = exec(w.body(), inner, out);
                    if (st != NORMAL) {
                        return st;
                    }
                }
                case Node.FilterBlock fb -> {
                    StringBuilder inner = new StringBuilder();
                    exec(fb.body(), f, inner);
                    Object v = inner.toString();
                    for (Node.FilterCall fc : fb.filters()) {
                        v = applyFilter(fc, v, f, node);
                    }
                    PyOps.appendStr(out, v);
                    checkSize(out, node);
                }
                case Node.Block b -> {
                    int st = exec(b.body(), f, out);
                    if (st != NORMAL) {
                        return st;
                    }
                }
                case Node.CallBlock cb -> {
                    Node.Macro callerNode = new Node.Macro("caller", cb.callerParams(), cb.callerDefaults(), cb.body(), cb.line());
                    Object v;
                    try {
                        v = evalCall(cb.call(), f, new MacroValue(callerNode, f));
                    } catch (PyError e) {
                        throw error(e, cb.call());
                    }
                    PyOps.appendStr(out, v);
                    checkSize(out, node);
                }
                case Node.Break b -> {
                    return BREAK;
                }
                case Node.Continue c -> {
                    return CONTINUE;
                }
                case Node.Expr e -> throw error("expression in statement position", e);
            }
        }
        return NORMAL;
    }

    private void bindTargets(List<String> targets, Object value, Frame f, Node at) throws TemplateException {
        if (targets.size() == 1) {
            f.set(targets.get(0), value);
            return;
        }
        List<Object> items;
        try {
            items = PyOps.iterate(value);
        } catch (PyError e) {
            throw error("cannot unpack non-iterable " + PyOps.typeName(value) + " object", at);
        }
        if (items.size() != targets.size()) {
            throw error((items.size() > targets.size() ? "too many values to unpack (expected " + targets.size() + ")"
                    : "not enough values to unpack (expected " + targets.size() + ", got " + items.size() + ")"), at);
        }
        for (int i = 0; i < targets.size(); i++) {
            f.set(targets.get(i), items.get(i));
        }
    }

    private void execFor(Node.For loop, Frame f, StringBuilder out) throws TemplateException {
        Object iterable = eval(loop.iter(), f);
        List<Object> items;
        try {
            items = PyOps.iterate(iterable);
        } catch (PyError e) {
            throw error(e, loop.iter());
        }
        if (loop.filter() != null) {
            List<Object> kept = new ArrayList<>();
            for (Object item : items) {
                Frame probe = new Frame(f);
                bindTargets(loop.targets(), item, probe, loop);
                if (PyOps.truthy(eval(loop.filter(), probe))) {
                    kept.add(item);
                }
            }
            items = kept;
        }
        if (items.isEmpty()) {
            exec(loop.orElse(), f, out);
            return;
        }
        LoopContext lc = new LoopContext(items);
        for (int i = 0; i < items.size(); i++) {
            lc.index0 = i;
            Frame inner = new Frame(f);
            bindTargets(loop.targets(), items.get(i), inner, loop);
            inner.set("loop", lc);
            if (exec(loop.body(), inner, out) == BREAK) {
                break;
            }
        }
    }

    private void execSet(Node.Set s, Frame f) throws TemplateException {
        Object value = eval(s.value(), f);
        if (s.attr() != null) {
            Object target = lookup(s.targets().get(0), f);
            if (!(target instanceof Namespace ns)) {
                throw error("cannot assign attribute on non-namespace object", s);
            }
            ns.attrs.put(s.attr(), value);
            return;
        }
        bindTargets(s.targets(), value, f, s);
    }

    Object lookup(String name, Frame f) {
        for (Frame fr = f; fr != null; fr = fr.parent) {
            int i = fr.indexOf(name);
            if (i >= 0) {
                return fr.values[i];
            }
        }
        Object v = context.get(name);
        if (v != null || context.containsKey(name)) {
            return v;
        }
        PyCallable g = Builtins.global(name);
        return g != null ? g : Undefined.missingName(name);
    }

    Object eval(Node.Expr e, Frame f) throws TemplateException {
        try {
            return evalInner(e, f);
        } catch (PyError err) {
            throw error(err, e);
        } catch (ArithmeticException err) {
            throw error("integer overflow: " + err.getMessage(), e);
        }
    }

    private Object evalInner(Node.Expr e, Frame f) throws TemplateException, PyError {
        switch (e) {
            case Node.Const c -> {
                return c.value();
            }
            case Node.Name n -> {
                return lookup(n.name(), f);
            }
            case Node.GetAttr g -> {
                return PyOps.getattr(eval(g.target(), f), g.attr());
            }
            case Node.GetItem g -> {
                return PyOps.getitem(eval(g.target(), f), eval(g.key(), f));
            }
            case Node.SliceExpr s -> {
                Object target = eval(s.target(), f);
                return PyOps.slice(target, s.start() == null ? null : eval(s.start(), f),
                        s.stop() == null ? null : eval(s.stop(), f), s.step() == null ? null : eval(s.step(), f));
            }
            case Node.Call c -> {
                return evalCall(c, f, null);
            }
            case Node.Filter fl -> {
                return applyFilter(fl.call(), eval(fl.target(), f), f, fl);
            }
            case Node.Test t -> {
                Object v = eval(t.target(), f);
                boolean r = Builtins.test(this, t.name(), v, evalList(t.args(), f));
                return r != t.negated();
            }
            case Node.Unary u -> {
                Object v = eval(u.operand(), f);
                if (v instanceof Undefined und) {
                    throw new PyError(und.message);
                }
                if (!PyOps.isNumber(v)) {
                    throw new PyError("bad operand type for unary " + u.op() + ": '" + PyOps.typeName(v) + "'");
                }
                if (u.op().equals("+")) {
                    return v instanceof Boolean ? (Object) PyOps.asLong(v) : v;
                }
                if (v instanceof Double d) {
                    return -d;
                }
                return Math.negateExact(PyOps.asLong(v));
            }
            case Node.Binary b -> {
                Object l = eval(b.left(), f);
                Object r = eval(b.right(), f);
                if (b.op().equals("~")) {
                    StringBuilder sb = new StringBuilder();
                    PyOps.appendStr(sb, l);
                    PyOps.appendStr(sb, r);
                    return sb.toString();
                }
                return PyOps.binary(b.op(), l, r);
            }
            case Node.Chain c -> {
                return chainValue(c, f);
            }
            case Node.Compare c -> {
                Object left = eval(c.first(), f);
                for (int i = 0; i < c.ops().size(); i++) {
                    Object right = eval(c.rest().get(i), f);
                    if (!compareOp(c.ops().get(i), left, right)) {
                        return false;
                    }
                    left = right;
                }
                return true;
            }
            case Node.And a -> {
                Object l = eval(a.left(), f);
                return PyOps.truthy(l) ? eval(a.right(), f) : l;
            }
            case Node.Or o -> {
                Object l = eval(o.left(), f);
                return PyOps.truthy(l) ? l : eval(o.right(), f);
            }
            case Node.Not n -> {
                return !PyOps.truthy(eval(n.operand(), f));
            }
            case Node.CondExpr c -> {
                if (PyOps.truthy(eval(c.test(), f))) {
                    return eval(c.then(), f);
                }
                return c.orElse() == null
                        ? new Undefined("the inline if-expression on line " + c.line() + " evaluated to false and no else section was defined.")
                        : eval(c.orElse(), f);
            }
            case Node.ListLit l -> {
                return evalList(l.items(), f);
            }
            case Node.TupleLit t -> {
                return new PyTuple(Collections.unmodifiableList(evalList(t.items(), f)));
            }
            case Node.DictLit d -> {
                Map<Object, Object> m = new LinkedHashMap<>();
                for (int i = 0; i < d.keys().size(); i++) {
                    Object k = eval(d.keys().get(i), f);
                    if (k instanceof Integer x) {
                        k = (long) x;
                    }
                    if (k instanceof List<?> || k instanceof Map<?, ?> || k instanceof Undefined) {
                        throw new PyError("unhashable type: '" + PyOps.typeName(k) + "'");
                    }
                    Object existing = PyOps.findKey(m, k);
                    m.put(existing == PyOps.NO_KEY ? k : existing, eval(d.values().get(i), f));
                }
                return m;
            }
        }
    }

    /**
     * Evaluates a chain's operands once, left to right, and appends the result to sb: an all-string {@code +} chain
     * (or any {@code ~} chain) is appended piecewise without intermediate strings; a mixed {@code +} chain is folded
     * pairwise as Python does (numbers, lists, or the TypeError).
     */
    private void appendChain(Node.Chain c, Frame f, StringBuilder sb) throws TemplateException {
        List<Node.Expr> ops = c.operands();
        int n = ops.size();
        Object[] vals = new Object[n];
        boolean allStrings = true;
        for (int i = 0; i < n; i++) {
            vals[i] = eval(ops.get(i), f);
            allStrings &= vals[i] instanceof String;
        }
        if (allStrings || c.op().equals("~")) {
            for (Object v : vals) {
                PyOps.appendStr(sb, v);
            }
            return;
        }
        Object acc = vals[0];
        try {
            for (int i = 1; i < n; i++) {
                acc = PyOps.binary(c.op(), acc, vals[i]);
            }
        } catch (PyOps.PyError e) {
            throw error(e, c);
        } catch (ArithmeticException e) {
            throw error("integer overflow: " + e.getMessage(), c);
        }
        PyOps.appendStr(sb, acc);
    }

    /** A chain's value: a string for string chains, otherwise the pairwise fold's value. */
    private Object chainValue(Node.Chain c, Frame f) throws TemplateException {
        List<Node.Expr> ops = c.operands();
        int n = ops.size();
        Object[] vals = new Object[n];
        boolean allStrings = true;
        for (int i = 0; i < n; i++) {
            vals[i] = eval(ops.get(i), f);
            allStrings &= vals[i] instanceof String;
        }
        if (allStrings || c.op().equals("~")) {
            // Exact-size builder: one char array for the result, as Java's own string concatenation does.
            int len = 0;
            for (int i = 0; i < n; i++) {
                if (!(vals[i] instanceof String)) {
                    vals[i] = PyOps.str(vals[i]);
                }
                len += ((String) vals[i]).length();
            }
            StringBuilder sb = new StringBuilder(len);
            for (Object v : vals) {
                sb.append((String) v);
            }
            return sb.toString();
        }
        Object acc = vals[0];
        try {
            for (int i = 1; i < n; i++) {
                acc = PyOps.binary(c.op(), acc, vals[i]);
            }
        } catch (PyOps.PyError e) {
            throw error(e, c);
        } catch (ArithmeticException e) {
            throw error("integer overflow: " + e.getMessage(), c);
        }
        return acc;
    }

    /** Evaluates a call, expanding {@code *args}/{@code **kwargs}; {@code caller} is set for {@code {% call %}} blocks. */
    private Object evalCall(Node.Call c, Frame f, Values.MacroValue caller) throws TemplateException, PyError {
        Object fn = eval(c.fn(), f);
        List<Object> args = evalList(c.args(), f);
        List<String> kwNames = c.kwNames();
        List<Object> kw = evalList(c.kwValues(), f);
        if (c.starArgs() != null) {
            args.addAll(PyOps.iterate(eval(c.starArgs(), f)));
        }
        if (c.starKwargs() != null) {
            Object m = eval(c.starKwargs(), f);
            if (!(m instanceof Map<?, ?> map)) {
                throw new PyError("argument after ** must be a mapping, not " + PyOps.typeName(m));
            }
            kwNames = new ArrayList<>(kwNames);
            for (Map.Entry<?, ?> e : map.entrySet()) {
                kwNames.add(PyOps.str(e.getKey()));
                kw.add(e.getValue());
            }
        }
        if (caller != null) {
            if (!(fn instanceof MacroValue mv)) {
                throw new PyError("{% call %} needs a macro, got " + PyOps.typeName(fn));
            }
            return callMacro(mv, args, kwNames, kw, c, caller);
        }
        return call(fn, args, kwNames, kw, c);
    }

    private boolean compareOp(String op, Object l, Object r) throws PyError {
        return switch (op) {
            case "==" -> PyOps.eq(l, r);
            case "!=" -> !PyOps.eq(l, r);
            case "<" -> PyOps.compare(l, r, op) < 0;
            case ">" -> PyOps.compare(l, r, op) > 0;
            case "<=" -> PyOps.compare(l, r, op) <= 0;
            case ">=" -> PyOps.compare(l, r, op) >= 0;
            case "in" -> PyOps.contains(r, l);
            case "notin" -> !PyOps.contains(r, l);
            default -> throw new PyError("unknown comparison " + op);
        };
    }

    private List<Object> evalList(List<Node.Expr> exprs, Frame f) throws TemplateException {
        if (exprs.isEmpty()) {
            return new ArrayList<>(0);
        }
        List<Object> out = new ArrayList<>(exprs.size());
        for (Node.Expr x : exprs) {
            out.add(eval(x, f));
        }
        return out;
    }

    Object call(Object fn, List<Object> args, List<String> kwNames, List<Object> kwValues, Node at)
            throws TemplateException {
        if (fn instanceof PyCallable c) {
            return c.call(this, args, kwNames, kwValues, at);
        }
        if (fn instanceof Undefined u) {
            throw error(u.message, at);
        }
        throw error("'" + PyOps.typeName(fn) + "' object is not callable", at);
    }

    private Object applyFilter(Node.FilterCall fc, Object value, Frame f, Node at) throws TemplateException {
        List<Object> args = evalList(fc.args(), f);
        List<Object> kw = evalList(fc.kwValues(), f);
        try {
            return Builtins.filter(this, fc.name(), value, args, fc.kwNames(), kw, at);
        } catch (PyError e) {
            throw new TemplateException(e.getMessage(), fc.line(), fc.column(), e.raised);
        }
    }

    Object callMacro(MacroValue mv, List<Object> args, List<String> kwNames, List<Object> kwValues, Node at)
            throws TemplateException {
        return callMacro(mv, args, kwNames, kwValues, at, null);
    }

    Object callMacro(MacroValue mv, List<Object> args, List<String> kwNames, List<Object> kwValues, Node at,
            MacroValue caller) throws TemplateException {
        Node.Macro m = mv.node();
        if (callDepth >= MAX_CALL_DEPTH) {
            throw error("macro recursion deeper than " + MAX_CALL_DEPTH, at);
        }
        Frame inner = new Frame(mv.defFrame());
        List<Object> varargs = new ArrayList<>();
        for (int i = 0; i < args.size(); i++) {
            if (i < m.params().size()) {
                inner.set(m.params().get(i), args.get(i));
            } else {
                varargs.add(args.get(i));
            }
        }
        Map<Object, Object> kwargs = new LinkedHashMap<>();
        for (int i = 0; i < kwNames.size(); i++) {
            String k = kwNames.get(i);
            int idx = m.params().indexOf(k);
            if (idx >= 0) {
                if (idx < args.size()) {
                    throw error("macro '" + m.name() + "' got multiple values for argument '" + k + "'", at);
                }
                inner.set(k, kwValues.get(i));
            } else {
                kwargs.put(k, kwValues.get(i));
            }
        }
        for (int i = 0; i < m.params().size(); i++) {
            String p = m.params().get(i);
            if (i >= args.size() && !kwNames.contains(p)) {
                Node.Expr d = m.defaults().get(i);
                inner.set(p, d == null ? new Undefined("parameter '" + p + "' was not provided") : eval(d, inner));
            }
        }
        if (caller != null) {
            inner.set("caller", caller);
        }
        inner.set("varargs", new PyTuple(Collections.unmodifiableList(varargs)));
        inner.set("kwargs", kwargs);
        StringBuilder out = new StringBuilder();
        callDepth++;
        try {
            exec(m.body(), inner, out);
        } finally {
            callDepth--;
        }
        return out.toString();
    }
}
