package io.kvgate.dataplane.request;

import io.kvgate.dataplane.request.JsonLexer.JsonToken;
import java.util.Arrays;

/**
 * The token ids of a completions {@code prompt}, captured by the body stage while it scans the body. A rule that
 * routes on token ids then needs no second parse: before, the prompt stage built a Jackson tree of the whole body to
 * read the ids. With 1 KiB token-id prompts that parse was ~29% of the request's Java time and ~75% of its allocation
 * ({@code perf/results/kvprompt-2026-12-03.md}).
 *
 * <p>It keeps exactly what the tree reading did ({@code PromptPipeline.firstCompletionTokens} and
 * {@code longestCompletionPrompt}). Two shapes are captured: one list whose first element is an int ({@code [1,2]})
 * and a batch whose first element is a list ({@code [[1,2],[3]]}). The first prompt is that list, or the batch's
 * first list. It is <em>valid</em> when it is not empty and every element is an integer in {@code [0, 2^31)}; an
 * invalid first prompt is what the tree reading refused. The later lists of a batch are checked the same way, since
 * the context check reads them too. Every other shape (text, a text batch, an empty list) is {@link #NONE}, and the
 * prompt stage reads those from the tree as before.
 *
 * <p>At most {@link #limit} ids are kept: the most any rule of the routing table can use, which is 0 when no rule
 * routes on tokens. Owned by its {@link RequestFields}; reused per connection, but an array longer than
 * {@link #RETAINED_IDS} is dropped at {@link #reset}, so an idle connection does not hold a long prompt's array.
 * Event-loop only.
 */
public final class PromptIds {
    /** Not a captured shape: the prompt is read from the tree, as before. */
    public static final byte NONE = 0;
    /** A list of ids (its first element is an int). */
    public static final byte LIST = 1;
    /** A batch of lists (its first element is a list). */
    public static final byte BATCH = 2;

    /** The longest array kept across requests: 4 KiB. */
    static final int RETAINED_IDS = 1024;
    private static final int[] EMPTY = new int[0];

    private int[] ids = EMPTY;
    private int length;
    private int limit;
    private byte shape;
    /** Elements of the first prompt, valid or not (a count, whatever {@link #limit} kept). */
    private int firstSize;
    private boolean firstValid;
    private boolean restValid;
    /** Elements of the prompt array read so far, and elements of the batch list being read. */
    private int elements;
    private int listSize;

    /** Keeps at most {@code n} ids of the first prompt (0: none are kept and the shape is not read: {@link #NONE}). */
    void limit(int n) {
        limit = Math.max(0, n);
    }

    int limit() {
        return limit;
    }

    void reset() {
        startPrompt();
        limit = 0;
        if (ids.length > RETAINED_IDS) {
            ids = EMPTY;
        }
    }

    /** A top-level {@code prompt} starts (the last one wins): nothing of an earlier one counts. */
    void startPrompt() {
        shape = NONE;
        length = 0;
        firstSize = 0;
        firstValid = true;
        restValid = true;
        elements = 0;
        listSize = 0;
    }

    /**
     * A token that starts an element of the prompt array: a scalar, or the start of a container.
     *
     * @param id {@link JsonLexer#tokenId()} for an int, else -1
     */
    void element(JsonToken t, int id) {
        if (limit == 0) {
            return; // no rule reads the ids: the shape stays NONE
        }
        elements++;
        if (elements == 1) {
            shape = t == JsonToken.VALUE_NUMBER_INT ? LIST : t == JsonToken.START_ARRAY ? BATCH : NONE;
        }
        if (shape == LIST) {
            firstSize++;
            keep(id);
        } else if (shape == BATCH) {
            listSize = 0;
            if (elements > 1 && t != JsonToken.START_ARRAY) {
                restValid = false;
            }
        }
    }

    /** A token that starts an element of a list inside the prompt array (a batch's list). */
    void listElement(int id) {
        if (shape != BATCH) {
            return;
        }
        listSize++;
        if (elements == 1) {
            firstSize++;
            keep(id);
        } else if (id < 0) {
            restValid = false;
        }
    }

    /** A container inside the prompt array ended. */
    void endList() {
        if (shape == BATCH && listSize == 0) {
            if (elements == 1) {
                firstValid = false;
            } else {
                restValid = false;
            }
        }
    }

    private void keep(int id) {
        if (id < 0) {
            firstValid = false;
        } else if (length < limit) {
            if (length == ids.length) {
                ids = Arrays.copyOf(ids, Math.min(limit, Math.max(16, length * 2)));
            }
            ids[length++] = id;
        }
    }

    /** {@link #NONE}, {@link #LIST} or {@link #BATCH}. */
    public byte shape() {
        return shape;
    }

    /** The first prompt is a non-empty list of ids in {@code [0, 2^31)}. */
    public boolean firstValid() {
        return firstValid;
    }

    /** Every later list of a batch is valid too ({@code true} for a single list). */
    boolean restValid() {
        return restValid;
    }

    /**
     * Whether what was kept gives the tree reading's verdict: a captured shape, and either an invalid first prompt
     * (refused whatever else it holds) or its first {@code routedOn} ids kept and, for a context check that reads
     * every list of a batch ({@code readsRest}), valid later lists.
     */
    public boolean decides(long routedOn, boolean readsRest) {
        return shape != NONE && (!firstValid || keeps(routedOn) && (!readsRest || restValid));
    }

    /** Whether the first {@code n} ids of the first prompt were kept (all of them when it is shorter). */
    public boolean keeps(long n) {
        return Math.min(firstSize, n) <= length;
    }

    /** A copy of the first prompt's first {@code n} ids ({@link #keeps} must hold), for the routing stage. */
    public int[] first(long n) {
        return Arrays.copyOf(ids, (int) Math.min(firstSize, n));
    }
}
