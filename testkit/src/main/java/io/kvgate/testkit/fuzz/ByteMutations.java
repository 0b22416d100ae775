package io.kvgate.testkit.fuzz;

import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.random.RandomGenerator;

/**
 * Input generators for the wire-decoder fuzzers (issue #43): mutants of valid seeds, token soups over a format's
 * dictionary, and splits of a stream into chunks.
 *
 * <p>A mutant is a seed plus a short list of byte-level {@link Edit}s drawn from a {@link RandomGenerator} (the
 * {@link PropertyRunner}'s seeded source, so a seed names every mutant of a run). Positions are fractions of the
 * current length ({@code where / 65536}), so an edit list applies to any seed; a fraction is now and then exactly the
 * start or the end, where framing bugs live. Every result is capped at {@code maxLength}: the fuzzers bound the
 * input, the decoders must bound everything else.
 */
public final class ByteMutations {
    private static final int FRACTION = 1 << 16;

    private ByteMutations() {
    }

    /** What an edit does at its position. */
    public enum Kind {
        /** Flip bit {@code amount % 8} of one byte. */
        FLIP_BIT,
        /** Set one byte to {@code amount}. */
        SET_BYTE,
        /** Overwrite bytes with dictionary token {@code pick}. */
        OVERWRITE_TOKEN,
        /** Insert dictionary token {@code pick}. */
        INSERT_TOKEN,
        /** Delete {@code amount} bytes. */
        DELETE,
        /** Repeat the next {@code amount} bytes right after themselves. */
        DUPLICATE,
        /** Cut everything from the position on. */
        TRUNCATE,
        /** Keep the prefix, continue with the suffix of seed {@code pick} from fraction {@code amount / 256}. */
        SPLICE
    }

    /** One edit; see {@link Kind} for what {@code amount} and {@code pick} mean. */
    public record Edit(Kind kind, int where, int amount, int pick) {
    }

    /** A mutant of one of {@code seeds}: the seed and up to {@code maxEdits} edits, at most {@code maxLength} bytes. */
    public static byte[] mutant(RandomGenerator random, List<byte[]> seeds, List<byte[]> dictionary, int maxEdits,
        int maxLength) {
        if (seeds.isEmpty()) {
            throw new IllegalArgumentException("mutants need at least one seed");
        }
        List<byte[]> tokens = dictionary.isEmpty() ? List.of(new byte[] {0}) : dictionary;
        int picks = Math.max(seeds.size(), tokens.size());
        Kind[] kinds = Kind.values();
        int editCount = random.nextInt(maxEdits + 1);
        List<Edit> edits = new ArrayList<>(editCount);
        for (int i = 0; i < editCount; i++) {
            edits.add(new Edit(kinds[random.nextInt(kinds.length)], fraction(random), random.nextInt(256),
                random.nextInt(picks)));
        }
        return apply(seeds.get(random.nextInt(seeds.size())), edits, seeds, tokens, maxLength);
    }

    /** A concatenation of up to {@code maxTokens} dictionary tokens: grammar-shaped noise for text formats. */
    public static byte[] tokenSoup(RandomGenerator random, List<byte[]> dictionary, int maxTokens) {
        int count = random.nextInt(maxTokens + 1);
        List<byte[]> parts = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            parts.add(dictionary.get(random.nextInt(dictionary.size())));
        }
        return concat(parts);
    }

    /** Up to {@code maxLength} uniformly random bytes: the noise no seed or dictionary would suggest. */
    public static byte[] randomBytes(RandomGenerator random, int maxLength) {
        byte[] bytes = new byte[random.nextInt(maxLength + 1)];
        random.nextBytes(bytes);
        return bytes;
    }

    /** Applies {@code edits} to a copy of {@code seed} (the seed itself is never changed). */
    public static byte[] apply(byte[] seed, List<Edit> edits, List<byte[]> seeds, List<byte[]> tokens, int maxLength) {
        byte[] b = Arrays.copyOf(seed, Math.min(seed.length, maxLength));
        for (Edit e : edits) {
            int at = at(e.where(), b.length);
            b = switch (e.kind()) {
                case FLIP_BIT -> {
                    if (b.length > 0) {
                        b[Math.min(at, b.length - 1)] ^= (byte) (1 << (e.amount() & 7));
                    }
                    yield b;
                }
                case SET_BYTE -> {
                    if (b.length > 0) {
                        b[Math.min(at, b.length - 1)] = (byte) e.amount();
                    }
                    yield b;
                }
                case OVERWRITE_TOKEN -> {
                    byte[] t = tokens.get(e.pick() % tokens.size());
                    byte[] out = b.length >= at + t.length ? b : Arrays.copyOf(b, at + t.length);
                    System.arraycopy(t, 0, out, at, t.length);
                    yield out;
                }
                case INSERT_TOKEN -> splice(b, at, at, tokens.get(e.pick() % tokens.size()));
                case DELETE -> splice(b, at, Math.min(b.length, at + 1 + e.amount()), new byte[0]);
                case DUPLICATE -> splice(b, at, at, Arrays.copyOfRange(b, at, Math.min(b.length, at + 1 + e.amount())));
                case TRUNCATE -> Arrays.copyOf(b, at);
                case SPLICE -> {
                    byte[] other = seeds.get(e.pick() % seeds.size());
                    int from = (int) ((long) e.amount() * other.length / 256);
                    yield splice(b, at, b.length, Arrays.copyOfRange(other, from, other.length));
                }
            };
            if (b.length > maxLength) {
                b = Arrays.copyOf(b, maxLength);
            }
        }
        return b;
    }

    /**
     * Splits {@code data} into chunks at the given cut fractions ({@code 0..65535}, sorted and deduplicated here),
     * for fragmentation sweeps: a framer must give the same result however its input arrives.
     */
    public static List<byte[]> split(byte[] data, List<Integer> cutFractions) {
        int[] cuts = cutFractions.stream().mapToInt(c -> at(c, data.length)).sorted().distinct().toArray();
        List<byte[]> chunks = new ArrayList<>(cuts.length + 1);
        int from = 0;
        for (int cut : cuts) {
            if (cut > from) {
                chunks.add(Arrays.copyOfRange(data, from, cut));
                from = cut;
            }
        }
        chunks.add(Arrays.copyOfRange(data, from, data.length));
        return chunks;
    }

    /** Cut fractions for {@link #split}: up to {@code maxCuts} of them. */
    public static List<Integer> cuts(RandomGenerator random, int maxCuts) {
        int count = random.nextInt(maxCuts + 1);
        List<Integer> cuts = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            cuts.add(fraction(random));
        }
        return cuts;
    }

    /** A position fraction; one in sixteen is the very start or end, which a uniform draw would almost never hit. */
    private static int fraction(RandomGenerator random) {
        if (random.nextInt(16) == 0) {
            return random.nextBoolean() ? 0 : FRACTION - 1;
        }
        return random.nextInt(FRACTION);
    }

    public static byte[] concat(List<byte[]> parts) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (byte[] p : parts) {
            out.writeBytes(p);
        }
        return out.toByteArray();
    }

    private static int at(int fraction, int length) {
        return (int) ((long) Math.floorMod(fraction, FRACTION) * (length + 1) / FRACTION);
    }

    private static byte[] splice(byte[] b, int from, int to, byte[] insert) {
        byte[] out = new byte[b.length - (to - from) + insert.length];
        System.arraycopy(b, 0, out, 0, from);
        System.arraycopy(insert, 0, out, from, insert.length);
        System.arraycopy(b, to, out, from + insert.length, b.length - to);
        return out;
    }
}
