package io.kvgate.dataplane.load;

/**
 * A tolerant reader of the Prometheus text exposition format (version 0.0.4, what prometheus_client serves vLLM's,
 * SGLang's and llama.cpp's {@code /metrics} in): one sample per line, {@code name{label="value",...} value
 * [timestamp]}. Blank lines and {@code #} lines ({@code # HELP}, {@code # TYPE}, comments, OpenMetrics' {@code # EOF})
 * carry no samples. Label values are unescaped ({@code \\}, {@code \"}, {@code \n}); values are Go-style floats
 * ({@code NaN}, {@code +Inf}, {@code -Inf}, exponents); an OpenMetrics exemplar after the value ({@code # {...} v}) is
 * ignored. A line that breaks the grammar (bad name, unterminated label value, unknown escape, missing or unparsable
 * value, trailing garbage) is skipped and counted, and reading goes on with the next line: one engine's odd line
 * must not blind the router to the rest of its page.
 *
 * <p>Stateless; runs on the load scraper's thread (it allocates the label strings of the samples it hands out).
 */
final class PrometheusText {
    private PrometheusText() {}

    /** Receives each well-formed sample. */
    interface Sink {
        /** Whether samples of {@code name} are wanted: others are still checked for form, but not decoded further. */
        boolean wants(String name);

        /** {@code labels} holds name/value pairs: {@code labels[2i]} is a name, {@code labels[2i+1]} its value. */
        void sample(String name, String[] labels, int labelCount, double value);
    }

    /** Reads every line of {@code text} into {@code sink}; returns how many lines were malformed (and skipped). */
    static int parse(String text, Sink sink) {
        int malformed = 0;
        int n = text.length();
        int pos = 0;
        String[] labels = new String[16];
        while (pos < n) {
            int end = text.indexOf('\n', pos);
            if (end < 0) {
                end = n;
            }
            int lineEnd = end > pos && text.charAt(end - 1) == '\r' ? end - 1 : end;
            if (!line(text, pos, lineEnd, sink, labels)) {
                malformed++;
            }
            pos = end + 1;
        }
        return malformed;
    }

    /** One line; false when it is malformed. */
    private static boolean line(String s, int from, int to, Sink sink, String[] labelBuf) {
        int i = skipSpace(s, from, to);
        if (i == to || s.charAt(i) == '#') {
            return true; // blank, HELP, TYPE, comment
        }
        int nameStart = i;
        if (!nameStart(s.charAt(i))) {
            return false;
        }
        i++;
        while (i < to && nameChar(s.charAt(i))) {
            i++;
        }
        String name = s.substring(nameStart, i);
        boolean wanted = sink.wants(name);
        String[] labels = labelBuf;
        int count = 0;
        int brace = skipSpace(s, i, to); // the label set may follow the name after blanks
        if (brace < to && s.charAt(brace) == '{') {
            i = brace + 1;
            StringBuilder value = new StringBuilder();
            while (true) {
                i = skipSpace(s, i, to);
                if (i >= to) {
                    return false;
                }
                if (s.charAt(i) == '}') {
                    i++;
                    break;
                }
                int ln = i;
                if (!labelStart(s.charAt(i))) {
                    return false;
                }
                i++;
                while (i < to && labelChar(s.charAt(i))) {
                    i++;
                }
                int lnEnd = i;
                i = skipSpace(s, i, to);
                if (i >= to || s.charAt(i) != '=') {
                    return false;
                }
                i = skipSpace(s, i + 1, to);
                if (i >= to || s.charAt(i) != '"') {
                    return false;
                }
                i++;
                value.setLength(0);
                boolean closed = false;
                while (i < to) {
                    char ch = s.charAt(i++);
                    if (ch == '"') {
                        closed = true;
                        break;
                    }
                    if (ch == '\\') {
                        if (i >= to) {
                            return false;
                        }
                        char e = s.charAt(i++);
                        switch (e) {
                            case '\\' -> value.append('\\');
                            case '"' -> value.append('"');
                            case 'n' -> value.append('\n');
                            default -> {
                                return false; // the format knows no other escape
                            }
                        }
                    } else {
                        value.append(ch);
                    }
                }
                if (!closed) {
                    return false;
                }
                if (wanted) {
                    if (2 * count + 2 > labels.length) {
                        labels = java.util.Arrays.copyOf(labels, labels.length * 2);
                    }
                    labels[2 * count] = s.substring(ln, lnEnd);
                    labels[2 * count + 1] = value.toString();
                }
                count++;
                i = skipSpace(s, i, to);
                if (i < to && s.charAt(i) == ',') {
                    i++;
                } else if (i < to && s.charAt(i) == '}') {
                    i++;
                    break;
                } else {
                    return false;
                }
            }
        }
        if (i >= to || !space(s.charAt(i))) {
            return false; // the value must be separated by whitespace
        }
        i = skipSpace(s, i, to);
        int vs = i;
        while (i < to && !space(s.charAt(i))) {
            i++;
        }
        double v = number(s, vs, i);
        if (Double.isNaN(v) && !isNaN(s, vs, i)) {
            return false; // not a number at all (a literal NaN is a value: the sample is handed out as unknown)
        }
        i = skipSpace(s, i, to);
        if (i < to && s.charAt(i) != '#') {
            // The optional timestamp: an integer (milliseconds; OpenMetrics allows a fraction of seconds).
            if (s.charAt(i) == '-' || s.charAt(i) == '+') {
                i++;
            }
            int digits = 0;
            while (i < to && ((s.charAt(i) >= '0' && s.charAt(i) <= '9') || s.charAt(i) == '.')) {
                digits += s.charAt(i) == '.' ? 0 : 1;
                i++;
            }
            if (digits == 0) {
                return false;
            }
            i = skipSpace(s, i, to);
            if (i < to && s.charAt(i) != '#') {
                return false; // anything after the timestamp other than an exemplar
            }
        }
        if (wanted) {
            sink.sample(name, labels, count, v);
        }
        return true;
    }

    /** The value token {@code s[from, to)} as a double; NaN when it is not a number (told apart by {@link #isNaN}). */
    private static double number(String s, int from, int to) {
        if (from >= to) {
            return Double.NaN;
        }
        String t = s.substring(from, to);
        switch (t) {
            case "NaN", "nan" -> {
                return Double.NaN;
            }
            case "+Inf", "Inf", "+inf", "inf" -> {
                return Double.POSITIVE_INFINITY;
            }
            case "-Inf", "-inf" -> {
                return Double.NEGATIVE_INFINITY;
            }
            default -> {
                // Java would also take "Infinity", "0x1p3" or a trailing 'd': Prometheus floats are digits, a sign,
                // one point and an exponent only.
                for (int k = 0; k < t.length(); k++) {
                    char c = t.charAt(k);
                    if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')) {
                        return Double.NaN;
                    }
                }
                try {
                    return Double.parseDouble(t);
                } catch (NumberFormatException e) {
                    return Double.NaN;
                }
            }
        }
    }

    private static boolean isNaN(String s, int from, int to) {
        return s.regionMatches(true, from, "nan", 0, 3) && to - from == 3;
    }

    private static int skipSpace(String s, int i, int to) {
        while (i < to && space(s.charAt(i))) {
            i++;
        }
        return i;
    }

    private static boolean space(char c) {
        return c == ' ' || c == '\t';
    }

    private static boolean nameStart(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    }

    private static boolean nameChar(char c) {
        return nameStart(c) || (c >= '0' && c <= '9');
    }

    private static boolean labelStart(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    }

    private static boolean labelChar(char c) {
        return labelStart(c) || (c >= '0' && c <= '9');
    }
}
