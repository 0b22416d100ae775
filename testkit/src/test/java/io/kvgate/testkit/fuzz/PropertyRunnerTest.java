package io.kvgate.testkit.fuzz;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.parallel.ResourceLock;
import org.junit.jupiter.api.parallel.Resources;

class PropertyRunnerTest {
    /** Random bytes with one 0x42 planted among them (and no other), 64 to 512 bytes long. */
    static final PropertyRunner.Generator<byte[]> BYTES_WITH_ONE_0X42 = random -> {
        byte[] bytes = new byte[64 + random.nextInt(449)];
        for (int i = 0; i < bytes.length; i++) {
            do {
                bytes[i] = (byte) random.nextInt(256);
            } while (bytes[i] == 0x42);
        }
        bytes[random.nextInt(bytes.length)] = 0x42;
        return bytes;
    };

    static void hasNo0x42(byte[] input) {
        for (byte b : input) {
            if (b == 0x42) {
                throw new AssertionError("found 0x42");
            }
        }
    }

    @Test
    void aFailingByteInputShrinksToTheOneByteThatMatters() {
        AssertionError e = assertThrows(AssertionError.class,
            () -> PropertyRunner.check("no 0x42", 7, 10, BYTES_WITH_ONE_0X42, PropertyRunnerTest::hasNo0x42));
        assertTrue(e.getMessage().contains("property no 0x42 failed at try 1 of 10, seed 7"), e.getMessage());
        assertTrue(e.getMessage().contains("1 bytes\n  hex:42\n  text:B\n"), e.getMessage());
        assertEquals("found 0x42", e.getCause().getMessage());
    }

    /** How the fuzzers pass a payload with its other parameters. */
    record Padded(byte[] payload, int pad, String label) {
    }

    @Test
    void aRecordInputShrinksItsBytesAndStringsAndKeepsTheRest() {
        AssertionError e = assertThrows(AssertionError.class, () -> PropertyRunner.check("padded", 11, 10,
            random -> new Padded(BYTES_WITH_ONE_0X42.next(random), 7, "label " + random.nextInt(1000) + " X end"),
            p -> {
                if (p.label().contains("X")) {
                    hasNo0x42(p.payload());
                }
            }));
        assertTrue(e.getMessage().contains("input (byte[] and String components shrunk in "), e.getMessage());
        assertTrue(e.getMessage().contains(": Padded[payload=1 bytes\n  hex:42\n  text:B, pad=7, label=\"X\"]\n"),
            e.getMessage());
    }

    @Test
    void shrinkingKeepsOnlyWhatTheFailureNeeds() {
        byte[] input = HexFormat.of().parseHex("0001420203420405");
        PropertyRunner.Shrunk<byte[]> shrunk = PropertyRunner.shrinkBytes(input, b -> {
            int count = 0;
            for (byte x : b) {
                count += x == 0x42 ? 1 : 0;
            }
            if (count >= 2) {
                throw new AssertionError("two 0x42");
            }
        }, new AssertionError("original"));
        assertArrayEquals(new byte[] {0x42, 0x42}, shrunk.input());
        assertEquals("two 0x42", shrunk.failure().getMessage());
    }

    @Test
    void aFailingStringShrinksToTheCharsThatMatter() {
        AssertionError e = assertThrows(AssertionError.class, () -> PropertyRunner.check("no tab", 3, 50,
            random -> "prefix " + random.nextInt(1000) + "\t suffix " + random.nextLong(),
            s -> assertTrue(s.indexOf('\t') < 0, "tab")));
        assertTrue(e.getMessage().contains("input (shrunk from "), e.getMessage());
        assertTrue(e.getMessage().contains(": \"\\t\"\n"), e.getMessage());
    }

    @Test
    void shrinkingStopsAfterItsStepBound() {
        AtomicInteger evaluations = new AtomicInteger();
        // Fails on everything, but each evaluation is counted: the shrink must give up at the bound, not at the end.
        PropertyRunner.Shrunk<byte[]> shrunk = PropertyRunner.shrinkBytes(new byte[1 << 20], b -> {
            evaluations.incrementAndGet();
            if (b.length % 2 == 0) {
                throw new AssertionError("even");
            }
        }, new AssertionError("original"));
        assertTrue(shrunk.steps() <= PropertyRunner.MAX_SHRINK_STEPS, "steps " + shrunk.steps());
        assertEquals(shrunk.steps(), evaluations.get());
        assertEquals(0, shrunk.input().length % 2);
    }

    @Test
    void theSameSeedDrawsTheSameInputsAndAnotherSeedOthers() {
        List<Long> first = drawn(4301, 50);
        assertEquals(first, drawn(4301, 50));
        assertNotEquals(first, drawn(4302, 50));
    }

    @Test
    void theTriesCountIsHonoured() {
        AtomicInteger generated = new AtomicInteger();
        AtomicInteger checked = new AtomicInteger();
        PropertyRunner.check("counting", 1, 321, random -> generated.incrementAndGet(), input -> checked.incrementAndGet());
        assertEquals(321, generated.get());
        assertEquals(321, checked.get());
    }

    @Test
    void theFailingTryIsNamedAndNothingAfterItRuns() {
        AtomicInteger checked = new AtomicInteger();
        AssertionError e = assertThrows(AssertionError.class, () -> PropertyRunner.check("fails at 17", 1, 100,
            random -> random.nextInt(), input -> {
                if (checked.incrementAndGet() == 17) {
                    throw new IllegalStateException("boom");
                }
            }));
        assertEquals(17, checked.get());
        assertTrue(e.getMessage().startsWith("property fails at 17 failed at try 17 of 100, seed 1\n"), e.getMessage());
        assertTrue(e.getCause() instanceof IllegalStateException);
    }

    @Test
    @ResourceLock(Resources.SYSTEM_PROPERTIES) // the unit tier runs classes in parallel: fuzz.seed is the JVM's
    void aFuzzSeedGivenOnTheCommandLineIsUsed() {
        String before = System.getProperty("fuzz.seed");
        System.setProperty("fuzz.seed", "4301");
        try {
            assertEquals(4301L, PropertyRunner.fuzzSeed());
            List<Long> viaFuzz = new ArrayList<>();
            PropertyRunner.fuzz("seeded", 50, random -> random.nextLong(), viaFuzz::add);
            assertEquals(drawn(4301, 50), viaFuzz);
        } finally {
            if (before == null) {
                System.clearProperty("fuzz.seed");
            } else {
                System.setProperty("fuzz.seed", before);
            }
        }
    }

    @Test
    void recordsAndBytesAreShownInCorpusNotation() {
        record Split(byte[] body, List<Integer> cuts) {
        }
        String shown = PropertyRunner.describe(new Split("a\\x\n".getBytes(), List.of(3, 9)));
        assertEquals("Split[body=4 bytes\n  hex:615c780a\n  text:a\\x5cx\\x0a, cuts=[3, 9]]", shown);
    }

    private static List<Long> drawn(long seed, int tries) {
        List<Long> values = new ArrayList<>();
        PropertyRunner.check("drawing", seed, tries, random -> random.nextLong(), values::add);
        return values;
    }
}
