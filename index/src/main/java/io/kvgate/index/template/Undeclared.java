package io.kvgate.index.template;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * The names a template reads from its render context, as Jinja2's {@code meta.find_undeclared_variables} computes
 * them (vLLM keeps only the {@code chat_template_kwargs} a template declares this way:
 * {@code resolve_chat_template_kwargs}). It follows Jinja2's symbol tracking ({@code idtracking.py}):
 * <ul>
 *   <li>each frame (the template, a {@code for} body, its {@code else}, a macro or call-block body, a {@code with}
 *       or filter block, a {@code set} block) is analysed in statement order: a name loaded before any store in the
 *       frame or an enclosing one is resolved from the context; a store binds it for what follows;</li>
 *   <li>inner frames are analysed after their enclosing frame is complete, so a macro or loop body sees every name
 *       the enclosing frame stores, wherever it stores it;</li>
 *   <li>an {@code if} is three branches (body, elifs, else) over copies of the frame's symbols; a name stored in
 *       fewer than all three and not stored before the {@code if} is resolved from the context (an {@code if}
 *       without {@code elif} has an empty elif branch, so a name set in its branches always is);</li>
 *   <li>the environment's own globals ({@code range}, {@code dict}, {@code lipsum}, {@code cycler},
 *       {@code joiner}, {@code namespace}) are not reported.</li>
 * </ul>
 * Stateless; {@link #of} builds its scratch per call.
 */
final class Undeclared {
    private Undeclared() {}

    private static final Set<String> ENV_GLOBALS = Set.of("range", "dict", "lipsum", "cycler", "joiner", "namespace");

    private enum Ref { RESOLVE, ALIAS, UNDEFINED, PARAM }

    /** One frame's symbol table (Jinja2's {@code Symbols}). */
    private static final class Symbols {
        final Symbols parent;
        final Map<String, Ref> refs;
        final Set<String> stores;

        Symbols(Symbols parent) {
            this(parent, new HashMap<>(), new HashSet<>());
        }

        private Symbols(Symbols parent, Map<String, Ref> refs, Set<String> stores) {
            this.parent = parent;
            this.refs = refs;
            this.stores = stores;
        }

        Symbols copy() {
            return new Symbols(parent, new HashMap<>(refs), new HashSet<>(stores));
        }

        Ref find(String name) {
            for (Symbols s = this; s != null; s = s.parent) {
                Ref r = s.refs.get(name);
                if (r != null) {
                    return r;
                }
            }
            return null;
        }

        void load(String name) {
            if (find(name) == null) {
                refs.put(name, Ref.RESOLVE);
            }
        }

        void store(String name) {
            stores.add(name);
            if (!refs.containsKey(name)) {
                refs.put(name, parent != null && parent.find(name) != null ? Ref.ALIAS : Ref.UNDEFINED);
            }
        }

        void param(String name) {
            stores.add(name);
            refs.put(name, Ref.PARAM);
        }

        /** Jinja2's {@code branch_update}: merges the branches; names not stored by all of them come from outside. */
        void branchUpdate(List<Symbols> branches) {
            Map<String, Integer> counts = new HashMap<>();
            for (Symbols b : branches) {
                for (String t : b.stores) {
                    if (!stores.contains(t)) {
                        counts.merge(t, 1, Integer::sum);
                    }
                }
            }
            for (Symbols b : branches) {
                refs.putAll(b.refs);
                stores.addAll(b.stores);
            }
            for (Map.Entry<String, Integer> e : counts.entrySet()) {
                if (e.getValue() == branches.size()) {
                    continue;
                }
                refs.put(e.getKey(), parent != null && parent.find(e.getKey()) != null ? Ref.ALIAS : Ref.RESOLVE);
            }
        }
    }

    /** An inner frame waiting for its enclosing frame's analysis to complete. */
    private interface Pending {
        void analyse(Symbols enclosing, Deque<Runnable> queue, Set<String> out);
    }

    /** The undeclared names of a parsed template body, sorted. */
    static Set<String> of(List<Node> body) {
        Set<String> out = new TreeSet<>();
        Deque<Runnable> queue = new ArrayDeque<>();
        queue.add(() -> frame(new Symbols(null), s -> statements(body, s), queue, out));
        while (!queue.isEmpty()) {
            queue.poll().run();
        }
        out.removeAll(ENV_GLOBALS);
        return out;
    }

    /**
     * Analyses one frame: its statements first (inner frames deferred), then the deferred inner frames with this
     * frame's completed symbols as their parent; the names the frame resolves from the context go to {@code out}.
     */
    private static void frame(Symbols symbols, java.util.function.Consumer<Visitor> body, Deque<Runnable> queue, Set<String> out) {
        Visitor v = new Visitor(symbols);
        body.accept(v);
        for (Map.Entry<String, Ref> e : symbols.refs.entrySet()) {
            if (e.getValue() == Ref.RESOLVE) {
                out.add(e.getKey());
            }
        }
        for (Pending p : v.inner) {
            queue.add(() -> p.analyse(symbols, queue, out));
        }
    }

    private static void statements(List<Node> nodes, Visitor v) {
        for (Node n : nodes) {
            v.stmt(n);
        }
    }

    /** Jinja2's {@code FrameSymbolVisitor} over one frame. */
    private static final class Visitor {
        Symbols sym;
        final List<Pending> inner = new java.util.ArrayList<>();

        Visitor(Symbols sym) {
            this.sym = sym;
        }

        void stmt(Node node) {
            switch (node) {
                case Node.Text t -> { }
                case Node.Print p -> expr(p.expr());
                case Node.If i -> ifStmt(i);
                case Node.For f -> {
                    expr(f.iter());
                    inner.add((enc, q, out) -> frame(new Symbols(enc), v -> {
                        for (String t : f.targets()) {
                            v.sym.param(t);
                        }
                        v.sym.param("loop");
                        statements(f.body(), v);
                    }, q, out));
                    if (f.filter() != null) {
                        inner.add((enc, q, out) -> frame(new Symbols(enc), v -> {
                            for (String t : f.targets()) {
                                v.sym.param(t);
                            }
                            v.expr(f.filter());
                        }, q, out));
                    }
                    inner.add((enc, q, out) -> frame(new Symbols(enc), v -> statements(f.orElse(), v), q, out));
                }
                case Node.Set st -> {
                    expr(st.value());
                    if (st.attr() != null) {
                        sym.load(st.targets().get(0)); // {% set ns.attr = v %} reads ns
                    } else {
                        for (String t : st.targets()) {
                            sym.store(t);
                        }
                    }
                }
                case Node.SetBlock sb -> {
                    sym.store(sb.target());
                    inner.add((enc, q, out) -> frame(new Symbols(enc), v -> {
                        statements(sb.body(), v);
                        v.filters(sb.filters());
                    }, q, out));
                }
                case Node.Macro m -> {
                    sym.store(m.name());
                    inner.add((enc, q, out) -> frame(new Symbols(enc), v -> v.callable(m.params(), m.defaults(), m.body()), q, out));
                }
                case Node.With w -> {
                    for (Node.Expr e : w.values()) {
                        expr(e);
                    }
                    inner.add((enc, q, out) -> frame(new Symbols(enc), v -> {
                        for (String n : w.names()) {
                            v.sym.store(n);
                        }
                        statements(w.body(), v);
                    }, q, out));
                }
                case Node.FilterBlock fb -> {
                    filters(fb.filters());
                    inner.add((enc, q, out) -> frame(new Symbols(enc), v -> {
                        v.filters(fb.filters());
                        statements(fb.body(), v);
                    }, q, out));
                }
                case Node.CallBlock cb -> {
                    expr(cb.call());
                    inner.add((enc, q, out) -> frame(new Symbols(enc),
                        v -> v.callable(cb.callerParams(), cb.callerDefaults(), cb.body()), q, out));
                }
                // {% generation %} is transformers' extension tag: a call block around its body.
                case Node.Block b -> inner.add((enc, q, out) -> frame(new Symbols(enc), v -> statements(b.body(), v), q, out));
                case Node.Break b -> { }
                case Node.Continue c -> { }
                case Node.Expr e -> expr(e);
            }
        }

        /** A macro or call-block body: parameters, then defaults, then the body ({@code caller}, {@code varargs}, {@code kwargs} are its own). */
        void callable(List<String> params, List<Node.Expr> defaults, List<Node> body) {
            for (String p : params) {
                sym.param(p);
            }
            for (String p : List.of("caller", "varargs", "kwargs")) {
                sym.param(p);
            }
            for (Node.Expr d : defaults) {
                expr(d);
            }
            statements(body, this);
        }

        /**
         * {@code if}: Jinja2 parses {@code elif}s as nested ifs in the {@code elif_} branch, so the branches are the
         * body, the elif chain (each elif one more nested three-way branch) and the else.
         */
        void ifStmt(Node.If i) {
            expr(i.tests().get(0));
            Symbols original = sym;
            Symbols body = branch(original, i.bodies().get(0));
            Symbols elifs = original.copy();
            sym = elifs;
            for (int k = 1; k < i.tests().size(); k++) {
                expr(i.tests().get(k));
                Symbols elifBody = branch(elifs, i.bodies().get(k));
                elifs.branchUpdate(List.of(elifBody, elifs.copy(), elifs.copy()));
            }
            Symbols orElse = branch(original, i.orElse());
            sym = original;
            original.branchUpdate(List.of(body, elifs, orElse));
        }

        private Symbols branch(Symbols from, List<Node> nodes) {
            Symbols saved = sym;
            Symbols b = from.copy();
            sym = b;
            statements(nodes, this);
            sym = saved;
            return b;
        }

        void filters(List<Node.FilterCall> calls) {
            for (Node.FilterCall fc : calls) {
                exprs(fc.args());
                exprs(fc.kwValues());
            }
        }

        void exprs(List<Node.Expr> es) {
            for (Node.Expr e : es) {
                expr(e);
            }
        }

        void expr(Node.Expr e) {
            if (e == null) {
                return;
            }
            switch (e) {
                case Node.Const c -> { }
                case Node.Name n -> sym.load(n.name());
                case Node.GetAttr g -> expr(g.target());
                case Node.GetItem g -> {
                    expr(g.target());
                    expr(g.key());
                }
                case Node.SliceExpr sl -> {
                    expr(sl.target());
                    expr(sl.start());
                    expr(sl.stop());
                    expr(sl.step());
                }
                case Node.Call c -> {
                    expr(c.fn());
                    exprs(c.args());
                    exprs(c.kwValues());
                    expr(c.starArgs());
                    expr(c.starKwargs());
                }
                case Node.Filter f -> {
                    expr(f.target());
                    exprs(f.call().args());
                    exprs(f.call().kwValues());
                }
                case Node.Test t -> {
                    expr(t.target());
                    exprs(t.args());
                }
                case Node.Unary u -> expr(u.operand());
                case Node.Binary b -> {
                    expr(b.left());
                    expr(b.right());
                }
                case Node.Chain c -> exprs(c.operands());
                case Node.Compare c -> {
                    expr(c.first());
                    exprs(c.rest());
                }
                case Node.And a -> {
                    expr(a.left());
                    expr(a.right());
                }
                case Node.Or o -> {
                    expr(o.left());
                    expr(o.right());
                }
                case Node.Not n -> expr(n.operand());
                case Node.CondExpr c -> {
                    expr(c.test());
                    expr(c.then());
                    expr(c.orElse());
                }
                case Node.ListLit l -> exprs(l.items());
                case Node.TupleLit t -> exprs(t.items());
                case Node.DictLit d -> {
                    exprs(d.keys());
                    exprs(d.values());
                }
            }
        }
    }
}
