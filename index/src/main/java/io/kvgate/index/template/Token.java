package io.kvgate.index.template;

/** One lexical token of a template; immutable. {@code text} is the decoded value for strings. */
record Token(Kind kind, String text, Object value, int line, int column) {
    enum Kind { DATA, VAR_BEGIN, VAR_END, BLOCK_BEGIN, BLOCK_END, NAME, STRING, INT, FLOAT, OP, EOF }

    boolean is(Kind k, String t) {
        return kind == k && text.equals(t);
    }

    boolean isOp(String t) {
        return kind == Kind.OP && text.equals(t);
    }

    boolean isName(String t) {
        return kind == Kind.NAME && text.equals(t);
    }
}
