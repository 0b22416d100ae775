package io.kvgate.control.config;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Function;

/**
 * One configuration key, declared once: its path, type (for a vocabulary, the enum or the list of values), default,
 * range, one-line doc, {@link Scope} and whether it is a secret. The parser reads the key through its declaration
 * ({@link #read}: type check, default, range, each problem naming the key path, the value and the rule), the
 * read-back writes it through {@link #readBack} (redacted when secret), and the live tunables, the restart-only list
 * and docs/configuration.md are derived from the declarations ({@link ConfigSchema}).
 *
 * <p>Keys whose reading is more than a typed value (a host:port, a value that may be a string or a mapping, a
 * default that depends on the rule's engine) are declared with {@link Type#CUSTOM} or read with {@link #read(ConfigNode,
 * Object)}; their parsing code still names them through the declaration ({@link #name()}), which the drift test checks.
 * Built while its section's class initializes, then never changed.
 *
 * @param <R> the record the key's value is read back from
 * @param <T> the value's Java type
 */
public final class ConfigKey<R, T> {

    /** The value's type as the YAML document writes it. */
    public enum Type { INT, LONG, DOUBLE, BOOLEAN, STRING, ONE_OF, STRING_LIST, INT_LIST, STRING_MAP, CUSTOM }

    private final ConfigSection<R> section;
    private final String name;
    private final Type type;
    private final T dflt;
    private final Number min;
    private final Number max;
    private final List<String> values;
    private final Class<? extends Enum<?>> enumType;
    private String typeText;
    private String defaultText;
    private String doc = "";
    private Scope scope = Scope.RELOAD;
    private boolean secret;
    private String restartReason;
    private Function<R, ?> readBack;

    ConfigKey(ConfigSection<R> section, String name, Type type, T dflt, Number min, Number max, List<String> values,
              Class<? extends Enum<?>> enumType) {
        this.section = section;
        this.name = name;
        this.type = type;
        this.dflt = dflt;
        this.min = min;
        this.max = max;
        this.values = values == null ? List.of() : List.copyOf(values);
        this.enumType = enumType;
    }

    /** The one-line description docs/configuration.md shows. */
    public ConfigKey<R, T> doc(String text) {
        this.doc = text;
        return this;
    }

    /** The default as docs/configuration.md shows it, where it is not one value (depends on the engine, "off", ...). */
    public ConfigKey<R, T> defaultText(String text) {
        this.defaultText = text;
        return this;
    }

    /** The type as docs/configuration.md shows it, for {@link Type#CUSTOM} keys. */
    public ConfigKey<R, T> typeText(String text) {
        this.typeText = text;
        return this;
    }

    /** Read at start-up only; {@code why} is what a refused {@code ctl patch} says about it. */
    public ConfigKey<R, T> restartOnly(String why) {
        this.scope = Scope.RESTART;
        this.restartReason = why;
        return this;
    }

    public ConfigKey<R, T> restartOnly() {
        return restartOnly(null);
    }

    /** A per-rule live tunable ({@code ctl patch}). */
    public ConfigKey<R, T> live() {
        this.scope = Scope.LIVE;
        return this;
    }

    /** Never shown by the read-back ({@code GET /admin/v1/config}): written as {@link GatewayConfig#REDACTED}. */
    public ConfigKey<R, T> secret() {
        this.secret = true;
        return this;
    }

    /** How the read-back finds the effective value in its record; a null answer leaves the key out. */
    public ConfigKey<R, T> readBack(Function<R, ?> getter) {
        this.readBack = getter;
        return this;
    }

    public String name() {
        return name;
    }

    public ConfigSection<R> section() {
        return section;
    }

    /** The full path, e.g. {@code limits.max_body_bytes} or {@code rules[].kv.load_cap_factor}. */
    public String path() {
        return section.path().isEmpty() ? name : section.path() + "." + name;
    }

    /** The path within a rule ({@code kv.load_cap_factor}), as {@code ctl patch} names it; null outside rules. */
    public String rulePath() {
        String p = path();
        return p.startsWith(ConfigSection.RULE_PREFIX) ? p.substring(ConfigSection.RULE_PREFIX.length()) : null;
    }

    public Type type() {
        return type;
    }

    public T defaultValue() {
        return dflt;
    }

    public Number min() {
        return min;
    }

    public Number max() {
        return max;
    }

    /** The vocabulary of a {@link Type#ONE_OF} key (lower-case enum names when declared with an enum). */
    public List<String> values() {
        return values;
    }

    /** The enum a {@link Type#ONE_OF} key's values name, or null when it is a plain list. */
    public Class<? extends Enum<?>> enumType() {
        return enumType;
    }

    public String doc() {
        return doc;
    }

    public Scope scope() {
        return scope;
    }

    public boolean isSecret() {
        return secret;
    }

    /** Why a restart-only key cannot be changed live, or null. */
    public String restartReason() {
        return restartReason;
    }

    Function<R, ?> readBackGetter() {
        return readBack;
    }

    /** Reads the key from {@code n} with its declared default. */
    public T read(ConfigNode n) {
        return read(n, dflt);
    }

    /**
     * Reads the key from {@code n}; {@code whenAbsent} is the default for this reading (one that depends on other
     * keys, e.g. the rule's engine). Type, range and vocabulary are the declaration's; a problem names the key path,
     * the value and the rule, and the reading falls back to {@code whenAbsent}.
     */
    @SuppressWarnings("unchecked")
    public T read(ConfigNode n, T whenAbsent) {
        return (T) switch (type) {
            case INT -> Integer.valueOf(n.intValue(name, whenAbsent == null ? min.intValue() : (Integer) whenAbsent,
                min.intValue(), max.intValue()));
            case LONG -> Long.valueOf(n.longValue(name, whenAbsent == null ? min.longValue() : (Long) whenAbsent,
                min.longValue(), max.longValue()));
            case DOUBLE -> Double.valueOf(n.doubleValue(name, whenAbsent == null ? min.doubleValue() : (Double) whenAbsent,
                min.doubleValue(), max.doubleValue()));
            case BOOLEAN -> Boolean.valueOf(n.bool(name, (Boolean) whenAbsent));
            case STRING -> n.string(name, (String) whenAbsent);
            case ONE_OF -> n.oneOf(name, (String) whenAbsent, values);
            case STRING_LIST -> n.stringList(name);
            case INT_LIST -> n.intList(name, min.longValue(), max.longValue());
            case STRING_MAP -> n.stringMap(name);
            case CUSTOM -> throw new IllegalStateException(path() + " is read by its own code");
        };
    }

    /**
     * Reads the key only when the document sets it: {@code whenAbsent} otherwise (a key whose absence means "off"
     * or "follows another key", which no value in range stands for).
     */
    public T readIfSet(ConfigNode n, T whenAbsent) {
        return n.has(name) ? read(n, dflt) : whenAbsent;
    }

    /** The value's type as docs/configuration.md writes it. */
    public String typeText() {
        if (typeText != null) {
            return typeText;
        }
        return switch (type) {
            case INT, LONG -> "integer";
            case DOUBLE -> "number";
            case BOOLEAN -> "boolean";
            case STRING -> "string";
            case ONE_OF -> "one of";
            case STRING_LIST -> "list of strings";
            case INT_LIST -> "list of integers";
            case STRING_MAP -> "mapping";
            case CUSTOM -> "see doc";
        };
    }

    /** The default as docs/configuration.md writes it. */
    public String defaultDocText() {
        if (defaultText != null) {
            return defaultText;
        }
        if (dflt == null) {
            return "—";
        }
        if (dflt instanceof List<?> l && l.isEmpty() || dflt instanceof Map<?, ?> m && m.isEmpty()) {
            return "—";
        }
        String s = dflt instanceof String str ? "`" + (str.isEmpty() ? "\"\"" : str) + "`" : String.valueOf(dflt);
        if (dflt instanceof Number num && name.endsWith("_bytes")) {
            s += bytesText(num.longValue());
        }
        return s;
    }

    /** Range or vocabulary as docs/configuration.md writes it; empty when the type says all. */
    public String rangeDocText() {
        if (type == Type.ONE_OF) {
            List<String> quoted = new ArrayList<>();
            for (String v : values) {
                quoted.add("`" + v + "`");
            }
            return String.join(" \\| ", quoted);
        }
        if (min == null) {
            return "";
        }
        return "[" + numberText(min) + ", " + numberText(max) + "]";
    }

    private static String numberText(Number n) {
        if (n instanceof Double d) {
            return d == Math.rint(d) && Math.abs(d) < 1e15 ? String.valueOf(d.longValue()) + ".0" : String.valueOf(d);
        }
        return String.valueOf(n);
    }

    private static String bytesText(long v) {
        if (v >= 1 << 20 && v % (1 << 20) == 0) {
            return " (" + (v >> 20) + " MiB)";
        }
        if (v >= 1 << 10 && v % (1 << 10) == 0) {
            return " (" + (v >> 10) + " KiB)";
        }
        return "";
    }

    /** The lower-case names of an enum's constants, in declaration order: a ONE_OF key's vocabulary. */
    static List<String> lowerCaseNames(Class<? extends Enum<?>> e) {
        List<String> out = new ArrayList<>();
        for (Enum<?> c : e.getEnumConstants()) {
            out.add(c.name().toLowerCase(Locale.ROOT));
        }
        return out;
    }

    @Override
    public String toString() {
        return path();
    }
}
