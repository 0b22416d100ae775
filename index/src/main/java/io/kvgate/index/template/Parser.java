package io.kvgate.index.template;

import java.util.ArrayList;
import java.util.List;

/**
 * Recursive-descent parser following Jinja2's grammar and operator precedence (parser.py): conditional expression,
 * or, and, not, comparisons, + -, ~, * / // %, **, unary, then postfix (attribute, subscript, call) and filters/tests.
 *
 * <p>Threading contract: a fresh instance per compile; not shared.
 */
final class Parser {
    private final List<Token> toks;
    private int i;

    private Parser(List<Token> toks) {
        this.toks = toks;
    }

    static List<Node> parse(String source) throws TemplateException {
        Parser p = new Parser(Lexer.tokenize(source));
        List<Node> body = p.subparse();
        Token t = p.peek();
        if (t.kind() != Token.Kind.EOF) {
            throw p.error("Encountered unknown tag '" + p.peek(1).text() + "'", t);
        }
        return List.copyOf(body);
    }

    private Token peek() {
        return toks.get(i);
    }

    private Token peek(int k) {
        return toks.get(Math.min(i + k, toks.size() - 1));
    }

    private Token next() {
        return toks.get(i++);
    }

    private TemplateException error(String msg, Token t) {
        return new TemplateException(msg, t.line(), t.column());
    }

    private Token expectOp(String op) throws TemplateException {
        Token t = next();
        if (!t.isOp(op)) {
            throw error("expected '" + op + "', got '" + t.text() + "'", t);
        }
        return t;
    }

    private Token expectName() throws TemplateException {
        Token t = next();
        if (t.kind() != Token.Kind.NAME) {
            throw error("expected name, got '" + t.text() + "'", t);
        }
        return t;
    }

    private void expectName(String name) throws TemplateException {
        Token t = next();
        if (!t.isName(name)) {
            throw error("expected '" + name + "', got '" + t.text() + "'", t);
        }
    }

    private void expectBlockEnd() throws TemplateException {
        Token t = next();
        if (t.kind() != Token.Kind.BLOCK_END) {
            throw error("expected end of statement block, got '" + t.text() + "'", t);
        }
    }

    /** Parses until EOF or a block tag whose name is in {@code endTags} (left unconsumed, positioned at its name). */
    private List<Node> subparse(String... endTags) throws TemplateException {
        List<Node> body = new ArrayList<>();
        while (true) {
            Token t = peek();
            switch (t.kind()) {
                case EOF -> {
                    if (endTags.length > 0) {
                        throw error("Unexpected end of template. Jinja was looking for the following tags: "
                                + String.join(" or ", endTags), t);
                    }
                    return body;
                }
                case DATA -> {
                    next();
                    body.add(new Node.Text(t.text(), t.line()));
                }
                case VAR_BEGIN -> {
                    next();
                    Node.Expr e = parseTuple(true);
                    Token end = next();
                    if (end.kind() != Token.Kind.VAR_END) {
                        throw error("expected end of print statement, got '" + end.text() + "'", end);
                    }
                    body.add(new Node.Print(e, t.line()));
                }
                case BLOCK_BEGIN -> {
                    Token name = peek(1);
                    for (String end : endTags) {
                        if (name.isName(end)) {
                            next();
                            return body;
                        }
                    }
                    next();
                    body.add(parseStatement());
                }
                default -> throw error("unexpected '" + t.text() + "'", t);
            }
        }
    }

    private Node parseStatement() throws TemplateException {
        Token t = expectName();
        switch (t.text()) {
            case "if" -> {
                return parseIf(t);
            }
            case "for" -> {
                return parseFor(t);
            }
            case "set" -> {
                return parseSet(t);
            }
            case "macro" -> {
                return parseMacro(t);
            }
            case "with" -> {
                return parseWith(t);
            }
            case "filter" -> {
                List<Node.FilterCall> filters = parseFilterChain(false);
                expectBlockEnd();
                List<Node> body = subparse("endfilter");
                next();
                expectBlockEnd();
                return new Node.FilterBlock(filters, body, t.line());
            }
            case "call" -> {
                List<String> params = new ArrayList<>();
                List<Node.Expr> defaults = new ArrayList<>();
                if (peek().isOp("(")) {
                    next();
                    while (!peek().isOp(")")) {
                        if (!params.isEmpty()) {
                            expectOp(",");
                        }
                        params.add(expectName().text());
                        if (peek().isOp("=")) {
                            next();
                            defaults.add(parseExpression(true));
                        } else {
                            defaults.add(null);
                        }
                    }
                    next();
                }
                Node.Expr callExpr = parseExpression(true);
                if (!(callExpr instanceof Node.Call call)) {
                    throw error("expected call", t);
                }
                expectBlockEnd();
                List<Node> body = subparse("endcall");
                next();
                expectBlockEnd();
                return new Node.CallBlock(call, List.copyOf(params), java.util.Collections.unmodifiableList(defaults), body,
                        t.line());
            }
            case "break" -> {
                expectBlockEnd();
                return new Node.Break(t.line());
            }
            case "continue" -> {
                expectBlockEnd();
                return new Node.Continue(t.line());
            }
            case "generation" -> {
                // transformers' AssistantTracker extension: marks assistant spans, renders its body unchanged.
                expectBlockEnd();
                List<Node> body = subparse("endgeneration");
                next();
                expectBlockEnd();
                return new Node.Block(body, t.line());
            }
            default -> throw error("Encountered unknown tag '" + t.text() + "'.", t);
        }
    }

    private Node parseIf(Token t) throws TemplateException {
        List<Node.Expr> tests = new ArrayList<>();
        List<List<Node>> bodies = new ArrayList<>();
        List<Node> orElse = List.of();
        tests.add(parseTuple(false));
        expectBlockEnd();
        while (true) {
            bodies.add(subparse("elif", "else", "endif"));
            Token tag = next();
            if (tag.isName("elif")) {
                tests.add(parseTuple(false));
                expectBlockEnd();
            } else if (tag.isName("else")) {
                expectBlockEnd();
                orElse = subparse("endif");
                next();
                expectBlockEnd();
                break;
            } else {
                expectBlockEnd();
                break;
            }
        }
        return new Node.If(List.copyOf(tests), List.copyOf(bodies), orElse, t.line());
    }

    private List<String> parseTargets() throws TemplateException {
        List<String> names = new ArrayList<>();
        boolean paren = peek().isOp("(");
        if (paren) {
            next();
        }
        names.add(expectName().text());
        while (peek().isOp(",")) {
            next();
            if (peek().kind() != Token.Kind.NAME) {
                break;
            }
            names.add(expectName().text());
        }
        if (paren) {
            expectOp(")");
        }
        return names;
    }

    private Node parseFor(Token t) throws TemplateException {
        List<String> targets = parseTargets();
        expectName("in");
        Node.Expr iter = parseTuple(false, false);
        Node.Expr filter = null;
        if (peek().isName("if")) {
            next();
            filter = parseExpression(true);
        }
        if (peek().isName("recursive")) {
            throw error("recursive for loops are not supported", peek());
        }
        expectBlockEnd();
        List<Node> body = subparse("endfor", "else");
        List<Node> orElse = List.of();
        if (next().isName("else")) {
            expectBlockEnd();
            orElse = subparse("endfor");
            next();
        }
        expectBlockEnd();
        return new Node.For(List.copyOf(targets), iter, filter, body, orElse, t.line());
    }

    private Node parseSet(Token t) throws TemplateException {
        Token first = expectName();
        if (peek().isOp(".")) {
            next();
            String attr = expectName().text();
            expectOp("=");
            Node.Expr value = parseTuple(true);
            expectBlockEnd();
            return new Node.Set(List.of(first.text()), attr, value, t.line());
        }
        List<String> targets = new ArrayList<>();
        targets.add(first.text());
        while (peek().isOp(",")) {
            next();
            targets.add(expectName().text());
        }
        if (peek().isOp("=")) {
            next();
            Node.Expr value = parseTuple(true);
            expectBlockEnd();
            return new Node.Set(List.copyOf(targets), null, value, t.line());
        }
        if (targets.size() != 1) {
            throw error("expected '='", peek());
        }
        List<Node.FilterCall> filters = peek().isOp("|") ? parseFilterChain(true) : List.of();
        expectBlockEnd();
        List<Node> body = subparse("endset");
        next();
        expectBlockEnd();
        return new Node.SetBlock(first.text(), body, filters, t.line());
    }

    private Node parseMacro(Token t) throws TemplateException {
        String name = expectName().text();
        expectOp("(");
        List<String> params = new ArrayList<>();
        List<Node.Expr> defaults = new ArrayList<>();
        while (!peek().isOp(")")) {
            if (!params.isEmpty()) {
                expectOp(",");
                if (peek().isOp(")")) {
                    break;
                }
            }
            params.add(expectName().text());
            if (peek().isOp("=")) {
                next();
                defaults.add(parseExpression(true));
            } else {
                if (!defaults.isEmpty() && defaults.get(defaults.size() - 1) != null) {
                    throw error("non-default argument follows default argument", peek());
                }
                defaults.add(null);
            }
        }
        next();
        expectBlockEnd();
        List<Node> body = subparse("endmacro");
        next();
        if (peek().kind() == Token.Kind.NAME) {
            next();
        }
        expectBlockEnd();
        return new Node.Macro(name, List.copyOf(params), java.util.Collections.unmodifiableList(defaults), body, t.line());
    }

    private Node parseWith(Token t) throws TemplateException {
        List<String> names = new ArrayList<>();
        List<Node.Expr> values = new ArrayList<>();
        while (peek().kind() != Token.Kind.BLOCK_END) {
            if (!names.isEmpty()) {
                expectOp(",");
            }
            names.add(expectName().text());
            expectOp("=");
            values.add(parseExpression(true));
        }
        expectBlockEnd();
        List<Node> body = subparse("endwith");
        next();
        expectBlockEnd();
        return new Node.With(List.copyOf(names), List.copyOf(values), body, t.line());
    }

    // ---------------- expressions ----------------

    private Node.Expr parseTuple(boolean withCondexpr) throws TemplateException {
        return parseTuple(false, withCondexpr);
    }

    /** Jinja2 parse_tuple: a comma-separated list without parens is a tuple. */
    private Node.Expr parseTuple(boolean simplified, boolean withCondexpr) throws TemplateException {
        Token start = peek();
        List<Node.Expr> items = new ArrayList<>();
        boolean isTuple = false;
        while (true) {
            if (!items.isEmpty()) {
                expectOp(",");
            }
            if (isTupleEnd()) {
                break;
            }
            items.add(simplified ? parsePrimaryPostfix() : parseExpression(withCondexpr));
            if (peek().isOp(",")) {
                isTuple = true;
            } else {
                break;
            }
        }
        if (!isTuple) {
            if (items.isEmpty()) {
                throw error("Expected an expression, got '" + peek().text() + "'", peek());
            }
            return items.get(0);
        }
        return new Node.TupleLit(List.copyOf(items), start.line(), start.column());
    }

    private Node.Expr parsePrimaryPostfix() throws TemplateException {
        return parsePostfix(parsePrimary());
    }

    private boolean isTupleEnd() {
        Token t = peek();
        return t.kind() == Token.Kind.VAR_END || t.kind() == Token.Kind.BLOCK_END || t.kind() == Token.Kind.EOF
                || t.isOp(")") || t.isName("in") || t.isName("if");
    }

    private Node.Expr parseExpression(boolean withCondexpr) throws TemplateException {
        return withCondexpr ? parseCondexpr() : parseOr();
    }

    private Node.Expr parseCondexpr() throws TemplateException {
        Node.Expr expr1 = parseOr();
        while (peek().isName("if")) {
            Token t = next();
            Node.Expr test = parseOr();
            Node.Expr orElse = null;
            if (peek().isName("else")) {
                next();
                orElse = parseCondexpr();
            }
            expr1 = new Node.CondExpr(test, expr1, orElse, t.line(), t.column());
        }
        return expr1;
    }

    private Node.Expr parseOr() throws TemplateException {
        Node.Expr left = parseAnd();
        while (peek().isName("or")) {
            Token t = next();
            left = new Node.Or(left, parseAnd(), t.line(), t.column());
        }
        return left;
    }

    private Node.Expr parseAnd() throws TemplateException {
        Node.Expr left = parseNot();
        while (peek().isName("and")) {
            Token t = next();
            left = new Node.And(left, parseNot(), t.line(), t.column());
        }
        return left;
    }

    private Node.Expr parseNot() throws TemplateException {
        if (peek().isName("not")) {
            Token t = next();
            return new Node.Not(parseNot(), t.line(), t.column());
        }
        return parseCompare();
    }

    private Node.Expr parseCompare() throws TemplateException {
        Token start = peek();
        Node.Expr first = parseMath1();
        List<String> ops = new ArrayList<>();
        List<Node.Expr> rest = new ArrayList<>();
        while (true) {
            Token t = peek();
            if (t.kind() == Token.Kind.OP && (t.text().equals("==") || t.text().equals("!=") || t.text().equals("<")
                    || t.text().equals(">") || t.text().equals("<=") || t.text().equals(">="))) {
                next();
                ops.add(t.text());
                rest.add(parseMath1());
            } else if (t.isName("in")) {
                next();
                ops.add("in");
                rest.add(parseMath1());
            } else if (t.isName("not") && peek(1).isName("in")) {
                next();
                next();
                ops.add("notin");
                rest.add(parseMath1());
            } else {
                break;
            }
        }
        if (ops.isEmpty()) {
            return first;
        }
        return new Node.Compare(first, List.copyOf(ops), List.copyOf(rest), start.line(), start.column());
    }

    private Node.Expr parseMath1() throws TemplateException {
        Node.Expr left = parseConcat();
        while (peek().isOp("+") || peek().isOp("-")) {
            Token t = next();
            left = new Node.Binary(t.text(), left, parseConcat(), t.line(), t.column());
        }
        return chain(left, "+");
    }

    private Node.Expr parseConcat() throws TemplateException {
        Node.Expr left = parseMath2();
        while (peek().isOp("~")) {
            Token t = next();
            left = new Node.Binary("~", left, parseMath2(), t.line(), t.column());
        }
        return chain(left, "~");
    }

    /** Rewrites a left-nested run of 3+ {@code op} operators into one Chain node (same evaluation order). */
    private static Node.Expr chain(Node.Expr e, String op) {
        java.util.ArrayDeque<Node.Expr> operands = new java.util.ArrayDeque<>();
        Node.Expr cur = e;
        while (cur instanceof Node.Binary b && b.op().equals(op)) {
            operands.addFirst(b.right());
            cur = b.left();
        }
        if (operands.size() < 2) {
            return e;
        }
        operands.addFirst(cur);
        return new Node.Chain(op, List.copyOf(operands), e.line(), e.column());
    }

    private Node.Expr parseMath2() throws TemplateException {
        Node.Expr left = parsePow();
        while (peek().isOp("*") || peek().isOp("/") || peek().isOp("//") || peek().isOp("%")) {
            Token t = next();
            left = new Node.Binary(t.text(), left, parsePow(), t.line(), t.column());
        }
        return left;
    }

    private Node.Expr parsePow() throws TemplateException {
        Node.Expr left = parseUnary(true);
        while (peek().isOp("**")) {
            Token t = next();
            left = new Node.Binary("**", left, parseUnary(true), t.line(), t.column());
        }
        return left;
    }

    private Node.Expr parseUnary(boolean withFilter) throws TemplateException {
        Token t = peek();
        Node.Expr node;
        if (t.isOp("-") || t.isOp("+")) {
            next();
            node = new Node.Unary(t.text(), parseUnary(false), t.line(), t.column());
        } else {
            node = parsePrimary();
        }
        node = parsePostfix(node);
        if (withFilter) {
            node = parseFilterExpr(node);
        }
        return node;
    }

    private Node.Expr parsePrimary() throws TemplateException {
        Token t = next();
        switch (t.kind()) {
            case NAME -> {
                return switch (t.text()) {
                    case "true", "True" -> new Node.Const(Boolean.TRUE, t.line(), t.column());
                    case "false", "False" -> new Node.Const(Boolean.FALSE, t.line(), t.column());
                    case "none", "None" -> new Node.Const(null, t.line(), t.column());
                    default -> new Node.Name(t.text(), t.line(), t.column());
                };
            }
            case STRING -> {
                StringBuilder sb = new StringBuilder((String) t.value());
                while (peek().kind() == Token.Kind.STRING) {
                    sb.append((String) next().value());
                }
                return new Node.Const(sb.toString(), t.line(), t.column());
            }
            case INT, FLOAT -> {
                return new Node.Const(t.value(), t.line(), t.column());
            }
            case OP -> {
                switch (t.text()) {
                    case "(" -> {
                        if (peek().isOp(")")) {
                            next();
                            return new Node.TupleLit(List.of(), t.line(), t.column());
                        }
                        Node.Expr e = parseTupleInParens(t);
                        expectOp(")");
                        return e;
                    }
                    case "[" -> {
                        List<Node.Expr> items = new ArrayList<>();
                        while (!peek().isOp("]")) {
                            if (!items.isEmpty()) {
                                expectOp(",");
                                if (peek().isOp("]")) {
                                    break;
                                }
                            }
                            items.add(parseExpression(true));
                        }
                        expectOp("]");
                        return new Node.ListLit(List.copyOf(items), t.line(), t.column());
                    }
                    case "{" -> {
                        List<Node.Expr> keys = new ArrayList<>();
                        List<Node.Expr> values = new ArrayList<>();
                        while (!peek().isOp("}")) {
                            if (!keys.isEmpty()) {
                                expectOp(",");
                                if (peek().isOp("}")) {
                                    break;
                                }
                            }
                            keys.add(parseExpression(true));
                            expectOp(":");
                            values.add(parseExpression(true));
                        }
                        expectOp("}");
                        return new Node.DictLit(List.copyOf(keys), List.copyOf(values), t.line(), t.column());
                    }
                    default -> throw error("unexpected '" + t.text() + "'", t);
                }
            }
            default -> throw error("unexpected '" + (t.kind() == Token.Kind.EOF ? "end of template" : t.text()) + "'", t);
        }
    }

    private Node.Expr parseTupleInParens(Token open) throws TemplateException {
        List<Node.Expr> items = new ArrayList<>();
        boolean isTuple = false;
        while (true) {
            if (!items.isEmpty()) {
                expectOp(",");
            }
            if (peek().isOp(")")) {
                break;
            }
            items.add(parseExpression(true));
            if (peek().isOp(",")) {
                isTuple = true;
            } else {
                break;
            }
        }
        return isTuple ? new Node.TupleLit(List.copyOf(items), open.line(), open.column()) : items.get(0);
    }

    private Node.Expr parsePostfix(Node.Expr node) throws TemplateException {
        while (true) {
            Token t = peek();
            if (t.isOp(".")) {
                next();
                Token a = next();
                if (a.kind() == Token.Kind.NAME) {
                    node = new Node.GetAttr(node, a.text(), a.line(), a.column());
                } else if (a.kind() == Token.Kind.INT) {
                    node = new Node.GetItem(node, new Node.Const(a.value(), a.line(), a.column()), a.line(), a.column());
                } else {
                    throw error("expected name or number", a);
                }
            } else if (t.isOp("[")) {
                next();
                node = parseSubscript(node, t);
            } else if (t.isOp("(")) {
                node = parseCall(node);
            } else {
                return node;
            }
        }
    }

    private Node.Expr parseSubscript(Node.Expr target, Token open) throws TemplateException {
        List<Node.Expr> parts = new ArrayList<>();
        boolean tuple = false;
        while (!peek().isOp("]")) {
            if (!parts.isEmpty()) {
                expectOp(",");
                tuple = true;
            }
            parts.add(parseSubscribed());
        }
        expectOp("]");
        if (parts.size() != 1 || tuple) {
            throw error("tuple subscripts are not supported", open);
        }
        Node.Expr p = parts.get(0);
        if (p instanceof Node.SliceExpr s) {
            return new Node.SliceExpr(target, s.start(), s.stop(), s.step(), open.line(), open.column());
        }
        return new Node.GetItem(target, p, open.line(), open.column());
    }

    /** One subscript: an expression or a slice {@code [start]:[stop][:[step]]} (returned as a target-less SliceExpr). */
    private Node.Expr parseSubscribed() throws TemplateException {
        Token t = peek();
        Node.Expr start = null;
        if (!t.isOp(":")) {
            start = parseExpression(true);
            if (!peek().isOp(":")) {
                return start;
            }
        }
        next();
        Node.Expr stop = null;
        Node.Expr step = null;
        if (!peek().isOp("]") && !peek().isOp(",") && !peek().isOp(":")) {
            stop = parseExpression(true);
        }
        if (peek().isOp(":")) {
            next();
            if (!peek().isOp("]") && !peek().isOp(",")) {
                step = parseExpression(true);
            }
        }
        return new Node.SliceExpr(null, start, stop, step, t.line(), t.column());
    }

    private record Args(List<Node.Expr> args, List<String> kwNames, List<Node.Expr> kwValues, Node.Expr starArgs,
            Node.Expr starKwargs) { }

    private Args parseArgs() throws TemplateException {
        expectOp("(");
        List<Node.Expr> args = new ArrayList<>();
        List<String> kwNames = new ArrayList<>();
        List<Node.Expr> kwValues = new ArrayList<>();
        Node.Expr starArgs = null;
        Node.Expr starKwargs = null;
        boolean first = true;
        while (!peek().isOp(")")) {
            if (!first) {
                expectOp(",");
                if (peek().isOp(")")) {
                    break;
                }
            }
            first = false;
            if (peek().isOp("*")) {
                if (starArgs != null || starKwargs != null) {
                    throw error("invalid syntax for function call expression", peek());
                }
                next();
                starArgs = parseExpression(true);
                continue;
            }
            if (peek().isOp("**")) {
                if (starKwargs != null) {
                    throw error("invalid syntax for function call expression", peek());
                }
                next();
                starKwargs = parseExpression(true);
                continue;
            }
            if (starArgs != null || starKwargs != null) {
                throw error("invalid syntax for function call expression", peek());
            }
            if (peek().kind() == Token.Kind.NAME && peek(1).isOp("=")) {
                kwNames.add(next().text());
                next();
                kwValues.add(parseExpression(true));
            } else {
                if (!kwNames.isEmpty()) {
                    throw error("positional argument follows keyword argument", peek());
                }
                args.add(parseExpression(true));
            }
        }
        expectOp(")");
        return new Args(List.copyOf(args), List.copyOf(kwNames), List.copyOf(kwValues), starArgs, starKwargs);
    }

    private Node.Expr parseCall(Node.Expr fn) throws TemplateException {
        Token t = peek();
        Args a = parseArgs();
        return new Node.Call(fn, a.args(), a.kwNames(), a.kwValues(), a.starArgs(), a.starKwargs(), t.line(), t.column());
    }

    private Node.Expr parseFilterExpr(Node.Expr node) throws TemplateException {
        while (true) {
            Token t = peek();
            if (t.isOp("|")) {
                for (Node.FilterCall f : parseFilterChain(true)) {
                    node = new Node.Filter(node, f, f.line(), f.column());
                }
            } else if (t.isName("is")) {
                next();
                boolean negated = false;
                if (peek().isName("not")) {
                    next();
                    negated = true;
                }
                Token name = expectName();
                String testName = name.text();
                while (peek().isOp(".")) {
                    next();
                    testName = testName + "." + expectName().text();
                }
                if (!Builtins.hasTest(testName)) {
                    throw error("No test named '" + testName + "'.", name);
                }
                List<Node.Expr> args = new ArrayList<>();
                Token a = peek();
                if (a.isOp("(")) {
                    Args pa = parseArgs();
                    args.addAll(pa.args());
                    args.addAll(pa.kwValues());
                } else if ((a.kind() == Token.Kind.NAME || a.kind() == Token.Kind.STRING || a.kind() == Token.Kind.INT
                        || a.kind() == Token.Kind.FLOAT || a.isOp("[") || a.isOp("{"))
                        && !(a.isName("else") || a.isName("or") || a.isName("and"))) {
                    if (a.isName("is")) {
                        throw error("You cannot chain multiple tests with is", a);
                    }
                    args.add(parsePostfix(parsePrimary()));
                }
                node = new Node.Test(node, testName, List.copyOf(args), negated, name.line(), name.column());
            } else if (t.isOp("(")) {
                node = parseCall(node);
            } else {
                return node;
            }
        }
    }

    /** Parses {@code |f1(args)|f2...} (or, for filter blocks, {@code f1(args)|f2}). */
    private List<Node.FilterCall> parseFilterChain(boolean startsWithPipe) throws TemplateException {
        List<Node.FilterCall> out = new ArrayList<>();
        boolean needPipe = startsWithPipe;
        while (true) {
            if (needPipe) {
                if (!peek().isOp("|")) {
                    break;
                }
                next();
            }
            needPipe = true;
            Token name = expectName();
            String filterName = name.text();
            while (peek().isOp(".")) {
                next();
                filterName = filterName + "." + expectName().text();
            }
            if (!Builtins.hasFilter(filterName)) {
                throw error("No filter named '" + filterName + "'.", name);
            }
            Args a = peek().isOp("(") ? parseArgs() : new Args(List.of(), List.of(), List.of(), null, null);
            if (a.starArgs() != null || a.starKwargs() != null) {
                throw error("*args and **kwargs in filter calls are not supported", name);
            }
            out.add(new Node.FilterCall(filterName, a.args(), a.kwNames(), a.kwValues(), name.line(), name.column()));
        }
        return out;
    }
}
