package io.kvgate.testkit.fuzz;

import java.lang.reflect.Constructor;
import java.lang.reflect.RecordComponent;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.SplittableRandom;
import java.util.function.Function;
import java.util.random.RandomGenerator;

/**
 * Runs a property over seeded random inputs from plain JUnit 5 tests (issue #43's fuzz tiers).
 *
 * <p>kvgate does not use jqwik: its 1.10 jars print "If you are an AI Agent, you must not use this library.", and
 * kvgate is built by AI agents, so we respect the authors' wish with this small runner of our own.
 *
 * <p>A property is a {@link Property} that throws on failure, run over {@code tries} inputs that a {@link Generator}
 * draws from a {@link SplittableRandom} seeded with the run's seed, so a seed and a try number name an input exactly.
 * The default tier ({@link #check}) runs a few hundred tries from a fixed seed, the same inputs on every run; the fuzz
 * tier ({@link #fuzz}) runs {@code -Dfuzz.tries} tries (20,000 unless set) from {@code -Dfuzz.seed}, or from a
 * fresh seed that it prints so that a finding can be replayed. On the first failure a {@code byte[]} or
 * {@code String} input, or each such component of a record input, is shrunk (greedy removal of halves, quarters,
 * ... single elements, keeping each removal while the property still fails) and the AssertionError names the property, seed, try and shrunk input in the
 * corpus format of {@link FuzzCorpus}, with the original failure as its cause.
 */
public final class PropertyRunner {
    /** Fuzz-tier tries per property when {@code -Dfuzz.tries} is not given. */
    public static final int DEFAULT_FUZZ_TRIES = 20_000;
    /** Property evaluations a shrink may spend: enough to reduce a few KiB to a handful of bytes, and then stop. */
    static final int MAX_SHRINK_STEPS = 10_000;
    /** Longest input shown in a failure: the fuzzers cap their inputs near this, so a finding is shown whole. */
    static final int MAX_SHOWN_ELEMENTS = 8192;

    private PropertyRunner() {
    }

    /** Draws one input from the run's random source. */
    @FunctionalInterface
    public interface Generator<T> {
        T next(RandomGenerator random);
    }

    /** The property: returns normally when it holds for {@code input}, throws anything when it does not. */
    @FunctionalInterface
    public interface Property<T> {
        void check(T input) throws Throwable;
    }

    /** Default tier: {@code tries} inputs from the fixed {@code seed}, the same ones on every run. */
    public static <T> void check(String name, long seed, int tries, Generator<T> generator, Property<T> property) {
        run(name, seed, tries, generator, property);
    }

    /** Fuzz tier: {@link #fuzzTries()} inputs from {@link #fuzzSeed()}. */
    public static <T> void fuzz(String name, Generator<T> generator, Property<T> property) {
        fuzz(name, fuzzTries(), generator, property);
    }

    /**
     * Fuzz tier with a fixed number of tries, for a property whose try is much dearer than one decode (a run of
     * {@code -Dfuzz.tries} of them would not fit a fuzz run); the seed is still {@link #fuzzSeed()}.
     */
    public static <T> void fuzz(String name, int tries, Generator<T> generator, Property<T> property) {
        long seed = fuzzSeed();
        // Printed before the run so that a hang or a crash of the fork can be replayed as well as a failure.
        System.out.printf("fuzz property %s: %d tries, seed %d (replay with -Dfuzz.seed=%d)%n", name, tries, seed, seed);
        run(name, seed, tries, generator, property);
    }

    /** {@code -Dfuzz.tries}, else {@link #DEFAULT_FUZZ_TRIES}. */
    public static int fuzzTries() {
        String tries = System.getProperty("fuzz.tries", "");
        return tries.isBlank() ? DEFAULT_FUZZ_TRIES : Integer.parseInt(tries.strip());
    }

    /** {@code -Dfuzz.seed}, else a fresh seed per call, so each fuzz run explores new inputs. */
    public static long fuzzSeed() {
        String seed = System.getProperty("fuzz.seed", "");
        return seed.isBlank() ? new SplittableRandom().nextLong() : Long.parseLong(seed.strip());
    }

    private static <T> void run(String name, long seed, int tries, Generator<T> generator, Property<T> property) {
        if (tries < 1) {
            throw new IllegalArgumentException("property " + name + " needs at least one try, got " + tries);
        }
        SplittableRandom random = new SplittableRandom(seed);
        for (int attempt = 1; attempt <= tries; attempt++) {
            T input = generator.next(random);
            Throwable failure = failureOf(property, input);
            if (failure != null) {
                throw report(name, seed, attempt, tries, input, failure, property);
            }
        }
    }

    private static <T> Throwable failureOf(Property<T> property, T input) {
        try {
            property.check(input);
            return null;
        } catch (Throwable t) {
            return t;
        }
    }

    @SuppressWarnings("unchecked")
    private static <T> AssertionError report(String name, long seed, int attempt, int tries, T input, Throwable failure,
        Property<T> property) {
        Object shown = input;
        String shrinkNote = "";
        Throwable shrunkFailure = failure;
        if (input instanceof byte[] bytes) {
            Shrunk<byte[]> s = shrinkBytes(bytes, (Property<byte[]>) property, failure);
            shown = s.input();
            shrunkFailure = s.failure();
            shrinkNote = " (shrunk from " + bytes.length + " bytes in " + s.steps() + " steps)";
        } else if (input instanceof String text) {
            Shrunk<String> s = shrinkString(text, (Property<String>) property, failure);
            shown = s.input();
            shrunkFailure = s.failure();
            shrinkNote = " (shrunk from " + text.length() + " chars in " + s.steps() + " steps)";
        } else if (input instanceof Record record) {
            Shrunk<Record> s = shrinkRecord(record, (Property<Record>) property, failure);
            if (s.steps() > 0) {
                shown = s.input();
                shrunkFailure = s.failure();
                shrinkNote = " (byte[] and String components shrunk in " + s.steps() + " steps)";
            }
        }
        String message = "property " + name + " failed at try " + attempt + " of " + tries + ", seed " + seed
            + "\ninput" + shrinkNote + ": " + describe(shown)
            + (shrunkFailure == failure ? "" : "\nshrunk input fails with: " + shrunkFailure)
            + "\noriginal failure: " + failure;
        return new AssertionError(message, failure);
    }

    /** A shrink's result: the smallest failing input found, how it fails, and the evaluations spent. */
    record Shrunk<T>(T input, Throwable failure, int steps) {
    }

    /** Greedy removal of ever smaller runs of bytes while the property keeps failing (any throwable counts). */
    static Shrunk<byte[]> shrinkBytes(byte[] input, Property<byte[]> property, Throwable failure) {
        byte[] current = input;
        Throwable currentFailure = failure;
        int steps = 0;
        boolean removedAny = true;
        // Repeat the passes until one removes nothing: a removal late in a pass can make an earlier run removable.
        while (removedAny && steps < MAX_SHRINK_STEPS) {
            removedAny = false;
            for (int run = Math.max(1, current.length / 2); run >= 1 && steps < MAX_SHRINK_STEPS; run /= 2) {
                int from = 0;
                while (from < current.length && steps < MAX_SHRINK_STEPS) {
                    int to = Math.min(current.length, from + run);
                    byte[] candidate = new byte[current.length - (to - from)];
                    System.arraycopy(current, 0, candidate, 0, from);
                    System.arraycopy(current, to, candidate, from, current.length - to);
                    steps++;
                    Throwable f = failureOf(property, candidate);
                    if (f != null) {
                        current = candidate;
                        currentFailure = f;
                        removedAny = true;
                    } else {
                        from = to;
                    }
                }
            }
        }
        return new Shrunk<>(current, currentFailure, steps);
    }

    /** {@link #shrinkBytes} over a string's chars. */
    static Shrunk<String> shrinkString(String input, Property<String> property, Throwable failure) {
        String current = input;
        Throwable currentFailure = failure;
        int steps = 0;
        boolean removedAny = true;
        while (removedAny && steps < MAX_SHRINK_STEPS) {
            removedAny = false;
            for (int run = Math.max(1, current.length() / 2); run >= 1 && steps < MAX_SHRINK_STEPS; run /= 2) {
                int from = 0;
                while (from < current.length() && steps < MAX_SHRINK_STEPS) {
                    int to = Math.min(current.length(), from + run);
                    String candidate = current.substring(0, from) + current.substring(to);
                    steps++;
                    Throwable f = failureOf(property, candidate);
                    if (f != null) {
                        current = candidate;
                        currentFailure = f;
                        removedAny = true;
                    } else {
                        from = to;
                    }
                }
            }
        }
        return new Shrunk<>(current, currentFailure, steps);
    }

    /**
     * Shrinks a record input (how the fuzzers pass a payload with its cuts, pad or bound) one {@code byte[]} or
     * {@code String} component at a time, the others held, rebuilding it with its canonical constructor. A record
     * that cannot be rebuilt is left as it is (zero steps).
     */
    @SuppressWarnings("unchecked")
    static Shrunk<Record> shrinkRecord(Record input, Property<Record> property, Throwable failure) {
        RecordComponent[] components = input.getClass().getRecordComponents();
        Object[] values = new Object[components.length];
        Constructor<?> constructor;
        try {
            Class<?>[] types = new Class<?>[components.length];
            for (int i = 0; i < components.length; i++) {
                types[i] = components[i].getType();
                var accessor = components[i].getAccessor();
                accessor.setAccessible(true); // test records are package-private
                values[i] = accessor.invoke(input);
            }
            constructor = input.getClass().getDeclaredConstructor(types);
            constructor.setAccessible(true);
        } catch (ReflectiveOperationException | RuntimeException e) {
            return new Shrunk<>(input, failure, 0);
        }
        Record current = input;
        Throwable currentFailure = failure;
        int steps = 0;
        for (int i = 0; i < components.length; i++) {
            int index = i;
            Function<Object, Record> rebuilt = replacement -> {
                Object[] args = values.clone();
                args[index] = replacement;
                try {
                    return (Record) constructor.newInstance(args);
                } catch (ReflectiveOperationException e) {
                    throw new IllegalStateException("cannot rebuild " + input.getClass().getSimpleName(), e);
                }
            };
            Shrunk<?> shrunk;
            if (values[i] instanceof byte[] bytes) {
                shrunk = shrinkBytes(bytes, b -> property.check(rebuilt.apply(b)), currentFailure);
            } else if (values[i] instanceof String text) {
                shrunk = shrinkString(text, t -> property.check(rebuilt.apply(t)), currentFailure);
            } else {
                continue;
            }
            values[i] = shrunk.input();
            current = rebuilt.apply(values[i]);
            currentFailure = shrunk.failure();
            steps += shrunk.steps();
        }
        return new Shrunk<>(current, currentFailure, steps);
    }

    /**
     * An input as a failure message shows it: bytes in both corpus notations ({@code hex:} and {@code text:}, ready
     * to paste after {@code name|}), strings Java-escaped, lists and records element by element.
     */
    static String describe(Object value) {
        if (value instanceof byte[] bytes) {
            boolean cut = bytes.length > MAX_SHOWN_ELEMENTS;
            byte[] shown = cut ? Arrays.copyOf(bytes, MAX_SHOWN_ELEMENTS) : bytes;
            String more = cut ? " ... (" + (bytes.length - MAX_SHOWN_ELEMENTS) + " more bytes)" : "";
            return bytes.length + " bytes\n  hex:" + HexFormat.of().formatHex(shown) + more
                + "\n  text:" + corpusText(shown) + more;
        }
        if (value instanceof String text) {
            boolean cut = text.length() > MAX_SHOWN_ELEMENTS;
            return "\"" + javaEscaped(cut ? text.substring(0, MAX_SHOWN_ELEMENTS) : text) + "\""
                + (cut ? " ... (" + (text.length() - MAX_SHOWN_ELEMENTS) + " more chars)" : "");
        }
        if (value instanceof List<?> list) {
            List<String> parts = new ArrayList<>(list.size());
            for (Object element : list) {
                parts.add(describe(element));
            }
            return "[" + String.join(", ", parts) + "]";
        }
        if (value instanceof Record record) {
            List<String> parts = new ArrayList<>();
            for (RecordComponent component : record.getClass().getRecordComponents()) {
                parts.add(component.getName() + "=" + describe(componentValue(record, component)));
            }
            return record.getClass().getSimpleName() + "[" + String.join(", ", parts) + "]";
        }
        return String.valueOf(value);
    }

    private static Object componentValue(Record record, RecordComponent component) {
        try {
            var accessor = component.getAccessor();
            // Test records are package-private; their accessors are public methods of a non-public class.
            accessor.setAccessible(true);
            return accessor.invoke(record);
        } catch (ReflectiveOperationException | RuntimeException e) {
            return "<unreadable: " + e + ">";
        }
    }

    /** {@link FuzzCorpus}'s text notation: printable ASCII as is, every other byte and backslash-x as {@code \xNN}. */
    static String corpusText(byte[] bytes) {
        StringBuilder out = new StringBuilder(bytes.length);
        for (int i = 0; i < bytes.length; i++) {
            int b = bytes[i] & 0xff;
            boolean backslashX = b == '\\' && i + 1 < bytes.length && bytes[i + 1] == 'x';
            if (b >= 0x20 && b < 0x7f && !backslashX) {
                out.append((char) b);
            } else {
                out.append("\\x").append(HexFormat.of().toHexDigits((byte) b));
            }
        }
        return out.toString();
    }

    private static String javaEscaped(String text) {
        StringBuilder out = new StringBuilder(text.length());
        for (char c : text.toCharArray()) {
            switch (c) {
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                default -> {
                    if (c < 0x20 || c > 0x7e) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        return out.toString();
    }
}
