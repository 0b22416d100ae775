package io.kvgate.tools.cli;

import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

import io.kvgate.index.hash.BlockHashSpec;
import io.kvgate.index.hash.BlockHasher;
import io.kvgate.index.hash.HashAlgo;

/**
 * {@code ./kvgate hash}: prints the block keys an engine would publish for a token sequence, one per full block —
 * the tool to compare by hand with what {@code BlockStored} events carry. vLLM keys are unsigned decimal, SGLang
 * keys signed decimal, exactly as they appear in the msgpack events.
 *
 * <p>Exit codes: 0 success, 2 bad usage (the message names the flag and the value). Stateless; each
 * {@link #run} call is independent.
 */
public final class HashCommand {
    /** Bound on the token count read from a flag or file: a prompt larger than any engine's context. */
    static final int MAX_TOKENS = 4_000_000;
    /** Bound on a tokens file: ~11 bytes per token at most. */
    static final long MAX_TOKENS_FILE_BYTES = 64L * 1024 * 1024;

    private static final Set<String> VALUE_FLAGS =
        Set.of("--engine", "--seed", "--block-size", "--tokens", "--tokens-file", "--salt", "--lora");

    private static final String USAGE = """
        usage: kvgate hash --engine vllm|vllm-xxhash|sglang [--seed S] [--block-size B]
                           (--tokens 1,2,3 | --tokens-file FILE|-) [--salt X] [--lora NAME] [--digests]

        Prints one key per full block, one per line, as the engine publishes it in KV events.
          --engine       vllm         vLLM --prefix-caching-hash-algo sha256_cbor (keys unsigned decimal)
                         vllm-xxhash  vLLM --prefix-caching-hash-algo xxhash_cbor (keys unsigned decimal)
                         sglang       SGLang page hash (keys signed decimal)
          --seed         the engine's PYTHONHASHSEED string (required for vllm; accepted and ignored for sglang)
          --block-size   vLLM --block-size / SGLang page size (default: 16 for vllm, 1 for sglang)
          --tokens       token ids separated by commas and/or whitespace
          --tokens-file  file of token ids separated by commas and/or whitespace ('-' reads stdin)
          --salt         the request's cache_salt (vllm: extra key of block 0; sglang: seeds the chain)
          --lora         LoRA adapter name (vllm: extra key of every block; sglang: not part of the hash, ignored)
          --digests      print "key full-digest-hex" per line (the bytes form engines send when
                         VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0)
        """;

    private HashCommand() {}

    public static int run(String[] args) {
        return run(args, System.in, System.out, System.err);
    }

    static int run(String[] args, InputStream stdin, PrintStream out, PrintStream err) {
        try {
            return execute(args, stdin, out);
        } catch (UsageException e) {
            err.println("kvgate hash: " + e.getMessage());
            err.println("run 'kvgate hash --help' for usage");
            return 2;
        }
    }

    private static int execute(String[] args, InputStream stdin, PrintStream out) throws UsageException {
        Map<String, String> flags = new LinkedHashMap<>();
        boolean digests = false;
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            if (arg.equals("--help") || arg.equals("-h")) {
                out.print(USAGE);
                return 0;
            }
            if (arg.equals("--digests")) {
                digests = true;
                continue;
            }
            String name = arg;
            String value;
            int eq = arg.indexOf('=');
            if (arg.startsWith("--") && eq > 0) {
                name = arg.substring(0, eq);
                value = arg.substring(eq + 1);
            } else {
                value = null;
            }
            if (!VALUE_FLAGS.contains(name)) {
                throw new UsageException("unknown option '" + arg + "'");
            }
            if (value == null) {
                if (i + 1 >= args.length) {
                    throw new UsageException(name + " needs a value");
                }
                value = args[++i];
            }
            if (flags.put(name, value) != null) {
                throw new UsageException(name + " given twice");
            }
        }

        String engine = flags.get("--engine");
        if (engine == null) {
            throw new UsageException("--engine is required: vllm, vllm-xxhash or sglang");
        }
        HashAlgo algo = switch (engine) {
            case "vllm" -> HashAlgo.SHA256_CBOR;
            case "vllm-xxhash" -> HashAlgo.XXHASH_CBOR;
            case "sglang" -> HashAlgo.SHA256_SGLANG;
            default -> throw new UsageException("--engine '" + engine + "': must be vllm, vllm-xxhash or sglang");
        };
        int blockSize = algo.isVllm() ? 16 : 1;
        String blockSizeText = flags.get("--block-size");
        if (blockSizeText != null) {
            try {
                blockSize = Integer.parseInt(blockSizeText.trim());
            } catch (NumberFormatException e) {
                throw new UsageException("--block-size '" + blockSizeText + "': must be an integer in [1, "
                    + BlockHashSpec.MAX_BLOCK_SIZE + "]");
            }
        }
        String seed = flags.get("--seed");
        if (algo.isVllm() && seed == null) {
            throw new UsageException("--seed is required for --engine " + engine
                + ": the engine's PYTHONHASHSEED (vLLM hashes it into NONE_HASH, the parent of block 0)");
        }
        String lora = algo.isVllm() ? flags.get("--lora") : null;
        BlockHashSpec spec;
        try {
            spec = new BlockHashSpec(algo, blockSize, algo.isVllm() ? seed : null, lora);
        } catch (IllegalArgumentException e) {
            throw new UsageException(flagFor(e.getMessage()) + ": " + e.getMessage());
        }

        String tokensText = flags.get("--tokens");
        String tokensFile = flags.get("--tokens-file");
        if ((tokensText == null) == (tokensFile == null)) {
            throw new UsageException("exactly one of --tokens or --tokens-file is required");
        }
        int[] tokens = tokensText != null
            ? parseTokens(tokensText, "--tokens")
            : parseTokens(readTokensFile(tokensFile, stdin), "--tokens-file " + tokensFile);

        String salt = flags.get("--salt");
        BlockHasher hasher = new BlockHasher(spec);
        int blocks = tokens.length / blockSize;
        long[] keys = new long[blocks];
        StringBuilder sb = new StringBuilder(blocks * 21);
        if (!digests) {
            int n = hasher.hash(tokens, tokens.length, salt, keys);
            checkSalt(n, salt);
            for (int i = 0; i < n; i++) {
                appendKey(sb, algo, keys[i]).append('\n');
            }
        } else {
            // Block by block, so each block's full digest can be read back from the chain head.
            byte[] head = new byte[algo.digestBytes()];
            HexFormat hex = HexFormat.of();
            for (int b = 0; b < blocks; b++) {
                int n = hasher.hashFrom(tokens, (b + 1) * blockSize, b, head, 0, salt, keys);
                checkSalt(n, salt);
                hasher.copyLastDigest(head, 0);
                appendKey(sb, algo, keys[b]).append(' ').append(hex.formatHex(head)).append('\n');
            }
        }
        out.print(sb);
        out.flush();
        return 0;
    }

    private static void checkSalt(int result, String salt) throws UsageException {
        if (result == BlockHasher.ERR_BAD_CACHE_SALT) {
            throw new UsageException("--salt '" + salt + "': must be at most " + BlockHasher.MAX_CACHE_SALT_CHARS
                + " chars of valid Unicode");
        }
    }

    private static StringBuilder appendKey(StringBuilder sb, HashAlgo algo, long key) {
        return algo.isVllm() ? sb.append(Long.toUnsignedString(key)) : sb.append(key);
    }

    private static String flagFor(String specMessage) {
        if (specMessage.startsWith("blockSize=")) {
            return "--block-size";
        }
        if (specMessage.startsWith("seed=")) {
            return "--seed";
        }
        if (specMessage.startsWith("loraName=")) {
            return "--lora";
        }
        return "--engine";
    }

    private static String readTokensFile(String file, InputStream stdin) throws UsageException {
        try {
            byte[] bytes;
            if (file.equals("-")) {
                bytes = stdin.readNBytes((int) MAX_TOKENS_FILE_BYTES + 1);
            } else {
                Path path = Path.of(file);
                if (Files.size(path) > MAX_TOKENS_FILE_BYTES) {
                    throw new UsageException("--tokens-file '" + file + "': must be at most " + MAX_TOKENS_FILE_BYTES
                        + " bytes");
                }
                bytes = Files.readAllBytes(path);
            }
            if (bytes.length > MAX_TOKENS_FILE_BYTES) {
                throw new UsageException("--tokens-file '" + file + "': must be at most " + MAX_TOKENS_FILE_BYTES
                    + " bytes");
            }
            return new String(bytes, StandardCharsets.UTF_8);
        } catch (IOException | RuntimeException e) {
            throw new UsageException("--tokens-file '" + file + "': cannot be read (" + e + ")");
        }
    }

    /** Token ids separated by commas and/or whitespace; each must be a u32 (what tokenizers produce). */
    static int[] parseTokens(String text, String source) throws UsageException {
        int[] out = new int[16];
        int n = 0;
        int len = text.length();
        int i = 0;
        while (i < len) {
            char c = text.charAt(i);
            if (c == ',' || Character.isWhitespace(c)) {
                i++;
                continue;
            }
            int start = i;
            while (i < len && text.charAt(i) != ',' && !Character.isWhitespace(text.charAt(i))) {
                i++;
            }
            String word = text.substring(start, i);
            long value = -1;
            if (word.length() <= 10 && word.chars().allMatch(ch -> ch >= '0' && ch <= '9')) {
                value = Long.parseLong(word);
            }
            if (value < 0 || value > 0xFFFF_FFFFL) {
                throw new UsageException(source + ": token #" + (n + 1) + " '" + abbreviate(word)
                    + "': must be an integer in [0, 4294967295]");
            }
            if (n == MAX_TOKENS) {
                throw new UsageException(source + ": must hold at most " + MAX_TOKENS + " tokens");
            }
            if (n == out.length) {
                out = Arrays.copyOf(out, n * 2);
            }
            out[n++] = (int) value;
        }
        return Arrays.copyOf(out, n);
    }

    private static String abbreviate(String s) {
        return s.length() <= 40 ? s : s.substring(0, 37) + "...";
    }

    /** Bad command-line input: reported with exit code 2. */
    static final class UsageException extends Exception {
        UsageException(String message) {
            super(message, null, false, false);
        }
    }
}
