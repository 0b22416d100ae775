package io.kvgate.index.template;

import java.util.List;

/** The template syntax tree. All nodes are immutable records, so a compiled template can be shared across threads. */
sealed interface Node {
    int line();

    // ---- statements ----
    record Text(String text, int line) implements Node { }
    record Print(Expr expr, int line) implements Node { }
    record If(List<Expr> tests, List<List<Node>> bodies, List<Node> orElse, int line) implements Node { }
    record For(List<String> targets, Expr iter, Expr filter, List<Node> body, List<Node> orElse, int line) implements Node { }
    record Set(List<String> targets, String attr, Expr value, int line) implements Node { }
    record SetBlock(String target, List<Node> body, List<FilterCall> filters, int line) implements Node { }
    record Macro(String name, List<String> params, List<Expr> defaults, List<Node> body, int line) implements Node { }
    record With(List<String> names, List<Expr> values, List<Node> body, int line) implements Node { }
    record FilterBlock(List<FilterCall> filters, List<Node> body, int line) implements Node { }
    /** {@code {% call [(params)] macro(args) %}body{% endcall %}}: the body becomes the macro's {@code caller()}. */
    record CallBlock(Call call, List<String> callerParams, List<Expr> callerDefaults, List<Node> body, int line) implements Node { }
    record Break(int line) implements Node { }
    record Continue(int line) implements Node { }
    record Block(List<Node> body, int line) implements Node { }

    record FilterCall(String name, List<Expr> args, List<String> kwNames, List<Expr> kwValues, int line, int column) { }

    // ---- expressions ----
    sealed interface Expr extends Node {
        int column();
    }
    record Const(Object value, int line, int column) implements Expr { }
    record Name(String name, int line, int column) implements Expr { }
    record GetAttr(Expr target, String attr, int line, int column) implements Expr { }
    record GetItem(Expr target, Expr key, int line, int column) implements Expr { }
    record SliceExpr(Expr target, Expr start, Expr stop, Expr step, int line, int column) implements Expr { }
    /** A call; {@code starArgs}/{@code starKwargs} are the optional {@code *args}/{@code **kwargs} splats (null if absent). */
    record Call(Expr fn, List<Expr> args, List<String> kwNames, List<Expr> kwValues, Expr starArgs, Expr starKwargs,
            int line, int column) implements Expr { }
    record Filter(Expr target, FilterCall call, int line, int column) implements Expr { }
    record Test(Expr target, String name, List<Expr> args, boolean negated, int line, int column) implements Expr { }
    record Unary(String op, Expr operand, int line, int column) implements Expr { }
    record Binary(String op, Expr left, Expr right, int line, int column) implements Expr { }
    /**
     * A left-associative chain {@code a + b + c ...} or {@code a ~ b ~ c ...} (3+ operands), flattened at parse time so
     * all-string chains (the common {@code '<|im_start|>' + role + '\n' + content + ...}) build one string, or none
     * when printed, instead of one intermediate string per operator. Semantics stay those of the pairwise fold.
     */
    record Chain(String op, List<Expr> operands, int line, int column) implements Expr { }
    record Compare(Expr first, List<String> ops, List<Expr> rest, int line, int column) implements Expr { }
    record And(Expr left, Expr right, int line, int column) implements Expr { }
    record Or(Expr left, Expr right, int line, int column) implements Expr { }
    record Not(Expr operand, int line, int column) implements Expr { }
    record CondExpr(Expr test, Expr then, Expr orElse, int line, int column) implements Expr { }
    record ListLit(List<Expr> items, int line, int column) implements Expr { }
    record TupleLit(List<Expr> items, int line, int column) implements Expr { }
    record DictLit(List<Expr> keys, List<Expr> values, int line, int column) implements Expr { }
}
