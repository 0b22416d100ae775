package io.kvgate.dataplane.request;

import io.netty.buffer.ByteBuf;

/**
 * Removes the client's engine-internal members ({@link RequestFields#ENGINE_INTERNAL_FIELDS}: vLLM
 * {@code kv_transfer_params}, SGLang {@code bootstrap_host/port/room}, TensorRT-LLM {@code disaggregated_params};
 * on {@code kv_exact} rules also vLLM's {@code vllm_xargs.kv_cache_report_mode}, see
 * {@link RequestFields#REPORT_MODE_XARG}) from a request body, in place, on every rule:
 * engines with a KV connector would otherwise pull KV from (or push it to) a host and blocks the client chose. P/D
 * sets its own values afterwards. The body is compacted by moving bytes left within its own buffer: no copy of the
 * body, no allocation. Stateless.
 */
public final class EngineFieldStripper {
    private EngineFieldStripper() {}

    /**
     * @param body the whole JSON object body, starting at reader index 0 (the offsets in {@code f} are relative to
     *             its first byte)
     * @return the number of members removed (0: the body is untouched)
     */
    public static int strip(ByteBuf body, RequestFields f) {
        int removed = f.engineFieldRangeCount;
        if (removed == 0) {
            return 0;
        }
        int n = removalRanges(body, f);
        int[] r = f.engineFieldRanges;
        int base = body.readerIndex();
        int write = r[0];
        int end = body.writerIndex() - base;
        for (int k = 0; k < n; k++) {
            int keepFrom = r[k * 2 + 1];
            int keepTo = k + 1 < n ? r[(k + 1) * 2] : end;
            int len = keepTo - keepFrom;
            if (len > 0) {
                body.setBytes(base + write, body, base + keepFrom, len); // moves left: safe within one buffer
                write += len;
            }
        }
        body.writerIndex(base + write);
        f.removedRangeCount = n; // r[0, 2n) now hold exactly the removed ranges, for shifted()
        return removed;
    }

    /**
     * Turns the recorded member ranges into the byte ranges to remove, in body order, in place in
     * {@link RequestFields#engineFieldRanges}; returns how many there are (a run of members that ends the object is
     * one range, with the comma before it). Shared with {@link RequestEdits}, which removes them in the same pass as
     * its own edits. Call once per body.
     */
    static int removalRanges(ByteBuf body, RequestFields f) {
        int n = f.engineFieldRangeCount;
        int[] r = f.engineFieldRanges;
        int[] kinds = f.engineFieldKinds;
        int base = body.readerIndex();
        // The parser reports a member name's location inside the name (past its opening quote): move every name
        // offset back to its quote. Range ends are the next name or the end of the enclosing object, which is exact.
        for (int k = 0; k < n; k++) {
            r[k * 2] = quoteAtOrBefore(body, base, r[k * 2]);
            if (!endsItsObject(f, k)) {
                r[k * 2 + 1] = quoteAtOrBefore(body, base, r[k * 2 + 1]);
            }
        }
        // Abutting members of one object form one range. A run that ends its object has no following member whose
        // name its removal can abut: take the comma before the run instead, so {"a":1,"kv_transfer_params":{}}
        // becomes {"a":1} (the same inside vllm_xargs).
        int out = 0;
        for (int k = 0; k < n; ) {
            int j = k;
            while (j + 1 < n && (kinds[j + 1] == RequestFields.RANGE_TOP_LEVEL) == (kinds[k] == RequestFields.RANGE_TOP_LEVEL)
                && r[(j + 1) * 2] == r[j * 2 + 1]) {
                j++;
            }
            int start = r[k * 2];
            int end = r[j * 2 + 1];
            if (endsItsObject(f, j)) {
                int i = start - 1;
                while (i >= 0 && isJsonWhitespace(body.getByte(base + i))) {
                    i--;
                }
                if (i >= 0 && body.getByte(base + i) == ',') {
                    start = i;
                }
            }
            boolean topLevel = kinds[k] == RequestFields.RANGE_TOP_LEVEL;
            r[out * 2] = start;
            r[out * 2 + 1] = end;
            kinds[out] = topLevel ? RequestFields.RANGE_TOP_LEVEL : kinds[j];
            out++;
            k = j + 1;
        }
        return out;
    }

    private static boolean endsItsObject(RequestFields f, int k) {
        int kind = f.engineFieldKinds[k];
        return kind == RequestFields.RANGE_NESTED_LAST
            || (kind == RequestFields.RANGE_TOP_LEVEL && f.engineFieldRanges[k * 2 + 1] == f.objectEnd);
    }

    /**
     * Where a byte the extractor located at {@code offset} (an offset of the body as received, outside every removed
     * member) is after {@link #strip}: left by the length of every removed range that ends at or before it.
     */
    static int shifted(RequestFields f, int offset) {
        int out = offset;
        int[] r = f.engineFieldRanges;
        for (int k = 0; k < f.removedRangeCount; k++) {
            if (r[k * 2 + 1] <= offset) {
                out -= r[k * 2 + 1] - r[k * 2];
            }
        }
        return out;
    }

    /** The name's opening quote: the internal names (and the member names after them) are located inside the quotes. */
    private static int quoteAtOrBefore(ByteBuf body, int base, int offset) {
        int i = offset;
        while (i > 0 && body.getByte(base + i) != '"') {
            i--;
        }
        return i;
    }

    private static boolean isJsonWhitespace(byte b) {
        return b == ' ' || b == '\t' || b == '\n' || b == '\r';
    }
}
