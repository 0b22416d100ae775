package io.kvgate.testkit.fuzz;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

/**
 * A fuzzer's checked-in corpus (under {@code src/test/resources/fuzz/}): the inputs every default test run replays,
 * the seeds the mutators start from, and each fuzz finding once it is fixed.
 *
 * <p>Format, one input per line: {@code name|hex:0a1b...} or {@code name|text:...}, where text is UTF-8 taken as it
 * is except {@code \xNN}, any byte (so JSON's own escapes need none; a literal backslash-x is {@code \x5cx});
 * blank lines and lines starting with {@code #} are comments.
 */
public final class FuzzCorpus {
    private FuzzCorpus() {
    }

    /** One named input. */
    public record Entry(String name, byte[] bytes) {
        @Override
        public String toString() {
            return name;
        }
    }

    /** Loads the corpus resource {@code resource} (an absolute class-path name, e.g. {@code /fuzz/x.corpus}). */
    public static List<Entry> load(String resource) {
        String text;
        try (InputStream in = FuzzCorpus.class.getResourceAsStream(resource)) {
            if (in == null) {
                throw new IllegalArgumentException("no corpus resource " + resource);
            }
            text = new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        List<Entry> entries = new ArrayList<>();
        int lineNo = 0;
        for (String line : text.split("\n", -1)) {
            lineNo++;
            if (line.isBlank() || line.startsWith("#")) {
                continue;
            }
            int bar = line.indexOf('|');
            if (bar < 1) {
                throw new IllegalArgumentException(resource + ":" + lineNo + ": expected name|hex:... or name|text:...");
            }
            String name = line.substring(0, bar);
            String value = line.substring(bar + 1);
            byte[] bytes;
            if (value.startsWith("hex:")) {
                bytes = HexFormat.of().parseHex(value.substring(4).strip());
            } else if (value.startsWith("text:")) {
                bytes = unescape(value.substring(5), resource + ":" + lineNo);
            } else {
                throw new IllegalArgumentException(resource + ":" + lineNo + ": value must start with hex: or text:");
            }
            entries.add(new Entry(name, bytes));
        }
        if (entries.isEmpty()) {
            throw new IllegalArgumentException("corpus " + resource + " is empty");
        }
        return List.copyOf(entries);
    }

    /** The inputs alone (mutator seeds). */
    public static List<byte[]> bytes(List<Entry> entries) {
        return entries.stream().map(Entry::bytes).toList();
    }

    /** Dictionary tokens given as Java strings (UTF-8). */
    public static List<byte[]> tokens(String... tokens) {
        List<byte[]> out = new ArrayList<>(tokens.length);
        for (String t : tokens) {
            out.add(t.getBytes(StandardCharsets.UTF_8));
        }
        return List.copyOf(out);
    }

    private static byte[] unescape(String s, String where) {
        byte[] utf8 = s.getBytes(StandardCharsets.UTF_8);
        ByteArrayOutputStream out = new ByteArrayOutputStream(utf8.length);
        for (int i = 0; i < utf8.length; i++) {
            if (utf8[i] == '\\' && i + 1 < utf8.length && utf8[i + 1] == 'x') {
                if (i + 3 >= utf8.length) {
                    throw new IllegalArgumentException(where + ": \\x needs two hex digits");
                }
                out.write(HexFormat.fromHexDigits(new String(utf8, i + 2, 2, StandardCharsets.US_ASCII)));
                i += 3;
            } else {
                out.write(utf8[i]);
            }
        }
        return out.toByteArray();
    }
}
