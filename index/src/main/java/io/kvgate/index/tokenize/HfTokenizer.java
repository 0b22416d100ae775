package io.kvgate.index.tokenize;

import java.io.BufferedInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.text.Normalizer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.IntConsumer;
import java.util.zip.GZIPInputStream;

/**
 * A pure-Java HuggingFace tokenizer for byte-level BPE models (Qwen2/2.5/3, Llama 3.x and other GPT-2 style
 * {@code tokenizer.json} files) whose token ids equal the Rust {@code tokenizers} library that vLLM and SGLang run.
 *
 * <p>Pipeline, in HF order: added/special tokens are cut out of the raw text first (leftmost-longest; their text
 * becomes the single added id); each remaining segment is normalized (NFC for Qwen), split into pre-tokens by the
 * pattern of the {@code Split} pre-tokenizer, mapped to UTF-8 bytes (the byte-level alphabet is only a spelling of
 * bytes) and tokenized by BPE merge rank; the post-processor's template (Llama's {@code <|begin_of_text|>}) is
 * added when {@code addSpecialTokens} is true.
 *
 * <p>Two bounded caches make repeated text cheap: pre-token -> ids (most words recur) and segment -> ids, where a
 * segment is the text between two added tokens (a system prompt, an earlier chat turn), so a growing multi-turn
 * conversation costs about its new turn only. Both are lossy fixed-size arrays with an exact key compare, sized by
 * {@link Caches}.
 *
 * <p>Threading: immutable and thread-safe after {@link #load}; many threads may call {@link #encode} at once. Each
 * thread keeps its own scratch buffers (a {@link ThreadLocal}), and the caches are lock-free (see
 * {@link LossyIdCache}). With warm caches {@link #encodeInto} allocates nothing; {@link #encode} allocates only
 * the returned array.
 *
 * <p>Known limits: unpaired UTF-16 surrogates (impossible in a Rust string) are encoded as U+FFFD; Unicode
 * classes and normalization follow the JDK's Unicode version; added tokens with {@code normalized=true} are
 * rejected when the tokenizer has a normalizer (none of the supported models has both).
 */
public final class HfTokenizer {
    /**
     * Cache sizing. {@code chunkSlots}/{@code segmentSlots} must be 0 (off) or a power of two. Worst-case heap is
     * about {@code slots * maxChars * 3} bytes per cache (chars plus ids).
     */
    public record Caches(int chunkSlots, int chunkMaxChars, int segmentSlots, int segmentMinChars,
                         int segmentMaxChars) {
        /** 64 Ki pre-tokens of up to 32 chars (about 8 MiB worst case) and 1 Ki segments of 64..16384 chars. */
        public static final Caches DEFAULT = new Caches(1 << 16, 32, 1 << 10, 64, 16384);
        public static final Caches NONE = new Caches(0, 0, 0, 0, 0);

        public Caches {
            check("chunkSlots", chunkSlots);
            check("segmentSlots", segmentSlots);
            if (chunkMaxChars < 0 || segmentMinChars < 0 || segmentMaxChars < segmentMinChars) {
                throw new IllegalArgumentException("caches: chunkMaxChars=" + chunkMaxChars + ", segmentMinChars="
                        + segmentMinChars + ", segmentMaxChars=" + segmentMaxChars
                        + " must be >= 0 with segmentMaxChars >= segmentMinChars");
            }
        }

        private static void check(String name, int slots) {
            if (slots < 0 || (slots != 0 && Integer.bitCount(slots) != 1) || slots > (1 << 24)) {
                throw new IllegalArgumentException("caches: " + name + "=" + slots
                        + " must be 0 or a power of two <= 16777216");
            }
        }
    }

    /** Scratch buffers above this size are dropped after the call so one huge prompt does not pin memory. */
    private static final int SCRATCH_RETAIN_LIMIT = 1 << 20;
    private static final ThreadLocal<Ctx> SCRATCH = ThreadLocal.withInitial(Ctx::new);

    private final BpeModel model;
    private final AddedTokenMatcher added;
    private final UnicodeNormalizer normalizer;
    private final PreTokenSplitter splitter;
    private final int[] prefixIds;
    private final int[] suffixIds;
    private final LossyIdCache chunkCache;
    private final LossyIdCache segmentCache;
    private final byte[][] addedBytes;
    private final boolean[] addedSpecial;
    private final Map<String, Integer> addedIds;
    private final int vocabSize;
    /**
     * The most UTF-8 bytes of raw text one id stands for: the longest model token or added token's text; 0 when
     * an added token strips white space around it ({@code lstrip}/{@code rstrip}: one id then covers a run of any
     * length, so the length of a whole text proves nothing). See {@link #minTokens}.
     */
    private final int maxBytesPerId;
    private final TokenizerConfig config;
    /** The model's processor templates ({@link ChatTemplates#processor}), or null; set by {@link #load} before publication. */
    private ChatTemplates processorTemplates;

    private HfTokenizer(BpeModel model, AddedTokenMatcher added, UnicodeNormalizer normalizer,
                        PreTokenSplitter splitter, int[] prefixIds, int[] suffixIds, Caches caches,
                        Map<String, Object> rawConfig) throws IOException {
        this.model = model;
        this.added = added;
        this.normalizer = normalizer;
        this.splitter = splitter;
        this.prefixIds = prefixIds;
        this.suffixIds = suffixIds;
        this.chunkCache = new LossyIdCache(caches.chunkSlots(), 1, caches.chunkMaxChars());
        this.segmentCache = new LossyIdCache(caches.segmentSlots(), caches.segmentMinChars(), caches.segmentMaxChars());
        int maxId = model.modelVocabSize() - 1;
        for (int i = 0; i < added.size(); i++) {
            maxId = Math.max(maxId, added.token(i).id());
        }
        this.vocabSize = maxId + 1;
        int longest = model.maxTokenBytes();
        boolean strips = false;
        for (int i = 0; i < added.size(); i++) {
            AddedTokenMatcher.Token t = added.token(i);
            longest = Math.max(longest, t.content().getBytes(StandardCharsets.UTF_8).length);
            strips |= t.lstrip() || t.rstrip();
        }
        this.maxBytesPerId = strips ? 0 : longest;
        this.addedBytes = new byte[vocabSize][];
        this.addedSpecial = new boolean[vocabSize];
        this.addedIds = new HashMap<>();
        for (int i = 0; i < added.size(); i++) {
            AddedTokenMatcher.Token t = added.token(i);
            addedBytes[t.id()] = t.content().getBytes(StandardCharsets.UTF_8);
            addedSpecial[t.id()] = t.special();
            addedIds.putIfAbsent(t.content(), t.id());
        }
        String bos = null;
        Object b = rawConfig.get("bos_token");
        if (b instanceof String s) {
            bos = s;
        } else if (b instanceof Map<?, ?> m && m.get("content") instanceof String s) {
            bos = s;
        }
        int bosId = bos == null ? -1 : tokenId(bos);
        boolean addBos = bosId >= 0 && prefixIds.length > 0 && prefixIds[0] == bosId;
        this.config = TokenizerConfig.from(rawConfig, addBos);
    }

    /** Loads {@code tokenizer.json} (or {@code tokenizer.json.gz}) and {@code tokenizer_config.json} with default caches. */
    public static HfTokenizer load(Path modelDir) throws IOException {
        return load(modelDir, Caches.DEFAULT);
    }

    /** As {@link #load(Path)} with explicit cache sizing ({@link Caches#NONE} for none). */
    public static HfTokenizer load(Path modelDir, Caches caches) throws IOException {
        Path json = modelDir.resolve("tokenizer.json");
        Path gz = modelDir.resolve("tokenizer.json.gz");
        Object tree;
        if (Files.isRegularFile(json)) {
            try (InputStream in = new BufferedInputStream(Files.newInputStream(json), 1 << 16)) {
                tree = JsonTree.parse(in);
            }
        } else if (Files.isRegularFile(gz)) {
            try (InputStream in = new GZIPInputStream(Files.newInputStream(gz), 1 << 16)) {
                tree = JsonTree.parse(in);
            }
        } else {
            throw new IOException("no tokenizer.json or tokenizer.json.gz in " + modelDir);
        }
        Map<String, Object> rawConfig = new LinkedHashMap<>();
        Path cfg = modelDir.resolve("tokenizer_config.json");
        if (Files.isRegularFile(cfg)) {
            try (InputStream in = new BufferedInputStream(Files.newInputStream(cfg))) {
                rawConfig = JsonTree.object(JsonTree.parse(in), cfg.toString());
            }
        }
        templateFiles(modelDir, rawConfig);
        try {
            HfTokenizer t = build(JsonTree.object(tree, "tokenizer.json"), caches, rawConfig);
            t.processorTemplates = ChatTemplates.processor(modelDir);
            return t;
        } catch (IOException | RuntimeException e) {
            throw new IOException(modelDir + ": " + e.getMessage(), e);
        }
    }

    /**
     * The newer HF layout keeps templates beside the config: {@code chat_template.jinja} (the default) and
     * {@code additional_chat_templates/NAME.jinja} (named ones). transformers ({@code _from_pretrained} in
     * tokenization_utils_base.py) gives these files priority over the config's {@code chat_template}: one default
     * file becomes the template, several become the named list — and the engines render with what it loaded.
     */
    private static void templateFiles(Path modelDir, Map<String, Object> rawConfig) throws IOException {
        Map<String, String> named = ChatTemplates.additional(modelDir);
        Path dflt = modelDir.resolve("chat_template.jinja");
        String defaultTemplate = Files.isRegularFile(dflt) ? Files.readString(dflt) : null;
        if (defaultTemplate == null && named.isEmpty()) {
            return;
        }
        if (named.isEmpty()) {
            rawConfig.put("chat_template", defaultTemplate);
            return;
        }
        java.util.List<Object> list = new java.util.ArrayList<>();
        if (defaultTemplate != null) {
            list.add(Map.of("name", "default", "template", defaultTemplate));
        }
        named.forEach((name, t) -> list.add(Map.of("name", name, "template", t)));
        rawConfig.put("chat_template", list);
    }

    private static HfTokenizer build(Map<String, Object> root, Caches caches, Map<String, Object> rawConfig)
            throws IOException {
        Map<String, Object> m = JsonTree.object(root.get("model"), "model");
        Object type = m.get("type");
        if (type != null && !"BPE".equals(type)) {
            throw new IOException("model.type=" + type + " is not supported (only byte-level BPE)");
        }
        if (m.get("dropout") != null || JsonTree.bool(m.get("byte_fallback"), false)
                || !isEmptyString(m.get("continuing_subword_prefix")) || !isEmptyString(m.get("end_of_word_suffix"))) {
            throw new IOException("model: dropout, byte_fallback, continuing_subword_prefix and end_of_word_suffix "
                    + "are not supported (found " + m.get("dropout") + ", " + m.get("byte_fallback") + ", "
                    + m.get("continuing_subword_prefix") + ", " + m.get("end_of_word_suffix") + ")");
        }
        Map<String, Object> vocab = JsonTree.object(m.get("vocab"), "model.vocab");
        Map<String, Integer> vocabIds = new HashMap<>(vocab.size() * 2);
        int maxId = -1;
        for (Map.Entry<String, Object> e : vocab.entrySet()) {
            int id = ((Number) e.getValue()).intValue();
            vocabIds.put(e.getKey(), id);
            maxId = Math.max(maxId, id);
        }
        byte[][] idToBytes = new byte[maxId + 1][];
        for (Map.Entry<String, Integer> e : vocabIds.entrySet()) {
            byte[] bytes = ByteLevel.toBytes(e.getKey());
            if (bytes == null) {
                throw new IOException("model.vocab: token " + JsonTree.describe(e.getKey())
                        + " is not in the byte-level alphabet");
            }
            idToBytes[e.getValue()] = bytes;
        }
        List<Object> merges = JsonTree.array(m.get("merges"), "model.merges");
        int[] left = new int[merges.size()];
        int[] right = new int[merges.size()];
        int[] result = new int[merges.size()];
        for (int r = 0; r < merges.size(); r++) {
            Object mg = merges.get(r);
            String a;
            String c;
            if (mg instanceof String s) {
                int sp = s.indexOf(' ', 1);
                if (sp < 0) {
                    throw new IOException("model.merges[" + r + "]=" + JsonTree.describe(s) + " has no space");
                }
                a = s.substring(0, sp);
                c = s.substring(sp + 1);
            } else {
                List<Object> pair = JsonTree.array(mg, "model.merges[" + r + "]");
                a = JsonTree.string(pair.get(0), "model.merges[" + r + "][0]");
                c = JsonTree.string(pair.get(1), "model.merges[" + r + "][1]");
            }
            Integer ia = vocabIds.get(a);
            Integer ic = vocabIds.get(c);
            Integer ir = vocabIds.get(a + c);
            if (ia == null || ic == null || ir == null) {
                throw new IOException("model.merges[" + r + "]=" + JsonTree.describe(a + " " + c)
                        + ": a part or the merged token is missing from model.vocab");
            }
            left[r] = ia;
            right[r] = ic;
            result[r] = ir;
        }
        BpeModel model = new BpeModel(idToBytes, left, right, result, JsonTree.bool(m.get("ignore_merges"), false));

        UnicodeNormalizer normalizer = normalizer(root.get("normalizer"));
        List<AddedTokenMatcher.Token> tokens = new ArrayList<>();
        Object at = root.get("added_tokens");
        if (at != null) {
            for (Object o : JsonTree.array(at, "added_tokens")) {
                Map<String, Object> t = JsonTree.object(o, "added_tokens[]");
                String content = JsonTree.string(t.get("content"), "added_tokens[].content");
                int id = ((Number) t.get("id")).intValue();
                boolean normalized = JsonTree.bool(t.get("normalized"), true);
                if (normalized && normalizer != null) {
                    throw new IOException("added_tokens: " + JsonTree.describe(content) + " has normalized=true "
                            + "and the tokenizer has a normalizer; matching on normalized text is not supported");
                }
                tokens.add(new AddedTokenMatcher.Token(id, content, JsonTree.bool(t.get("single_word"), false),
                        JsonTree.bool(t.get("lstrip"), false), JsonTree.bool(t.get("rstrip"), false),
                        JsonTree.bool(t.get("special"), false)));
            }
        }
        PreTokenSplitter splitter = preTokenizer(root.get("pre_tokenizer"));
        List<Integer> prefix = new ArrayList<>();
        List<Integer> suffix = new ArrayList<>();
        postProcessor(root.get("post_processor"), prefix, suffix);
        checkDecoder(root.get("decoder"));
        return new HfTokenizer(model, new AddedTokenMatcher(tokens), normalizer, splitter,
                prefix.stream().mapToInt(Integer::intValue).toArray(),
                suffix.stream().mapToInt(Integer::intValue).toArray(), caches, rawConfig);
    }

    private static boolean isEmptyString(Object o) {
        return o == null || "".equals(o);
    }

    private static UnicodeNormalizer normalizer(Object node) throws IOException {
        if (node == null) {
            return null;
        }
        List<Normalizer.Form> forms = new ArrayList<>();
        collectForms(JsonTree.object(node, "normalizer"), forms);
        return forms.isEmpty() ? null : UnicodeNormalizer.of(forms);
    }

    private static void collectForms(Map<String, Object> n, List<Normalizer.Form> forms) throws IOException {
        Object type = n.get("type");
        switch (String.valueOf(type)) {
            case "NFC" -> forms.add(Normalizer.Form.NFC);
            case "NFD" -> forms.add(Normalizer.Form.NFD);
            case "NFKC" -> forms.add(Normalizer.Form.NFKC);
            case "NFKD" -> forms.add(Normalizer.Form.NFKD);
            case "Sequence" -> {
                for (Object o : JsonTree.array(n.get("normalizers"), "normalizer.normalizers")) {
                    collectForms(JsonTree.object(o, "normalizer.normalizers[]"), forms);
                }
            }
            default -> throw new IOException("normalizer.type=" + type + " is not supported (NFC, NFD, NFKC, NFKD, "
                    + "Sequence)");
        }
    }

    /** GPT-2's pattern, used by a ByteLevel pre-tokenizer with use_regex=true. */
    private static final String GPT2_PATTERN =
            "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

    private static PreTokenSplitter preTokenizer(Object node) throws IOException {
        Map<String, Object> n = JsonTree.object(node, "pre_tokenizer");
        List<Map<String, Object>> steps = new ArrayList<>();
        if ("Sequence".equals(n.get("type"))) {
            for (Object o : JsonTree.array(n.get("pretokenizers"), "pre_tokenizer.pretokenizers")) {
                steps.add(JsonTree.object(o, "pre_tokenizer.pretokenizers[]"));
            }
        } else {
            steps.add(n);
        }
        String pattern = null;
        boolean byteLevel = false;
        for (Map<String, Object> s : steps) {
            Object type = s.get("type");
            if ("Split".equals(type) && pattern == null && !byteLevel) {
                Map<String, Object> p = JsonTree.object(s.get("pattern"), "pre_tokenizer Split.pattern");
                if (!(p.get("Regex") instanceof String rx) || !"Isolated".equals(s.get("behavior"))
                        || JsonTree.bool(s.get("invert"), false)) {
                    throw new IOException("pre_tokenizer Split: only a Regex pattern with behavior=Isolated and "
                            + "invert=false is supported, got " + JsonTree.describe(s));
                }
                pattern = rx;
            } else if ("ByteLevel".equals(type) && !byteLevel) {
                if (JsonTree.bool(s.get("add_prefix_space"), false)) {
                    throw new IOException("pre_tokenizer ByteLevel.add_prefix_space=true is not supported");
                }
                if (JsonTree.bool(s.get("use_regex"), true)) {
                    if (pattern != null) {
                        throw new IOException("pre_tokenizer: Split followed by ByteLevel with use_regex=true "
                                + "is not supported");
                    }
                    pattern = GPT2_PATTERN;
                }
                byteLevel = true;
            } else {
                throw new IOException("pre_tokenizer step " + JsonTree.describe(s) + " is not supported "
                        + "(expected [Split(Regex, Isolated)] + ByteLevel)");
            }
        }
        if (!byteLevel || pattern == null) {
            throw new IOException("pre_tokenizer must be a byte-level one with a split pattern, got "
                    + JsonTree.describe(n));
        }
        return PreTokenSplitter.forPattern(pattern);
    }

    private static void postProcessor(Object node, List<Integer> prefix, List<Integer> suffix) throws IOException {
        if (node == null) {
            return;
        }
        Map<String, Object> n = JsonTree.object(node, "post_processor");
        Object type = n.get("type");
        switch (String.valueOf(type)) {
            case "ByteLevel" -> {
                // Only adjusts offsets (trim_offsets); ids are unchanged.
            }
            case "Sequence" -> {
                for (Object o : JsonTree.array(n.get("processors"), "post_processor.processors")) {
                    postProcessor(o, prefix, suffix);
                }
            }
            case "TemplateProcessing" -> {
                Map<String, Object> specials = JsonTree.object(n.get("special_tokens"),
                        "post_processor.special_tokens");
                boolean seenSequence = false;
                for (Object o : JsonTree.array(n.get("single"), "post_processor.single")) {
                    Map<String, Object> item = JsonTree.object(o, "post_processor.single[]");
                    if (item.containsKey("Sequence")) {
                        seenSequence = true;
                        continue;
                    }
                    Map<String, Object> st = JsonTree.object(item.get("SpecialToken"),
                            "post_processor.single[].SpecialToken");
                    String name = JsonTree.string(st.get("id"), "SpecialToken.id");
                    Map<String, Object> spec = JsonTree.object(specials.get(name),
                            "post_processor.special_tokens." + name);
                    for (Object id : JsonTree.array(spec.get("ids"), "special_tokens." + name + ".ids")) {
                        (seenSequence ? suffix : prefix).add(((Number) id).intValue());
                    }
                }
            }
            default -> throw new IOException("post_processor.type=" + type
                    + " is not supported (ByteLevel, TemplateProcessing, Sequence)");
        }
    }

    private static void checkDecoder(Object node) throws IOException {
        if (node == null) {
            return;
        }
        Object type = JsonTree.object(node, "decoder").get("type");
        if (!"ByteLevel".equals(type)) {
            throw new IOException("decoder.type=" + type + " is not supported (ByteLevel)");
        }
    }

    // ------------------------------------------------------------------------------------------------ encoding

    /**
     * Encodes {@code text} as the Rust library's {@code encode(text, addSpecialTokens)} does; special-token text
     * inside {@code text} becomes the single special id.
     */
    public int[] encode(CharSequence text, boolean addSpecialTokens) {
        Ctx ctx = SCRATCH.get();
        IntBuf out = ctx.out;
        out.clear();
        encodeAll(text, addSpecialTokens, ctx);
        int[] ids = Arrays.copyOf(out.a, out.size);
        ctx.trim();
        return ids;
    }

    /**
     * As {@link #encode}, but gives up as soon as the text certainly has more than {@code maxTokens} ids: before a
     * pre-tokenized word is run through BPE, the ids it must at least produce (its length over the longest token's
     * byte length) are added to the count so far, so an over-long text is refused before the expensive merges of
     * the word that crosses the limit (a megabyte "word" of one letter is refused without being merged).
     *
     * @return the ids, or null when the text has more than {@code maxTokens} of them
     */
    public int[] encodeAtMost(CharSequence text, boolean addSpecialTokens, int maxTokens) {
        Ctx ctx = SCRATCH.get();
        IntBuf out = ctx.out;
        out.clear();
        ctx.limit = maxTokens;
        ctx.over = false;
        try {
            encodeAll(text, addSpecialTokens, ctx);
            return ctx.over || out.size > maxTokens ? null : Arrays.copyOf(out.a, out.size);
        } finally {
            ctx.limit = Integer.MAX_VALUE;
            ctx.over = false;
            ctx.trim();
        }
    }

    /**
     * Bytes of the longest model token (128 for Qwen3 and Llama 3.1: a run of spaces): a pre-tokenized word of
     * {@code n} UTF-8 bytes encodes to at least {@code ceil(n / this)} ids.
     */
    public int maxTokenBytes() {
        return model.maxTokenBytes();
    }

    /**
     * A lower bound of the ids {@code encode(text, false)} returns, read from the text's UTF-8 length alone
     * ({@code ceil(bytes / longest)}, longest being the longest model token or added token's text); with special
     * tokens the post-processor only adds ids. Exact as a bound because every id stands for a piece of the text no
     * longer than that: an added token is its own text, and the text between added tokens is split into words whose
     * ids are model tokens that spell the word's bytes (every byte has a token, and byte fallback, dropout and
     * affixes are refused at load). It is 0, proving nothing, where the text is not what gets split: when the
     * normalizer may change it (NFC composes up to four code points into one, NFKC maps many to fewer bytes) or an
     * added token strips white space around it; {@link #encodeAtMost} still bounds each word after normalization.
     */
    public long minTokens(CharSequence text) {
        return maxBytesPerId == 0 ? 0 : minTokensOfLength(text);
    }

    /**
     * An upper bound of the ids {@code encode(text, false)} returns, read from the text's UTF-8 length alone: every id
     * spells at least one byte of the text (the same argument as {@link #minTokens}: an added token is its own,
     * non-empty text, and the words between them are spelled by model tokens of at least one byte each), so there
     * are never more ids than bytes. -1, proving nothing, where {@link #minTokens} proves nothing either (a normalizer
     * that may change the text, an added token that strips white space). What lets a caller that only needs to know a
     * prompt fits (a context check) skip tokenizing it.
     */
    public long maxTokens(CharSequence text) {
        if (maxBytesPerId == 0 || (normalizer != null && normalizer.mayChange(text, 0, text.length()))) {
            return -1;
        }
        return utf8Length(text, 0, text.length());
    }

    /**
     * Whether {@code text} certainly encodes to more than {@code maxTokens} ids ({@link #minTokens} above it), in
     * O(1) for a text too short to prove it (a UTF-16 unit is at most 3 UTF-8 bytes), so a prompt of ordinary
     * length pays no scan.
     */
    public boolean certainlyMoreThan(CharSequence text, int maxTokens) {
        if (maxBytesPerId == 0 || 3L * text.length() <= (long) maxTokens * maxBytesPerId) {
            return false;
        }
        return minTokensOfLength(text) > maxTokens;
    }

    private long minTokensOfLength(CharSequence text) {
        if (normalizer != null && normalizer.mayChange(text, 0, text.length())) {
            return 0;
        }
        long bytes = utf8Length(text, 0, text.length());
        return (bytes + maxBytesPerId - 1) / maxBytesPerId;
    }

    /**
     * The most heap one {@link #encodeAtMost} call with {@code maxTokens} takes beyond its input, for a tokenizer
     * whose longest model token has {@code maxTokenBytes} bytes ({@link #maxTokenBytes()}): what a gateway thread
     * needs free to tokenize one prompt of a rule whose bound is {@code maxTokens}. The call refuses every word that
     * needs more than the ids left before the limit, so the longest word it merges has {@code W = maxTokens *
     * maxTokenBytes} bytes; merging it takes 36 bytes per byte (three int links and three heap entries of 8
     * bytes) plus its UTF-8 copy, and the ids collected so far are at most {@code maxTokens + W}; the pre-token ends
     * are cut at the limit. (The normalized copy of a text that NFC changes is proportional to the text, which the
     * body limit bounds, and is not counted.) Scratch above {@code 1 Mi} elements is dropped after each call; one
     * set per thread that tokenizes.
     */
    public static long worstCaseScratchBytes(int maxTokens, int maxTokenBytes) {
        long word = (long) maxTokens * maxTokenBytes;
        long merge = (word + BpeModel.Scratch.GROWTH_STEP) * BpeModel.Scratch.BYTES_PER_SYMBOL;
        long utf8 = word + UTF8_GROWTH_STEP;
        long ids = ((long) maxTokens + word) * 2 * Integer.BYTES; // the id buffer grows by doubling
        long ends = ((long) maxTokens + 1) * 2 * Integer.BYTES;
        long result = (long) maxTokens * Integer.BYTES; // the returned copy
        return merge + utf8 + ids + ends + result;
    }

    /**
     * As {@link #encode} but hands each id to {@code sink} instead of allocating an array. The sink runs on the
     * calling thread after encoding and must not call back into this tokenizer.
     *
     * @return the number of ids produced
     */
    public int encodeInto(CharSequence text, boolean addSpecialTokens, IntConsumer sink) {
        Ctx ctx = SCRATCH.get();
        IntBuf out = ctx.out;
        out.clear();
        encodeAll(text, addSpecialTokens, ctx);
        int n = out.size;
        int[] a = out.a;
        for (int i = 0; i < n; i++) {
            sink.accept(a[i]);
        }
        ctx.trim();
        return n;
    }

    private void encodeAll(CharSequence text, boolean addSpecialTokens, Ctx ctx) {
        IntBuf out = ctx.out;
        if (addSpecialTokens) {
            out.addAll(prefixIds, 0, prefixIds.length);
        }
        int len = text.length();
        int segStart = 0;
        int[] found = ctx.found;
        while (segStart <= len && !ctx.over) {
            long m = added.find(text, segStart, segStart, len, found);
            if (m < 0) {
                encodeSegment(text, segStart, len, ctx);
                break;
            }
            int start = (int) (m >>> 32);
            int end = (int) m;
            encodeSegment(text, segStart, start, ctx);
            out.add(added.token(found[0]).id());
            countAgainstLimit(ctx);
            segStart = end;
        }
        if (addSpecialTokens) {
            out.addAll(suffixIds, 0, suffixIds.length);
        }
    }

    private void encodeSegment(CharSequence s, int from, int to, Ctx ctx) {
        int n = to - from;
        if (n <= 0) {
            return;
        }
        if (segmentCache.enabled(n)) {
            int h = LossyIdCache.hash(s, from, to);
            if (segmentCache.get(s, from, to, h, ctx.out)) {
                return;
            }
            int mark = ctx.out.size;
            encodeSegmentUncached(s, from, to, ctx);
            if (!ctx.over) { // a segment given up on half way has only part of its ids
                segmentCache.put(s, from, to, h, ctx.out.a, mark, ctx.out.size);
            }
        } else {
            encodeSegmentUncached(s, from, to, ctx);
        }
    }

    private void encodeSegmentUncached(CharSequence s, int from, int to, Ctx ctx) {
        CharSequence t = s;
        int a = from;
        int b = to;
        if (normalizer != null && normalizer.mayChange(s, from, to)) {
            String norm = normalizer.apply(s.subSequence(from, to));
            t = norm;
            a = 0;
            b = norm.length();
        }
        if (ctx.limit != Integer.MAX_VALUE) {
            // The whole normalized segment goes through BPE: its length over the longest token is certain.
            if ((long) ctx.out.size + ceilDiv(b - a, model.maxTokenBytes()) > ctx.limit) {
                ctx.over = true;
                return;
            }
        }
        IntBuf ends = ctx.ends;
        ends.clear();
        // Every pre-token gives at least one id: one past the ids left proves the limit crossed.
        splitter.split(t, a, b, ends, ctx.limit == Integer.MAX_VALUE ? Integer.MAX_VALUE
                : ctx.limit - ctx.out.size + 1);
        int p = a;
        int[] e = ends.a;
        for (int k = 0, n = ends.size; k < n && !ctx.over; k++) {
            int end = e[k];
            encodeChunk(t, p, end, ctx);
            p = end;
        }
    }

    private void encodeChunk(CharSequence s, int from, int to, Ctx ctx) {
        int n = to - from;
        if (chunkCache.enabled(n)) {
            int h = LossyIdCache.hash(s, from, to);
            if (chunkCache.get(s, from, to, h, ctx.out)) {
                return;
            }
            int mark = ctx.out.size;
            bpe(s, from, to, ctx);
            if (!ctx.over) { // a word refused by its length has no ids
                chunkCache.put(s, from, to, h, ctx.out.a, mark, ctx.out.size);
            }
        } else {
            bpe(s, from, to, ctx);
        }
        countAgainstLimit(ctx);
    }

    /** Counting as it goes: once the ids so far pass the caller's limit, nothing more is encoded. */
    private static void countAgainstLimit(Ctx ctx) {
        if (ctx.out.size > ctx.limit) {
            ctx.over = true;
        }
    }

    private static long ceilDiv(long n, int d) {
        return (n + d - 1) / d;
    }

    private void bpe(CharSequence s, int from, int to, Ctx ctx) {
        // A word of n UTF-8 bytes gives at least ceil(n / maxTokenBytes) ids (each id is a model token spelling
        // some of its bytes): stop here when they alone cross the caller's limit, before the merges (the expensive
        // part, ~40 B of scratch per byte). UTF-16 units never outnumber UTF-8 bytes, so the cheaper count of units
        // is tried first; the UTF-8 length then refuses the rest, so no admitted word has more than
        // limit * maxTokenBytes bytes.
        long bytes = -1;
        if (ctx.limit != Integer.MAX_VALUE) {
            int longest = model.maxTokenBytes();
            if ((long) ctx.out.size + ceilDiv(to - from, longest) > ctx.limit
                || (long) ctx.out.size + ceilDiv(bytes = utf8Length(s, from, to), longest) > ctx.limit) {
                ctx.over = true;
                return;
            }
        }
        int len = utf8(s, from, to, bytes < 0 ? utf8Length(s, from, to) : bytes, ctx);
        ctx.bpe.ensure(len);
        model.encodeWord(ctx.utf8, len, ctx.bpe, ctx.out);
    }

    /** {@link #utf8}'s buffer grows to the length needed rounded up to this, not by doubling (see the bound). */
    private static final int UTF8_GROWTH_STEP = 4096;

    /** The UTF-8 length {@link #utf8} writes for {@code s[from,to)} (an unpaired surrogate as U+FFFD: 3 bytes). */
    private static long utf8Length(CharSequence s, int from, int to) {
        long n = 0;
        for (int i = from; i < to; i++) {
            char c = s.charAt(i);
            if (c < 0x80) {
                n++;
            } else if (c < 0x800) {
                n += 2;
            } else if (Character.isHighSurrogate(c) && i + 1 < to && Character.isLowSurrogate(s.charAt(i + 1))) {
                n += 4;
                i++;
            } else {
                n += 3;
            }
        }
        return n;
    }

    /**
     * UTF-8 of {@code s[from,to)} into {@code ctx.utf8}; an unpaired surrogate becomes U+FFFD.
     *
     * @param need {@link #utf8Length} of the range
     */
    private static int utf8(CharSequence s, int from, int to, long need, Ctx ctx) {
        if (ctx.utf8.length < need) {
            ctx.utf8 = new byte[(int) ((need + UTF8_GROWTH_STEP - 1) / UTF8_GROWTH_STEP * UTF8_GROWTH_STEP)];
        }
        byte[] b = ctx.utf8;
        int n = 0;
        for (int i = from; i < to; i++) {
            char c = s.charAt(i);
            if (c < 0x80) {
                b[n++] = (byte) c;
            } else if (c < 0x800) {
                b[n++] = (byte) (0xC0 | (c >> 6));
                b[n++] = (byte) (0x80 | (c & 0x3F));
            } else if (Character.isSurrogate(c)) {
                char d;
                if (Character.isHighSurrogate(c) && i + 1 < to && Character.isLowSurrogate(d = s.charAt(i + 1))) {
                    int cp = Character.toCodePoint(c, d);
                    i++;
                    b[n++] = (byte) (0xF0 | (cp >> 18));
                    b[n++] = (byte) (0x80 | ((cp >> 12) & 0x3F));
                    b[n++] = (byte) (0x80 | ((cp >> 6) & 0x3F));
                    b[n++] = (byte) (0x80 | (cp & 0x3F));
                } else {
                    b[n++] = (byte) 0xEF;
                    b[n++] = (byte) 0xBF;
                    b[n++] = (byte) 0xBD;
                }
            } else {
                b[n++] = (byte) (0xE0 | (c >> 12));
                b[n++] = (byte) (0x80 | ((c >> 6) & 0x3F));
                b[n++] = (byte) (0x80 | (c & 0x3F));
            }
        }
        return n;
    }

    // ------------------------------------------------------------------------------------------------ decoding

    /** Byte-level decode of {@code ids[offset, offset+length)}, special tokens included as their text. */
    public String decode(int[] ids, int offset, int length) {
        return decode(ids, offset, length, false);
    }

    /**
     * Byte-level decode: concatenates the raw bytes of the tokens (added tokens as their UTF-8 text, special ones
     * dropped if {@code skipSpecialTokens}) and decodes them as UTF-8, invalid sequences becoming U+FFFD as in the
     * Rust library's {@code from_utf8_lossy}. Unknown ids are skipped, as the Rust library does.
     */
    public String decode(int[] ids, int offset, int length, boolean skipSpecialTokens) {
        java.util.Objects.checkFromIndexSize(offset, length, ids.length);
        int total = 0;
        for (int i = offset; i < offset + length; i++) {
            byte[] b = bytesFor(ids[i], skipSpecialTokens);
            total += b == null ? 0 : b.length;
        }
        byte[] buf = new byte[total];
        int n = 0;
        for (int i = offset; i < offset + length; i++) {
            byte[] b = bytesFor(ids[i], skipSpecialTokens);
            if (b != null) {
                System.arraycopy(b, 0, buf, n, b.length);
                n += b.length;
            }
        }
        return new String(buf, 0, n, StandardCharsets.UTF_8);
    }

    private byte[] bytesFor(int id, boolean skipSpecial) {
        if (id < 0 || id >= vocabSize) {
            return null;
        }
        byte[] a = addedBytes[id];
        if (a != null) {
            return skipSpecial && addedSpecial[id] ? null : a;
        }
        return model.bytesOf(id);
    }

    // ------------------------------------------------------------------------------------------------ metadata

    /** Vocabulary size including added tokens (the Rust library's {@code get_vocab_size(true)}). */
    public int vocabSize() {
        return vocabSize;
    }

    /**
     * The chat templates of the model directory's processor (multimodal checkpoints: {@code chat_template.json},
     * or the template files when a {@code processor_class} is named), or null when it has no processor or the
     * processor no template. vLLM renders with it before the tokenizer's unless the request has tools; SGLang
     * replaces the tokenizer's template with it.
     */
    public ChatTemplates processorTemplates() {
        return processorTemplates;
    }

    public TokenizerConfig config() {
        return config;
    }

    /** @return the id of an added token's text or of a model token's raw text, or -1 */
    public int tokenId(String token) {
        Integer a = addedIds.get(token);
        if (a != null) {
            return a;
        }
        byte[] b = token.getBytes(StandardCharsets.UTF_8);
        return model.wordId(b, 0, b.length);
    }

    /** Drops every cached pre-token and segment (for benchmarks and tests of the cold path). */
    public void clearCaches() {
        chunkCache.clear();
        segmentCache.clear();
    }

    /** Per-thread scratch. */
    private static final class Ctx {
        IntBuf out = new IntBuf(1024);
        IntBuf ends = new IntBuf(256);
        byte[] utf8 = new byte[256];
        BpeModel.Scratch bpe = new BpeModel.Scratch();
        final int[] found = new int[1];
        /** {@link #encodeAtMost}'s limit for the call in progress ({@code Integer.MAX_VALUE}: none). */
        int limit = Integer.MAX_VALUE;
        /** Set when the call in progress certainly produces more than {@link #limit} ids; encoding stops. */
        boolean over;

        void trim() {
            if (out.a.length > SCRATCH_RETAIN_LIMIT) {
                out = new IntBuf(1024);
            }
            if (ends.a.length > SCRATCH_RETAIN_LIMIT) {
                ends = new IntBuf(256);
            }
            if (utf8.length > SCRATCH_RETAIN_LIMIT) {
                utf8 = new byte[256];
            }
            if (bpe.sym.length > SCRATCH_RETAIN_LIMIT) { // a fresh Scratch: its rank array never grows
                bpe = new BpeModel.Scratch();
            }
        }
    }
}
