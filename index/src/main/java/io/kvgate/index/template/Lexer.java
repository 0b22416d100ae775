package io.kvgate.index.template;

import java.util.ArrayList;
import java.util.List;

/**
 * Splits a template into tokens with the whitespace rules transformers uses for chat templates: Jinja2 with
 * {@code trim_blocks=True}, {@code lstrip_blocks=True}, {@code keep_trailing_newline=False}, and the {@code -}/{@code +}
 * markers. The rules mirror Jinja2's lexer (3.1) case by case, including its "line starting" condition for lstrip.
 *
 * <p>Threading contract: a fresh instance per compile; not shared.
 */
final class Lexer {
    private static final String[] OPERATORS = {
        "//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[", "]", "(", ")", "{", "}", ">", "<", "=",
        ".", ":", "|", ",", ";"
    };

    private final String src;
    private final List<Token> out = new ArrayList<>();
    private int pos;
    private final int[] lineStarts;

    private Lexer(String src) {
        this.src = src;
        List<Integer> starts = new ArrayList<>();
        starts.add(0);
        for (int i = 0; i < src.length(); i++) {
            if (src.charAt(i) == '\n') {
                starts.add(i + 1);
            }
        }
        lineStarts = starts.stream().mapToInt(Integer::intValue).toArray();
    }

    static List<Token> tokenize(String source) throws TemplateException {
        Lexer lx = new Lexer(normalizeNewlines(source));
        lx.run();
        return lx.out;
    }

    /** Jinja2 splits on {@code \r\n|\r|\n}, joins with "\n" and drops one trailing newline (keep_trailing_newline=False). */
    static String normalizeNewlines(String s) {
        StringBuilder sb = new StringBuilder(s.length());
        int n = s.length();
        for (int i = 0; i < n; i++) {
            char c = s.charAt(i);
            if (c == '\r') {
                if (i + 1 < n && s.charAt(i + 1) == '\n') {
                    i++;
                }
                sb.append('\n');
            } else {
                sb.append(c);
            }
        }
        if (sb.length() > 0 && sb.charAt(sb.length() - 1) == '\n') {
            sb.setLength(sb.length() - 1);
        }
        return sb.toString();
    }

    private int lineOf(int p) {
        int lo = 0;
        int hi = lineStarts.length - 1;
        while (lo < hi) {
            int mid = (lo + hi + 1) >>> 1;
            if (lineStarts[mid] <= p) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        return lo + 1;
    }

    private int colOf(int p) {
        return p - lineStarts[lineOf(p) - 1] + 1;
    }

    private TemplateException error(String msg, int p) {
        return new TemplateException(msg, lineOf(p), colOf(p));
    }

    private void emit(Token.Kind k, String text, Object value, int p) {
        out.add(new Token(k, text, value, lineOf(p), colOf(p)));
    }

    private void run() throws TemplateException {
        int n = src.length();
        while (pos < n) {
            int idx = nextTag(pos);
            if (idx < 0) {
                emit(Token.Kind.DATA, src.substring(pos), null, pos);
                pos = n;
                break;
            }
            char kind = src.charAt(idx + 1);
            char sign = idx + 2 < n ? src.charAt(idx + 2) : 0;
            boolean hasSign = sign == '-' || sign == '+';
            int rawEnd = kind == '%' ? matchRawBegin(idx) : -1;
            String text = applyLeftStrip(src.substring(pos, idx), hasSign ? sign : 0, kind != '{', pos);
            if (!text.isEmpty()) {
                emit(Token.Kind.DATA, text, null, pos);
            }
            if (rawEnd >= 0) {
                lexRaw(rawEnd);
            } else if (kind == '#') {
                lexComment(idx);
            } else {
                lexTag(idx, kind == '%', hasSign ? idx + 3 : idx + 2);
            }
        }
        emit(Token.Kind.EOF, "", null, n);
    }

    private int nextTag(int from) {
        int n = src.length();
        for (int i = from; i + 1 < n; i++) {
            if (src.charAt(i) == '{') {
                char c = src.charAt(i + 1);
                if (c == '{' || c == '%' || c == '#') {
                    return i;
                }
            }
        }
        return -1;
    }

    /** Jinja2's OptionalLStrip: "-" strips all whitespace before the tag; lstrip_blocks strips a tag's own indentation. */
    private String applyLeftStrip(String text, char sign, boolean lstripApplies, int textStart) {
        if (sign == '-') {
            return PyStr.rstrip(text, null);
        }
        if (sign != '+' && lstripApplies) {
            int lpos = text.lastIndexOf('\n') + 1;
            boolean lineStarting = textStart == 0 || src.charAt(textStart - 1) == '\n';
            if ((lpos > 0 || lineStarting) && lpos < text.length() && allSpace(text, lpos)) {
                return text.substring(0, lpos);
            }
        }
        return text;
    }

    private static boolean allSpace(String s, int from) {
        for (int i = from; i < s.length(); i++) {
            if (!PyStr.isSpace(s.charAt(i))) {
                return false;
            }
        }
        return true;
    }

    private int skipSpace(int p) {
        while (p < src.length() && PyStr.isSpace(src.charAt(p))) {
            p++;
        }
        return p;
    }

    /** Matches {@code {%[-+]?\s*raw\s*(-%}\s*|%})} at idx; returns the end position or -1. */
    private int matchRawBegin(int idx) {
        int p = idx + 2;
        if (p < src.length() && (src.charAt(p) == '-' || src.charAt(p) == '+')) {
            p++;
        }
        p = skipSpace(p);
        if (!src.startsWith("raw", p)) {
            return -1;
        }
        p = skipSpace(p + 3);
        if (src.startsWith("-%}", p)) {
            return skipSpace(p + 3);
        }
        if (src.startsWith("%}", p)) {
            return p + 2;
        }
        return -1;
    }

    private void lexRaw(int contentStart) throws TemplateException {
        int p = contentStart;
        while (true) {
            int q = src.indexOf("{%", p);
            if (q < 0) {
                throw error("Missing end of raw directive", contentStart);
            }
            int r = q + 2;
            char sign = 0;
            if (r < src.length() && (src.charAt(r) == '-' || src.charAt(r) == '+')) {
                sign = src.charAt(r);
                r++;
            }
            r = skipSpace(r);
            if (src.startsWith("endraw", r)) {
                r = skipSpace(r + 6);
                int end = matchBlockEnd(r);
                if (end >= 0) {
                    String text = applyLeftStrip(src.substring(contentStart, q), sign, true, contentStart);
                    if (!text.isEmpty()) {
                        emit(Token.Kind.DATA, text, null, contentStart);
                    }
                    pos = end;
                    return;
                }
            }
            p = q + 2;
        }
    }

    /** Block end at p: {@code +%}}, {@code -%}\s*} or {@code %}\n?} (trim_blocks); returns the end or -1. */
    private int matchBlockEnd(int p) {
        if (src.startsWith("+%}", p)) {
            return p + 3;
        }
        if (src.startsWith("-%}", p)) {
            return skipSpace(p + 3);
        }
        if (src.startsWith("%}", p)) {
            int e = p + 2;
            return e < src.length() && src.charAt(e) == '\n' ? e + 1 : e;
        }
        return -1;
    }

    private void lexComment(int idx) throws TemplateException {
        int q = src.indexOf("#}", idx + 2);
        if (q < 0) {
            throw error("Missing end of comment tag", idx);
        }
        int start = idx + 2;
        if (q - 1 >= start && src.charAt(q - 1) == '-') {
            pos = skipSpace(q + 2);
        } else if (q - 1 >= start && src.charAt(q - 1) == '+') {
            pos = q + 2;
        } else {
            int e = q + 2;
            pos = e < src.length() && src.charAt(e) == '\n' ? e + 1 : e;
        }
    }

    private void lexTag(int idx, boolean block, int p) throws TemplateException {
        emit(block ? Token.Kind.BLOCK_BEGIN : Token.Kind.VAR_BEGIN, block ? "{%" : "{{", null, idx);
        StringBuilder balance = new StringBuilder();
        int n = src.length();
        while (true) {
            p = skipSpace(p);
            if (p >= n) {
                throw error("unexpected end of template, expected end of " + (block ? "block" : "print") + " tag", idx);
            }
            if (balance.isEmpty()) {
                if (block) {
                    int e = matchBlockEnd(p);
                    if (e >= 0) {
                        emit(Token.Kind.BLOCK_END, "%}", null, p);
                        pos = e;
                        return;
                    }
                } else if (src.startsWith("-}}", p)) {
                    emit(Token.Kind.VAR_END, "}}", null, p);
                    pos = skipSpace(p + 3);
                    return;
                } else if (src.startsWith("}}", p)) {
                    emit(Token.Kind.VAR_END, "}}", null, p);
                    pos = p + 2;
                    return;
                }
            }
            char c = src.charAt(p);
            if (c == '\'' || c == '"') {
                p = lexString(p, c);
            } else if (c >= '0' && c <= '9') {
                p = lexNumber(p);
            } else if (c == '_' || Character.isLetter(c)) {
                int s = p;
                while (p < n && (src.charAt(p) == '_' || Character.isLetterOrDigit(src.charAt(p)))) {
                    p++;
                }
                emit(Token.Kind.NAME, src.substring(s, p), null, s);
            } else {
                String op = null;
                for (String o : OPERATORS) {
                    if (src.startsWith(o, p)) {
                        op = o;
                        break;
                    }
                }
                if (op == null) {
                    throw error("unexpected char '" + c + "'", p);
                }
                switch (op) {
                    case "(" -> balance.append(')');
                    case "[" -> balance.append(']');
                    case "{" -> balance.append('}');
                    case ")", "]", "}" -> {
                        if (balance.isEmpty()) {
                            throw error("unexpected '" + op + "'", p);
                        }
                        char expected = balance.charAt(balance.length() - 1);
                        if (expected != op.charAt(0)) {
                            throw error("unexpected '" + op + "', expected '" + expected + "'", p);
                        }
                        balance.setLength(balance.length() - 1);
                    }
                    default -> { }
                }
                emit(Token.Kind.OP, op, null, p);
                p += op.length();
            }
        }
    }

    private int lexString(int p, char quote) throws TemplateException {
        int s = p;
        p++;
        int n = src.length();
        while (p < n && src.charAt(p) != quote) {
            if (src.charAt(p) == '\\') {
                p++;
            }
            p++;
        }
        if (p >= n) {
            throw error("unexpected end of string", s);
        }
        String raw = src.substring(s + 1, p);
        emit(Token.Kind.STRING, raw, unescape(raw), s);
        return p + 1;
    }

    /** Python's "unicode-escape" decoding as Jinja2 applies it to string literals; unknown escapes stay literal. */
    static String unescape(String raw) {
        if (raw.indexOf('\\') < 0) {
            return raw;
        }
        StringBuilder sb = new StringBuilder(raw.length());
        int n = raw.length();
        for (int i = 0; i < n; i++) {
            char c = raw.charAt(i);
            if (c != '\\' || i + 1 >= n) {
                sb.append(c);
                continue;
            }
            char e = raw.charAt(++i);
            switch (e) {
                case '\n' -> { }
                case '\\' -> sb.append('\\');
                case '\'' -> sb.append('\'');
                case '"' -> sb.append('"');
                case 'a' -> sb.append('\u0007');
                case 'b' -> sb.append('\b');
                case 'f' -> sb.append('\f');
                case 'n' -> sb.append('\n');
                case 'r' -> sb.append('\r');
                case 't' -> sb.append('\t');
                case 'v' -> sb.append('\u000b');
                case 'x', 'u', 'U' -> {
                    int len = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                    if (i + len < n + 0 && isHex(raw, i + 1, len)) {
                        sb.appendCodePoint(Integer.parseInt(raw.substring(i + 1, i + 1 + len), 16));
                        i += len;
                    } else {
                        sb.append('\\').append(e);
                    }
                }
                default -> {
                    if (e >= '0' && e <= '7') {
                        int j = i;
                        int v = 0;
                        while (j < n && j < i + 3 && raw.charAt(j) >= '0' && raw.charAt(j) <= '7') {
                            v = v * 8 + (raw.charAt(j) - '0');
                            j++;
                        }
                        sb.append((char) v);
                        i = j - 1;
                    } else {
                        sb.append('\\').append(e);
                    }
                }
            }
        }
        return sb.toString();
    }

    private static boolean isHex(String s, int from, int len) {
        if (from + len > s.length()) {
            return false;
        }
        for (int i = from; i < from + len; i++) {
            if (Character.digit(s.charAt(i), 16) < 0) {
                return false;
            }
        }
        return true;
    }

    private int lexNumber(int p) {
        int s = p;
        int n = src.length();
        while (p < n && (Character.isDigit(src.charAt(p)) || src.charAt(p) == '_')) {
            p++;
        }
        boolean isFloat = false;
        if (p + 1 < n && src.charAt(p) == '.' && Character.isDigit(src.charAt(p + 1))) {
            isFloat = true;
            p++;
            while (p < n && (Character.isDigit(src.charAt(p)) || src.charAt(p) == '_')) {
                p++;
            }
        }
        if (p < n && (src.charAt(p) == 'e' || src.charAt(p) == 'E')) {
            int q = p + 1;
            if (q < n && (src.charAt(q) == '+' || src.charAt(q) == '-')) {
                q++;
            }
            if (q < n && Character.isDigit(src.charAt(q))) {
                isFloat = true;
                p = q;
                while (p < n && Character.isDigit(src.charAt(p))) {
                    p++;
                }
            }
        }
        String t = src.substring(s, p).replace("_", "");
        if (isFloat) {
            emit(Token.Kind.FLOAT, t, Double.parseDouble(t), s);
        } else {
            emit(Token.Kind.INT, t, Long.parseLong(t), s);
        }
        return p;
    }
}
