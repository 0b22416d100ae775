package io.kvgate.tools.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class HashCommandTest {
    private record Result(int code, String out, String err) {}

    private static Result runWithStdin(String stdin, String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int code = HashCommand.run(args, new ByteArrayInputStream(stdin.getBytes(StandardCharsets.UTF_8)),
            new PrintStream(out, true, StandardCharsets.UTF_8), new PrintStream(err, true, StandardCharsets.UTF_8));
        return new Result(code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    private static Result run(String... args) {
        return runWithStdin("", args);
    }

    private static String range(int from, int to, int step) {
        StringBuilder sb = new StringBuilder();
        for (int t = from; t <= to; t += step) {
            sb.append(sb.isEmpty() ? "" : ",").append(t);
        }
        return sb.toString();
    }

    @Test
    void vllmKeysAreUnsignedDecimalOnePerFullBlock() {
        Result r = run("--engine", "vllm", "--seed", "0", "--block-size", "16", "--tokens", range(101, 3232, 101));
        assertEquals(0, r.code(), r.err());
        assertEquals("7876691182959014722\n8769878286166771163\n", r.out());
        Result xx = run("--engine=vllm-xxhash", "--seed=0", "--block-size=16", "--tokens=" + range(101, 3333, 101));
        assertEquals("11066090714971094433\n8162514883595054550\n", xx.out());
        Result salt = run("--engine", "vllm", "--seed", "0", "--tokens", range(1, 32, 1), "--salt", "salt-1");
        assertEquals("14196867505284063976\n17764566542762686944\n", salt.out());
        Result lora = run("--engine", "vllm", "--seed", "0", "--tokens", range(1, 32, 1), "--lora", "my-lora");
        assertEquals("15444946753610453501\n6571079245177515926\n", lora.out());
    }

    @Test
    void sglangKeysAreSignedAndSeedIsIgnored() {
        assertEquals("7470307888890966271\n-1634645291211865391\n7325169757385981536\n",
            run("--engine", "sglang", "--tokens", "1 2 3").out());
        assertEquals("7470307888890966271\n-1634645291211865391\n7325169757385981536\n",
            run("--engine", "sglang", "--seed", "whatever", "--block-size", "1", "--tokens", "1,2,3").out());
        assertEquals("3451139630862032982\n-5034188771989179167\n",
            run("--engine", "sglang", "--block-size", "16", "--tokens", range(1, 33, 1), "--salt", "tenant-a").out());
    }

    @Test
    void tokensFileAndStdin(@TempDir Path dir) throws Exception {
        Path f = dir.resolve("tokens.txt");
        Files.writeString(f, "1, 2,\n3\t4 5,6,7,8 9\n10 11 12 13 14 15 16\n17");
        Result file = run("--engine", "vllm", "--seed", "0", "--tokens-file", f.toString());
        assertEquals(0, file.code(), file.err());
        assertEquals("3236607068019569386\n", file.out());
        Result stdin = runWithStdin(range(1, 32, 1), "--engine", "vllm", "--seed", "0", "--tokens-file", "-");
        assertEquals("3236607068019569386\n2758186210834249151\n", stdin.out());
        Result missing = run("--engine", "vllm", "--seed", "0", "--tokens-file", dir.resolve("nope").toString());
        assertEquals(2, missing.code());
        assertTrue(missing.err().contains("--tokens-file") && missing.err().contains("nope"), missing.err());
    }

    @Test
    void digestsModePrintsKeyAndFullDigest() {
        Result r = run("--engine", "vllm", "--seed", "0", "--tokens", range(101, 3232, 101), "--digests");
        assertEquals("7876691182959014722 d450abdaf2c9ebdd0e0cbfbc4e24a5c07ff71dcab37be7426d4fa0e5fdb93342\n"
            + "8769878286166771163 0d95d2dc02f528b32afbd33ebffedd911ed1978087b0a01679b4ddd62261c5db\n", r.out());
        Result xx = run("--engine", "vllm-xxhash", "--seed", "0", "--tokens", range(101, 1616, 101), "--digests");
        assertEquals("11066090714971094433 363a30eaa81cfc9f9992a6dfe619bda1\n", xx.out());
    }

    @Test
    void partialBlocksPrintNothingAndTokensUpToU32Max() {
        assertEquals("", run("--engine", "vllm", "--seed", "0", "--tokens", "1,2,3").out());
        assertEquals(0, run("--engine", "vllm", "--seed", "0", "--tokens", "").code());
        Result max = run("--engine", "sglang", "--tokens", "4294967295");
        assertEquals(0, max.code(), max.err());
        assertEquals(1, max.out().lines().count());
    }

    @Test
    void badInputNamesFlagAndValueWithExit2() {
        assertBad("--engine 'trt'", "--engine", "trt", "--tokens", "1");
        assertBad("--engine is required", "--tokens", "1");
        assertBad("--seed is required", "--engine", "vllm", "--tokens", "1");
        assertBad("--seed: seed='O'", "--engine", "vllm", "--seed", "O", "--tokens", "1");
        assertBad("--block-size 'x'", "--engine", "vllm", "--seed", "0", "--block-size", "x", "--tokens", "1");
        assertBad("--block-size: blockSize=0", "--engine", "vllm", "--seed", "0", "--block-size", "0", "--tokens", "1");
        assertBad("--tokens: token #3 '-4'", "--engine", "vllm", "--seed", "0", "--tokens", "1,2,-4");
        assertBad("--tokens: token #1 '4294967296'", "--engine", "sglang", "--tokens", "4294967296");
        assertBad("--tokens: token #2 'abc'", "--engine", "sglang", "--tokens", "1 abc");
        assertBad("exactly one of --tokens or --tokens-file", "--engine", "sglang");
        assertBad("unknown option '--bogus'", "--engine", "sglang", "--bogus", "1");
        assertBad("--tokens needs a value", "--engine", "sglang", "--tokens");
        assertBad("--engine given twice", "--engine", "sglang", "--engine", "vllm", "--tokens", "1");
        assertBad("--lora: loraName=''", "--engine", "vllm", "--seed", "0", "--lora", "", "--tokens", "1");
    }

    private static void assertBad(String expected, String... args) {
        Result r = run(args);
        assertEquals(2, r.code(), String.join(" ", args));
        assertTrue(r.err().contains(expected), "expected '" + expected + "' in: " + r.err());
        assertEquals("", r.out());
    }

    @Test
    void help() {
        Result r = run("--help");
        assertEquals(0, r.code());
        assertTrue(r.out().startsWith("usage: kvgate hash"), r.out());
        assertTrue(r.out().contains("--tokens-file"));
    }
}
