package io.kvgate.dataplane.request;

import io.kvgate.dataplane.request.RequestFields.Member;
import io.kvgate.dataplane.wire.JsonText;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import java.nio.charset.StandardCharsets;

/**
 * The gateway's edits of a request body before it goes to an engine: the value of a top-level member set to new JSON
 * (replacing the client's last occurrence of it, or added when the body has none), plus the removal of the client's
 * engine-internal members ({@link EngineFieldStripper}). Each edit is a byte splice at the ranges the field extractor
 * recorded while the body streamed in ({@link RequestFields#valueFrom}): no second parse, no tree, every other byte
 * of the body forwarded as the client sent it. Used for a model alias ({@code model}: served_as), greedy replication
 * ({@code n}: 1), forced usage ({@code stream_options}) and open to any other top-level member ({@link Member}).
 *
 * <p>A body with no edit costs nothing here (the front door only calls {@link #apply} when one was set, or to strip
 * engine-internal members in place as before). One instance per connection, reset per request; event-loop only.
 */
public final class RequestEdits {
    private final byte[][] values = new byte[Member.ALL.length][];
    /** Per member: the JSON name (a quoted string) its last occurrence is to be respelled as, or null. */
    private final byte[][] names = new byte[Member.ALL.length][];
    private int count;
    private int renames;
    /**
     * Members added at the closing brace whatever the body holds, as {@code ,"name":value} bytes in the order added:
     * names the body cannot carry (engine-internal members, which the front door removed) or that are no
     * {@link Member}; null until the first.
     */
    private byte[][] appended;
    private int appendedCount;

    public void reset() {
        if (count > 0) {
            java.util.Arrays.fill(values, null);
            count = 0;
        }
        if (renames > 0) {
            java.util.Arrays.fill(names, null);
            renames = 0;
        }
        if (appendedCount > 0) {
            java.util.Arrays.fill(appended, null);
            appendedCount = 0;
        }
    }

    /** Whether any member is to be set or renamed. */
    public boolean isEmpty() {
        return count == 0 && renames == 0 && appendedCount == 0;
    }

    /**
     * Adds {@code "name": json} as the body's last member, after the client's (the engines read the last occurrence):
     * for names the front door removed from the client's body (engine-internal: {@code kv_transfer_params},
     * {@code disaggregated_params}, {@code bootstrap_*}) or that no {@link Member} covers. {@code name} is a plain
     * ASCII member name.
     */
    public void append(String name, byte[] json) {
        if (appended == null) {
            appended = new byte[4][];
        } else if (appendedCount == appended.length) {
            appended = java.util.Arrays.copyOf(appended, appendedCount * 2);
        }
        appended[appendedCount++] = member(name.getBytes(StandardCharsets.US_ASCII), json);
    }

    /** {@code ,"name":value}: a member added at the closing brace. */
    private static byte[] member(byte[] name, byte[] v) {
        byte[] member = new byte[name.length + v.length + 4];
        member[0] = ',';
        member[1] = '"';
        System.arraycopy(name, 0, member, 2, name.length);
        member[name.length + 2] = '"';
        member[name.length + 3] = ':';
        System.arraycopy(v, 0, member, name.length + 4, v.length);
        return member;
    }

    /**
     * Respells the name of {@code m}'s last occurrence as {@code newName}, its value kept byte for byte: the
     * translation of one engine's spelling of a field into another's ({@code include_stop_str_in_output} and
     * {@code no_stop_trim}). Ignored when the body has no {@code m}.
     */
    public void rename(Member m, String newName) {
        if (names[m.ordinal()] == null) {
            renames++;
        }
        names[m.ordinal()] = jsonString(newName);
    }

    /** Sets {@code m}'s value to {@code json} (a complete JSON value, e.g. {@code 1} or {@code "qwen3"}). */
    public void set(Member m, byte[] json) {
        if (values[m.ordinal()] == null) {
            count++;
        }
        values[m.ordinal()] = json;
    }

    public void set(Member m, String json) {
        set(m, json.getBytes(StandardCharsets.UTF_8));
    }

    /** The JSON value set for {@code m}, or null. */
    public byte[] value(Member m) {
        return values[m.ordinal()];
    }

    /**
     * The body the engine gets: {@code body} itself when only engine-internal members are removed (compacted in
     * place, as {@link EngineFieldStripper} does), otherwise a new buffer with every edit applied ({@code body} is
     * released). {@code body} holds the whole JSON object from its reader index, as the extractor saw it.
     */
    public ByteBuf apply(ByteBuf body, RequestFields f, ByteBufAllocator alloc) {
        if ((!isEmpty() || f.engineFieldRangeCount > 0) && body.readableBytes() != f.bodyLength) {
            // Every recorded offset is an offset of the body as parsed: an edit made elsewhere in between must go
            // through set() instead, or these splices would land at the wrong bytes.
            throw new IllegalStateException("the request body changed after it was parsed (" + f.bodyLength + " -> "
                + body.readableBytes() + " bytes): edit it through RequestEdits");
        }
        if (isEmpty()) {
            if (f.engineFieldRangeCount > 0) {
                EngineFieldStripper.strip(body, f);
            }
            return body;
        }
        ByteBuf out = spliced(body, f, alloc, f.engineFieldRangeCount > 0 ? EngineFieldStripper.removalRanges(body, f) : 0);
        body.release();
        return out;
    }

    /**
     * A new buffer holding {@code body} with every edit applied; {@code body} is left as it is (its reader index
     * too), so one client body can give several engine bodies (the two legs of a P/D request). {@code f} must
     * describe {@code body} as it is now ({@link #refreshIfEdited}).
     */
    public ByteBuf copy(ByteBuf body, RequestFields f, ByteBufAllocator alloc) {
        if (body.readableBytes() != f.bodyLength) {
            throw new IllegalStateException("the request body changed after it was parsed (" + f.bodyLength + " -> "
                + body.readableBytes() + " bytes): refresh its fields first");
        }
        if (f.engineFieldRangeCount > 0) {
            throw new IllegalStateException("the body still holds engine-internal members: strip them first");
        }
        return spliced(body, f, alloc, 0);
    }

    /** {@code removals}: how many of {@link RequestFields#engineFieldRanges} are ranges to remove (in body order). */
    private ByteBuf spliced(ByteBuf body, RequestFields f, ByteBufAllocator alloc, int removals) {
        int[] r = f.engineFieldRanges;
        // Splices in body order: [start, end) replaced by bytes (null = removed). Set members never overlap a removal
        // (engine-internal names are not editable members); additions go at the closing brace, after any removal
        // that ends there.
        int n = removals + count + renames + appendedCount;
        int[] starts = new int[n];
        int[] ends = new int[n];
        byte[][] with = new byte[n][];
        int k = 0;
        for (int i = 0; i < removals; i++, k++) {
            starts[k] = r[i * 2];
            ends[k] = r[i * 2 + 1];
        }
        for (Member m : Member.ALL) {
            byte[] newName = names[m.ordinal()];
            if (newName != null && f.has(m) && f.nameFrom[m.ordinal()] >= 0) {
                starts[k] = nameStart(body, f.nameFrom[m.ordinal()]);
                ends[k] = nameEnd(body, starts[k]);
                with[k] = newName;
                k++;
            }
            byte[] v = values[m.ordinal()];
            if (v == null) {
                continue;
            }
            if (f.has(m)) {
                starts[k] = f.valueStart(body, m);
                ends[k] = f.valueEnd[m.ordinal()];
                with[k] = v;
            } else {
                starts[k] = f.objectEnd;
                ends[k] = f.objectEnd;
                with[k] = member(m.jsonName.getBytes(StandardCharsets.US_ASCII), v);
            }
            k++;
        }
        for (int i = 0; i < appendedCount; i++, k++) {
            starts[k] = f.objectEnd; // after the members set above: the sort is stable
            ends[k] = f.objectEnd;
            with[k] = appended[i];
        }
        n = k; // a rename of a member the body lacks has no splice
        sortByStart(starts, ends, with, n);
        int size = body.readableBytes();
        for (int i = 0; i < n; i++) {
            size += (with[i] == null ? 0 : with[i].length) - (ends[i] - starts[i]);
        }
        int base = body.readerIndex();
        ByteBuf out = alloc.buffer(size);
        int from = 0;
        for (int i = 0; i < n; i++) {
            out.writeBytes(body, base + from, starts[i] - from);
            if (with[i] != null) {
                out.writeBytes(with[i]);
            }
            from = ends[i];
        }
        out.writeBytes(body, base + from, body.readableBytes() - from);
        return out;
    }

    /**
     * Re-reads {@code f} from {@code body} when the body changed since it was parsed, so that the recorded offsets
     * describe the bytes about to be spliced: engine-internal members were removed ({@link EngineFieldStripper}), or
     * an earlier stage edited it in place and its length moved (the context clamp). Only such requests pay a second
     * parse. Returns whether it re-read.
     */
    public static boolean refreshIfEdited(ByteBuf body, RequestFields f) {
        if (f.removedRangeCount == 0 && body.readableBytes() == f.bodyLength) {
            return false;
        }
        int prefixChars = f.textPrefixLimit; // the re-read keeps the text and the ids the first read kept
        int ids = f.promptIds.limit();
        boolean keepReportMode = f.reportModeXargKept; // the rule's choice, not the body's: it survives the re-read
        RequestFieldExtractor again = new RequestFieldExtractor(f).textPrefixChars(prefixChars).promptIdsKept(ids);
        again.body(body);
        again.finish();
        if (keepReportMode) {
            f.keepReportModeXarg();
        }
        return true;
    }

    /** The opening quote of a member name the parser located at {@code reported} (at or just past the quote). */
    private static int nameStart(ByteBuf body, int reported) {
        int base = body.readerIndex();
        int i = Math.min(reported, body.readableBytes() - 1);
        while (i > 0 && body.getByte(base + i) != '"') {
            i--;
        }
        return i;
    }

    /** Just past the closing quote of the name that opens at {@code quote} (escapes skipped). */
    private static int nameEnd(ByteBuf body, int quote) {
        int base = body.readerIndex();
        int i = quote + 1;
        while (i < body.readableBytes()) {
            byte b = body.getByte(base + i);
            if (b == '\\') {
                i += 2;
                continue;
            }
            if (b == '"') {
                return i + 1;
            }
            i++;
        }
        return i;
    }

    /** Insertion sort (a handful of splices); stable, so two additions at the closing brace keep their order. */
    private static void sortByStart(int[] starts, int[] ends, byte[][] with, int n) {
        for (int i = 1; i < n; i++) {
            int s = starts[i];
            int e = ends[i];
            byte[] w = with[i];
            int j = i - 1;
            while (j >= 0 && starts[j] > s) {
                starts[j + 1] = starts[j];
                ends[j + 1] = ends[j];
                with[j + 1] = with[j];
                j--;
            }
            starts[j + 1] = s;
            ends[j + 1] = e;
            with[j + 1] = w;
        }
    }

    /** {@code s} as a JSON string literal (quotes, backslashes and control characters escaped). */
    public static byte[] jsonString(String s) {
        StringBuilder b = new StringBuilder(s.length() + 2);
        JsonText.appendQuoted(b, s);
        return b.toString().getBytes(StandardCharsets.UTF_8);
    }

    /**
     * The request's {@code stream_options} with {@code include_usage: true} merged in: the client's object with that
     * member's value replaced (or the member added first), or {@code {"include_usage":true}} when the body has none
     * or {@code null}. The client's other members ({@code continuous_usage_stats}, ...) are kept as they are.
     */
    public static byte[] streamOptionsWithUsage(ByteBuf body, RequestFields f) {
        byte[] plain = "{\"include_usage\":true}".getBytes(StandardCharsets.US_ASCII);
        if (!f.has(Member.STREAM_OPTIONS) || !f.streamOptionsObject) {
            return plain;
        }
        int base = body.readerIndex();
        int s = f.valueStart(body, Member.STREAM_OPTIONS);
        int e = f.valueEnd[Member.STREAM_OPTIONS.ordinal()];
        ByteBuf out = io.netty.buffer.Unpooled.buffer(e - s + 24);
        try {
            if (f.includeUsageStart >= 0) {
                int us = RequestFields.exactStart(body, f.includeUsageStart);
                out.writeBytes(body, base + s, us - s).writeBytes("true".getBytes(StandardCharsets.US_ASCII))
                    .writeBytes(body, base + f.includeUsageEnd, e - f.includeUsageEnd);
            } else {
                out.writeByte('{').writeBytes("\"include_usage\":true".getBytes(StandardCharsets.US_ASCII));
                if (f.streamOptionsMembers > 0) {
                    out.writeByte(',');
                }
                out.writeBytes(body, base + s + 1, e - s - 1);
            }
            byte[] bytes = new byte[out.readableBytes()];
            out.readBytes(bytes);
            return bytes;
        } finally {
            out.release();
        }
    }
}
