package io.kvgate.index.template;

import java.util.ArrayList;
import java.util.List;

/**
 * Python {@code str} semantics over Java strings (public only for {@code strip}/{@code lstrip}/{@code rstrip}, which the prompt
 * renderer needs for transformers' continue_final_message cut): indexes and lengths count code points (Python's unit), whitespace is
 * Python's {@code str.isspace()} set, and the string methods chat templates call behave as in CPython.
 *
 * <p>Threading contract: stateless, thread-safe.
 */
public final class PyStr {
    private PyStr() {
    }

    /** Python str.isspace() for one BMP char (every whitespace char is in the BMP). */
    static boolean isSpace(int c) {
        return switch (c) {
            case ' ', '\t', '\n', 0x0b, 0x0c, '\r', 0x1c, 0x1d, 0x1e, 0x1f, 0x85, 0xa0, 0x1680, 0x2028, 0x2029, 0x202f,
                 0x205f, 0x3000 -> true;
            default -> c >= 0x2000 && c <= 0x200a;
        };
    }

    static boolean hasSurrogates(String s) {
        for (int i = 0; i < s.length(); i++) {
            if (Character.isSurrogate(s.charAt(i))) {
                return true;
            }
        }
        return false;
    }

    static int length(String s) {
        return hasSurrogates(s) ? s.codePointCount(0, s.length()) : s.length();
    }

    /** Converts a code-point index (0..len) to a UTF-16 offset. */
    static int offset(String s, int cpIndex) {
        return hasSurrogates(s) ? s.offsetByCodePoints(0, cpIndex) : cpIndex;
    }

    static int cpIndex(String s, int utf16Offset) {
        return hasSurrogates(s) ? s.codePointCount(0, utf16Offset) : utf16Offset;
    }

    static int[] codePoints(String s) {
        return s.codePoints().toArray();
    }

    private static boolean inChars(int c, String chars) {
        return chars == null ? isSpace(c) : chars.indexOf(c) >= 0 || (c > 0xffff && chars.contains(Character.toString(c)));
    }

    public static String strip(String s, String chars) {
        return rstrip(lstrip(s, chars), chars);
    }

    public static String lstrip(String s, String chars) {
        int i = 0;
        while (i < s.length()) {
            int c = s.codePointAt(i);
            if (!inChars(c, chars)) {
                break;
            }
            i += Character.charCount(c);
        }
        return s.substring(i);
    }

    public static String rstrip(String s, String chars) {
        int j = s.length();
        while (j > 0) {
            int c = s.codePointBefore(j);
            if (!inChars(c, chars)) {
                break;
            }
            j -= Character.charCount(c);
        }
        return s.substring(0, j);
    }

    /** str.split(sep=None, maxsplit=-1). */
    static List<Object> split(String s, String sep, long maxsplit) {
        List<Object> out = new ArrayList<>();
        if (sep == null) {
            int i = 0;
            int n = s.length();
            long splits = 0;
            while (true) {
                while (i < n && isSpace(s.charAt(i))) {
                    i++;
                }
                if (i >= n) {
                    break;
                }
                if (maxsplit >= 0 && splits >= maxsplit) {
                    out.add(rstrip(s.substring(i), null));
                    break;
                }
                int j = i;
                while (j < n && !isSpace(s.charAt(j))) {
                    j++;
                }
                out.add(s.substring(i, j));
                splits++;
                i = j;
            }
            return out;
        }
        int i = 0;
        long splits = 0;
        while (maxsplit < 0 || splits < maxsplit) {
            int j = s.indexOf(sep, i);
            if (j < 0) {
                break;
            }
            out.add(s.substring(i, j));
            i = j + sep.length();
            splits++;
        }
        out.add(s.substring(i));
        return out;
    }

    /** str.rsplit(sep=None, maxsplit=-1). */
    static List<Object> rsplit(String s, String sep, long maxsplit) {
        if (maxsplit < 0) {
            return split(s, sep, -1);
        }
        List<Object> out = new ArrayList<>();
        if (sep == null) {
            int j = s.length();
            long splits = 0;
            while (true) {
                while (j > 0 && isSpace(s.charAt(j - 1))) {
                    j--;
                }
                if (j <= 0) {
                    break;
                }
                if (splits >= maxsplit) {
                    out.add(lstrip(s.substring(0, j), null));
                    break;
                }
                int i = j;
                while (i > 0 && !isSpace(s.charAt(i - 1))) {
                    i--;
                }
                out.add(s.substring(i, j));
                splits++;
                j = i;
            }
        } else {
            int j = s.length();
            long splits = 0;
            while (splits < maxsplit) {
                int i = s.lastIndexOf(sep, j - sep.length());
                if (i < 0 || j - sep.length() < 0) {
                    break;
                }
                out.add(s.substring(i + sep.length(), j));
                j = i;
                splits++;
            }
            out.add(s.substring(0, j));
        }
        java.util.Collections.reverse(out);
        return out;
    }

    static List<Object> splitlines(String s, boolean keepends) {
        List<Object> out = new ArrayList<>();
        int n = s.length();
        int start = 0;
        int i = 0;
        while (i < n) {
            char c = s.charAt(i);
            int eol = -1;
            if (c == '\r' && i + 1 < n && s.charAt(i + 1) == '\n') {
                eol = i + 2;
            } else if (c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d || c == 0x1e
                    || c == 0x85 || c == 0x2028 || c == 0x2029) {
                eol = i + 1;
            }
            if (eol >= 0) {
                out.add(s.substring(start, keepends ? eol : i));
                start = eol;
                i = eol;
            } else {
                i++;
            }
        }
        if (start < n) {
            out.add(s.substring(start));
        }
        return out;
    }

    static String replace(String s, String old, String neu, long count) {
        if (count < 0) {
            if (old.isEmpty()) {
                count = Long.MAX_VALUE;
            } else {
                return s.replace(old, neu);
            }
        }
        StringBuilder sb = new StringBuilder();
        if (old.isEmpty()) {
            int[] cps = codePoints(s);
            long done = 0;
            for (int k = 0; k <= cps.length; k++) {
                if (done < count) {
                    sb.append(neu);
                    done++;
                }
                if (k < cps.length) {
                    sb.appendCodePoint(cps[k]);
                }
            }
            return sb.toString();
        }
        int i = 0;
        long done = 0;
        while (done < count) {
            int j = s.indexOf(old, i);
            if (j < 0) {
                break;
            }
            sb.append(s, i, j).append(neu);
            i = j + old.length();
            done++;
        }
        return sb.append(s, i, s.length()).toString();
    }

    private static boolean isCased(int c) {
        return Character.isUpperCase(c) || Character.isLowerCase(c) || Character.isTitleCase(c);
    }

    static String upper(String s) {
        return s.toUpperCase(java.util.Locale.ROOT);
    }

    static String lower(String s) {
        return s.toLowerCase(java.util.Locale.ROOT);
    }

    /** str.title(): a cased char after an uncased one is title-cased, others lower-cased. */
    static String title(String s) {
        StringBuilder sb = new StringBuilder(s.length());
        boolean prevCased = false;
        for (int i = 0; i < s.length(); ) {
            int c = s.codePointAt(i);
            i += Character.charCount(c);
            if (isCased(c)) {
                sb.append(prevCased ? lower(Character.toString(c)) : titleCase(c));
                prevCased = true;
            } else {
                sb.appendCodePoint(c);
                prevCased = false;
            }
        }
        return sb.toString();
    }

    private static String titleCase(int c) {
        int t = Character.toTitleCase(c);
        if (t != c || Character.isTitleCase(c)) {
            return Character.toString(t);
        }
        return upper(Character.toString(c));
    }

    /** str.capitalize(): first char title-cased (Python 3.8+), the rest lower-cased. */
    static String capitalize(String s) {
        if (s.isEmpty()) {
            return s;
        }
        int c = s.codePointAt(0);
        return titleCase(c) + lower(s.substring(Character.charCount(c)));
    }

    static boolean isPrintable(int c) {
        if (c == ' ') {
            return true;
        }
        return switch (Character.getType(c)) {
            case Character.CONTROL, Character.FORMAT, Character.SURROGATE, Character.PRIVATE_USE, Character.UNASSIGNED,
                 Character.LINE_SEPARATOR, Character.PARAGRAPH_SEPARATOR, Character.SPACE_SEPARATOR -> false;
            default -> true;
        };
    }

    /** Python repr() of a str. */
    static String repr(String s) {
        char quote = s.indexOf('\'') >= 0 && s.indexOf('"') < 0 ? '"' : '\'';
        StringBuilder sb = new StringBuilder(s.length() + 2).append(quote);
        for (int i = 0; i < s.length(); ) {
            int c = s.codePointAt(i);
            i += Character.charCount(c);
            if (c == quote || c == '\\') {
                sb.append('\\').appendCodePoint(c);
            } else if (c == '\t') {
                sb.append("\\t");
            } else if (c == '\n') {
                sb.append("\\n");
            } else if (c == '\r') {
                sb.append("\\r");
            } else if (c < 0x20 || c == 0x7f) {
                sb.append(String.format("\\x%02x", c));
            } else if (c < 0x7f || isPrintable(c)) {
                sb.appendCodePoint(c);
            } else if (c <= 0xff) {
                sb.append(String.format("\\x%02x", c));
            } else if (c <= 0xffff) {
                sb.append(String.format("\\u%04x", c));
            } else {
                sb.append(String.format("\\U%08x", c));
            }
        }
        return sb.append(quote).toString();
    }
}
