package io.kvgate.index.tokenize;

import java.util.Arrays;

/**
 * Byte-level BPE: the bytes of one pre-token become single-byte symbols, then adjacent pairs are merged lowest
 * merge rank first (leftmost on ties), exactly the order HF {@code tokenizers}' {@code Word::merge_all} applies.
 *
 * <p>Merge ranks live in one open-addressing table keyed by {@code (leftId << 32) | rightId} holding
 * {@code (rank << 32) | mergedId}, so a pair lookup is one multiply-shift hash and usually one probe, without boxing.
 * Short words use an array of symbols with cached pair ranks (a linear scan per merge beats a heap below ~64
 * symbols); long words (base64 blobs, whitespace runs) use a binary heap over a linked list so that adversarial
 * input stays O(n log n).
 *
 * <p>Immutable after construction and thread-safe; per-call state lives in a caller-owned {@link Scratch}.
 */
final class BpeModel {
    static final int NO_MERGE = Integer.MAX_VALUE;
    private static final int LINEAR_MAX_SYMBOLS = 64;
    /**
     * Heap entries the heap path may hold per symbol: {@code len - 1} initial pairs plus at most two per merge
     * ({@code len - 1} merges), stale ones included, so fewer than {@code 3 * len}.
     */
    private static final int HEAP_ENTRIES_PER_SYMBOL = 3;

    private final int[] byteIds = new int[256];
    private final long[] mergeKeys;
    private final long[] mergeValues;
    private final int mergeMask;
    private final boolean ignoreMerges;
    /** id -> raw bytes of that model token (null for ids outside the model vocabulary). */
    private final byte[][] idToBytes;
    /** open-addressing table of model ids keyed by the hash of their bytes (for ignore_merges whole-word hits). */
    private final int[] wordTable;
    private final int wordMask;
    /** Bytes of the longest model token: a word of n bytes encodes to at least ceil(n / maxTokenBytes) ids. */
    private final int maxTokenBytes;

    BpeModel(byte[][] idToBytes, int[] mergeLeft, int[] mergeRight, int[] mergeResult, boolean ignoreMerges) {
        this.idToBytes = idToBytes;
        this.ignoreMerges = ignoreMerges;
        Arrays.fill(byteIds, -1);
        int[] table = new int[tableSize(idToBytes.length)];
        Arrays.fill(table, -1);
        int wmask = table.length - 1;
        int longest = 1;
        for (int id = 0; id < idToBytes.length; id++) {
            byte[] b = idToBytes[id];
            if (b == null) {
                continue;
            }
            longest = Math.max(longest, b.length);
            if (b.length == 1) {
                byteIds[b[0] & 0xFF] = id;
            }
            int slot = hashBytes(b, 0, b.length) & wmask;
            while (table[slot] >= 0) {
                slot = (slot + 1) & wmask;
            }
            table[slot] = id;
        }
        this.wordTable = table;
        this.wordMask = wmask;
        this.maxTokenBytes = longest;
        for (int b = 0; b < 256; b++) {
            if (byteIds[b] < 0) {
                throw new IllegalArgumentException("model.vocab: byte 0x" + Integer.toHexString(b)
                        + " has no single-byte token; a byte-level BPE vocabulary must cover all 256 bytes");
            }
        }
        int n = mergeLeft.length;
        int cap = tableSize(n);
        mergeKeys = new long[cap];
        mergeValues = new long[cap];
        Arrays.fill(mergeKeys, -1L);
        mergeMask = cap - 1;
        for (int rank = 0; rank < n; rank++) {
            long key = pairKey(mergeLeft[rank], mergeRight[rank]);
            int slot = mix(key) & mergeMask;
            while (mergeKeys[slot] != -1L && mergeKeys[slot] != key) {
                slot = (slot + 1) & mergeMask;
            }
            if (mergeKeys[slot] == key) {
                continue; // HF keeps the first (lowest) rank of a duplicated merge
            }
            mergeKeys[slot] = key;
            mergeValues[slot] = ((long) rank << 32) | (mergeResult[rank] & 0xFFFFFFFFL);
        }
    }

    private static int tableSize(int entries) {
        int cap = Integer.highestOneBit(Math.max(16, entries) * 2);
        return cap < entries * 2 ? cap << 1 : cap;
    }

    static long pairKey(int left, int right) {
        return ((long) left << 32) | (right & 0xFFFFFFFFL);
    }

    private static int mix(long key) {
        long h = key * 0x9E3779B97F4A7C15L;
        return (int) (h ^ (h >>> 29));
    }

    static int hashBytes(byte[] b, int off, int len) {
        int h = 0x811C9DC5;
        for (int i = off; i < off + len; i++) {
            h = (h ^ (b[i] & 0xFF)) * 0x01000193;
        }
        return h ^ (h >>> 15);
    }

    /** @return {@code (rank << 32) | mergedId}, or -1 if the pair never merges */
    long merge(int left, int right) {
        long key = pairKey(left, right);
        int slot = mix(key) & mergeMask;
        long k;
        while ((k = mergeKeys[slot]) != -1L) {
            if (k == key) {
                return mergeValues[slot];
            }
            slot = (slot + 1) & mergeMask;
        }
        return -1L;
    }

    private int rank(int left, int right) {
        long m = merge(left, right);
        return m < 0 ? NO_MERGE : (int) (m >>> 32);
    }

    int modelVocabSize() {
        return idToBytes.length;
    }

    byte[] bytesOf(int id) {
        return id >= 0 && id < idToBytes.length ? idToBytes[id] : null;
    }

    /** @return the model id whose bytes equal {@code b[off, off+len)}, or -1 */
    int wordId(byte[] b, int off, int len) {
        int slot = hashBytes(b, off, len) & wordMask;
        int id;
        while ((id = wordTable[slot]) >= 0) {
            byte[] t = idToBytes[id];
            if (t.length == len && Arrays.equals(t, 0, len, b, off, off + len)) {
                return id;
            }
            slot = (slot + 1) & wordMask;
        }
        return -1;
    }

    /**
     * Tokenizes one pre-token given as raw bytes and appends its ids to {@code out}.
     */
    void encodeWord(byte[] bytes, int len, Scratch s, IntBuf out) {
        if (len == 0) {
            return;
        }
        if (ignoreMerges) {
            int id = wordId(bytes, 0, len);
            if (id >= 0) {
                out.add(id);
                return;
            }
        }
        if (len == 1) {
            out.add(byteIds[bytes[0] & 0xFF]);
            return;
        }
        if (len <= LINEAR_MAX_SYMBOLS) {
            encodeLinear(bytes, len, s, out);
        } else {
            encodeHeap(bytes, len, s, out);
        }
    }

    private void encodeLinear(byte[] bytes, int len, Scratch s, IntBuf out) {
        int[] sym = s.sym;
        int[] rk = s.rank;
        for (int i = 0; i < len; i++) {
            sym[i] = byteIds[bytes[i] & 0xFF];
        }
        int n = len;
        for (int i = 0; i < n - 1; i++) {
            rk[i] = rank(sym[i], sym[i + 1]);
        }
        while (n > 1) {
            int best = NO_MERGE;
            int at = -1;
            for (int i = 0; i < n - 1; i++) {
                if (rk[i] < best) {
                    best = rk[i];
                    at = i;
                }
            }
            if (at < 0) {
                break;
            }
            sym[at] = (int) merge(sym[at], sym[at + 1]);
            int tail = n - at - 2;
            if (tail > 0) {
                System.arraycopy(sym, at + 2, sym, at + 1, tail);
                System.arraycopy(rk, at + 2, rk, at + 1, tail - 1 > 0 ? tail - 1 : 0);
            }
            n--;
            if (at > 0) {
                rk[at - 1] = rank(sym[at - 1], sym[at]);
            }
            if (at < n - 1) {
                rk[at] = rank(sym[at], sym[at + 1]);
            }
        }
        for (int i = 0; i < n; i++) {
            out.add(sym[i]);
        }
    }

    /**
     * Heap variant: entries are {@code (rank << 32) | position}; stale entries (a side already merged away) are
     * detected by re-deriving the pair's rank at pop time, as HF does with its {@code target_new_id} check.
     */
    private void encodeHeap(byte[] bytes, int len, Scratch s, IntBuf out) {
        s.ensure(len);
        int[] sym = s.sym;
        int[] next = s.next;
        int[] prev = s.prev;
        long[] heap = s.heap;
        for (int i = 0; i < len; i++) {
            sym[i] = byteIds[bytes[i] & 0xFF];
            next[i] = i + 1 < len ? i + 1 : -1;
            prev[i] = i - 1;
        }
        int size = 0;
        for (int i = 0; i < len - 1; i++) {
            int r = rank(sym[i], sym[i + 1]);
            if (r != NO_MERGE) {
                size = heapPush(heap, size, ((long) r << 32) | i);
            }
        }
        while (size > 0) {
            long top = heap[0];
            size = heapPop(heap, size);
            int pos = (int) top;
            int r = (int) (top >>> 32);
            if (sym[pos] < 0) {
                continue; // merged into its left neighbour already
            }
            int nx = next[pos];
            if (nx < 0) {
                continue;
            }
            long m = merge(sym[pos], sym[nx]);
            if (m < 0 || (int) (m >>> 32) != r) {
                continue; // stale: the pair at pos changed since this entry was pushed
            }
            sym[pos] = (int) m;
            sym[nx] = -1;
            int nn = next[nx];
            next[pos] = nn;
            if (nn >= 0) {
                prev[nn] = pos;
                int r2 = rank(sym[pos], sym[nn]);
                if (r2 != NO_MERGE) {
                    size = heapPush(heap, size, ((long) r2 << 32) | pos);
                }
            }
            int pv = prev[pos];
            if (pv >= 0) {
                int r0 = rank(sym[pv], sym[pos]);
                if (r0 != NO_MERGE) {
                    size = heapPush(heap, size, ((long) r0 << 32) | pv);
                }
            }
        }
        for (int i = 0; i >= 0; i = next[i]) {
            out.add(sym[i]);
        }
    }

    private static int heapPush(long[] h, int size, long v) {
        int i = size;
        while (i > 0) {
            int p = (i - 1) >>> 1;
            if (h[p] <= v) {
                break;
            }
            h[i] = h[p];
            i = p;
        }
        h[i] = v;
        return size + 1;
    }

    private static int heapPop(long[] h, int size) {
        int n = size - 1;
        long v = h[n];
        int i = 0;
        while (true) {
            int c = 2 * i + 1;
            if (c >= n) {
                break;
            }
            if (c + 1 < n && h[c + 1] < h[c]) {
                c++;
            }
            if (v <= h[c]) {
                break;
            }
            h[i] = h[c];
            i = c;
        }
        if (n > 0) {
            h[i] = v;
        }
        return n;
    }

    /**
     * Per-thread working arrays for {@link #encodeWord}. Not thread-safe: one per thread. A word of {@code n} bytes
     * on the heap path needs {@link #BYTES_PER_SYMBOL} bytes per byte: sized to the word (rounded up to
     * {@link #GROWTH_STEP} symbols), not to a power of two above it, so the bound callers compute from the longest
     * word they admit ({@link HfTokenizer#worstCaseScratchBytes}) is the memory actually taken.
     */
    static final class Scratch {
        /** {@code sym}, {@code next}, {@code prev} (4 B each) and three heap entries (8 B each) per symbol. */
        static final int BYTES_PER_SYMBOL = 3 * Integer.BYTES + HEAP_ENTRIES_PER_SYMBOL * Long.BYTES;
        static final int GROWTH_STEP = 4096;

        int[] sym = new int[256];
        /** Only the linear path (at most {@link #LINEAR_MAX_SYMBOLS} symbols) reads it, so it never grows. */
        final int[] rank = new int[LINEAR_MAX_SYMBOLS];
        int[] next = new int[256];
        int[] prev = new int[256];
        long[] heap = new long[256 * HEAP_ENTRIES_PER_SYMBOL];

        void ensure(int symbols) {
            if (sym.length < symbols) {
                int n = (int) Math.min(Integer.MAX_VALUE / HEAP_ENTRIES_PER_SYMBOL,
                        ((long) symbols + GROWTH_STEP - 1) / GROWTH_STEP * GROWTH_STEP);
                sym = new int[n];
                next = new int[n];
                prev = new int[n];
                heap = new long[n * HEAP_ENTRIES_PER_SYMBOL];
            }
        }
    }

    /** Bytes of the longest token of the model vocabulary (at least 1). */
    int maxTokenBytes() {
        return maxTokenBytes;
    }
}
