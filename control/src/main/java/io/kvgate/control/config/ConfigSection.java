package io.kvgate.control.config;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.function.Predicate;

/**
 * One mapping of the configuration ({@code limits}, {@code rules[].kv}, the top level, ...) and the keys declared in
 * it, in document order. A section is declared in one small {@code *Keys} class and listed once in
 * {@link ConfigSchema#SECTIONS}; adding a key is one declaration there plus the field of the record that holds it.
 *
 * @param <R> the record holding the section's effective values (what the read-back reads)
 */
public final class ConfigSection<R> {
    /** Path prefix of the keys of one rule. */
    static final String RULE_PREFIX = "rules[].";

    private final String path;
    private final String doc;
    private final ConfigSection<?> parent;
    private final Function<Object, Object> fromParent;
    private final boolean list;
    private final Predicate<R> present;
    private final List<ConfigKey<R, ?>> keys = new ArrayList<>();
    private boolean restartAsWhole;

    private ConfigSection(String path, String doc, ConfigSection<?> parent, Function<Object, Object> fromParent, boolean list,
                          Predicate<R> present) {
        this.path = path;
        this.doc = doc;
        this.parent = parent;
        this.fromParent = fromParent;
        this.list = list;
        this.present = present;
    }

    /** The top level of the document. */
    static ConfigSection<GatewayConfig> root(String doc) {
        return new ConfigSection<>("", doc, null, null, false, r -> true);
    }

    /** A mapping {@code name} inside {@code parent}, read back from {@code of(parentRecord)}. */
    @SuppressWarnings("unchecked")
    public static <P, R> ConfigSection<R> mapping(ConfigSection<P> parent, String name, String doc, Function<P, R> of) {
        return new ConfigSection<>(join(parent.path, name), doc, parent, (Function<Object, Object>) of, false, r -> true);
    }

    /** A mapping written back only when {@code present} holds (e.g. admission control, when it is on). */
    @SuppressWarnings("unchecked")
    public static <P, R> ConfigSection<R> optionalMapping(ConfigSection<P> parent, String name, String doc, Function<P, R> of,
                                                          Predicate<R> present) {
        return new ConfigSection<>(join(parent.path, name), doc, parent, (Function<Object, Object>) of, false, present);
    }

    /** A list of mappings {@code name[]} inside {@code parent} (rules, endpoints). */
    @SuppressWarnings("unchecked")
    public static <P, R> ConfigSection<R> listOf(ConfigSection<P> parent, String name, String doc, Function<P, List<R>> of) {
        return new ConfigSection<>(join(parent.path, name) + "[]", doc, parent, (Function<Object, Object>) (Function<?, ?>) of,
            true, r -> true);
    }

    /**
     * A mapping with no place of its own in the read-back: written by a key of another section (a model entry, which
     * is a plain string unless it renames or carries adapters).
     */
    public static <R> ConfigSection<R> detached(String path, String doc) {
        return new ConfigSection<>(path, doc, null, null, false, r -> true);
    }

    private static String join(String parent, String name) {
        return parent.isEmpty() ? name : parent + "." + name;
    }

    /** A restart changes it as a whole: a reload that changes any of its keys is refused naming the section. */
    public ConfigSection<R> restartAsWhole() {
        this.restartAsWhole = true;
        return this;
    }

    public String path() {
        return path;
    }

    /** The section's last path element ({@code kv}, {@code endpoints}); empty for the top level. */
    public String name() {
        String p = list ? path.substring(0, path.length() - 2) : path;
        return p.substring(p.lastIndexOf('.') + 1);
    }

    public String doc() {
        return doc;
    }

    public ConfigSection<?> parent() {
        return parent;
    }

    public boolean isList() {
        return list;
    }

    public boolean isRestartAsWhole() {
        return restartAsWhole;
    }

    public List<ConfigKey<R, ?>> keys() {
        return Collections.unmodifiableList(keys);
    }

    private <T> ConfigKey<R, T> add(ConfigKey<R, T> k) {
        for (ConfigKey<R, ?> other : keys) {
            if (other.name().equals(k.name())) {
                throw new IllegalStateException(k.path() + " is declared twice");
            }
        }
        keys.add(k);
        return k;
    }

    public ConfigKey<R, Integer> intKey(String name, int dflt, int min, int max) {
        return add(new ConfigKey<>(this, name, ConfigKey.Type.INT, dflt, min, max, null, null));
    }

    /** An integer key whose absence means something no value stands for ({@code defaultText} says what). */
    public ConfigKey<R, Integer> optionalIntKey(String name, int min, int max, String defaultText) {
        return add(new ConfigKey<R, Integer>(this, name, ConfigKey.Type.INT, null, min, max, null, null)).defaultText(defaultText);
    }

    public ConfigKey<R, Long> longKey(String name, long dflt, long min, long max) {
        return add(new ConfigKey<>(this, name, ConfigKey.Type.LONG, dflt, min, max, null, null));
    }

    public ConfigKey<R, Double> doubleKey(String name, double dflt, double min, double max) {
        return add(new ConfigKey<>(this, name, ConfigKey.Type.DOUBLE, dflt, min, max, null, null));
    }

    public ConfigKey<R, Double> optionalDoubleKey(String name, double min, double max, String defaultText) {
        return add(new ConfigKey<R, Double>(this, name, ConfigKey.Type.DOUBLE, null, min, max, null, null)).defaultText(defaultText);
    }

    public ConfigKey<R, Boolean> boolKey(String name, boolean dflt) {
        return add(new ConfigKey<>(this, name, ConfigKey.Type.BOOLEAN, dflt, null, null, null, null));
    }

    public ConfigKey<R, String> stringKey(String name, String dflt) {
        return add(new ConfigKey<>(this, name, ConfigKey.Type.STRING, dflt, null, null, null, null));
    }

    /** One of the lower-case names of {@code values}' constants. */
    public ConfigKey<R, String> enumKey(String name, String dflt, Class<? extends Enum<?>> values) {
        return add(new ConfigKey<>(this, name, ConfigKey.Type.ONE_OF, dflt, null, null, ConfigKey.lowerCaseNames(values), values));
    }

    /** One of {@code values} (a vocabulary no enum names). */
    public ConfigKey<R, String> oneOfKey(String name, String dflt, List<String> values) {
        return add(new ConfigKey<>(this, name, ConfigKey.Type.ONE_OF, dflt, null, null, values, null));
    }

    public ConfigKey<R, List<String>> stringListKey(String name) {
        return add(new ConfigKey<>(this, name, ConfigKey.Type.STRING_LIST, List.of(), null, null, null, null));
    }

    public ConfigKey<R, List<Integer>> intListKey(String name, long min, long max) {
        return add(new ConfigKey<>(this, name, ConfigKey.Type.INT_LIST, List.of(), min, max, null, null));
    }

    public ConfigKey<R, Map<String, String>> stringMapKey(String name) {
        return add(new ConfigKey<>(this, name, ConfigKey.Type.STRING_MAP, Map.of(), null, null, null, null));
    }

    /** A key read by its own code (its name still comes from here); {@code typeText} is its type in the docs. */
    public ConfigKey<R, Object> customKey(String name, String typeText) {
        return add(new ConfigKey<R, Object>(this, name, ConfigKey.Type.CUSTOM, null, null, null, null, null)).typeText(typeText);
    }

    /** A custom key with a numeric range (checked by its own code; shown in the docs). */
    public ConfigKey<R, Object> customKey(String name, String typeText, long min, long max) {
        return add(new ConfigKey<R, Object>(this, name, ConfigKey.Type.CUSTOM, null, min, max, null, null)).typeText(typeText);
    }

    /** The section read from its parent's record (null when absent). */
    Object of(Object parentRecord) {
        return fromParent.apply(parentRecord);
    }

    /**
     * The section's effective values in its own vocabulary, then its child sections (in {@link ConfigSchema#SECTIONS}
     * order): what {@code GET /admin/v1/config} shows, secrets redacted unless {@code withSecrets}.
     */
    @SuppressWarnings("unchecked")
    public Map<String, Object> write(R record, boolean withSecrets) {
        Map<String, Object> out = new LinkedHashMap<>();
        for (ConfigKey<R, ?> k : keys) {
            Function<R, ?> get = k.readBackGetter();
            if (get == null) {
                continue;
            }
            Object v = get.apply(record);
            if (v == null) {
                continue;
            }
            if (k.isSecret() && !withSecrets) {
                if (v instanceof List<?> l) {
                    v = new ArrayList<>(Collections.nCopies(l.size(), GatewayConfig.REDACTED));
                } else {
                    v = GatewayConfig.REDACTED;
                }
            }
            out.put(k.name(), v);
        }
        for (ConfigSection<?> child : ConfigSchema.childrenOf(this)) {
            Object value = child.of(record);
            if (child.list) {
                List<Object> items = new ArrayList<>();
                for (Object item : (List<Object>) value) {
                    items.add(((ConfigSection<Object>) child).write(item, withSecrets));
                }
                out.put(child.name(), items);
            } else if (value != null && ((Predicate<Object>) (Predicate<?>) child.present).test(value)) {
                out.put(child.name(), ((ConfigSection<Object>) child).write(value, withSecrets));
            }
        }
        return out;
    }

    @Override
    public String toString() {
        return path.isEmpty() ? "(top level)" : path;
    }
}
