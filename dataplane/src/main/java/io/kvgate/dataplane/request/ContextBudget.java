package io.kvgate.dataplane.request;

import io.netty.buffer.ByteBuf;
import java.nio.charset.StandardCharsets;

/**
 * The context-length contract of issue #13 item 1, the same for every engine: a request whose prompt and completion
 * budget do not fit the rule's context length gets OpenAI's 400 {@code context_length_exceeded} before any engine
 * sees it ({@code on_context_overflow: reject}), or its budget lowered to what fits ({@code clamp}, what vLLM does on
 * its own: {@code max_tokens = context - prompt}). The engines disagree on exactly this:
 * <ul>
 *   <li>vLLM (serving {@code get_max_tokens}) clamps {@code min(requested, context - prompt)} silently and refuses a
 *       prompt that leaves no room (prompt ≥ context);</li>
 *   <li>SGLang ({@code TokenizerManager._validate_one_request}) refuses {@code prompt + max_new_tokens >= context} —
 *       one token stricter than vLLM — and a prompt ≥ context; without a budget its scheduler fills the rest.</li>
 * </ul>
 * Both read {@code max_completion_tokens} before {@code max_tokens} on chat; completions has only {@code max_tokens},
 * which both default to 16. A request without a budget is left as vLLM would serve it: chat fills the remaining
 * context on both engines, a completions prompt too long for the default 16 gets its budget set where SGLang would
 * refuse it. Stateless; event-loop only for {@link #lowerBudget} (it edits the request's buffer).
 */
public final class ContextBudget {
    private ContextBudget() {}

    /** {@code max_tokens} both engines' CompletionRequest default to (vLLM and SGLang protocol.py). */
    public static final int COMPLETIONS_DEFAULT_MAX_TOKENS = 16;
    /** {@link #requested}: the client sent no completion budget (or null). */
    public static final int ABSENT = -1;
    /** {@link #requested}: the budget is there but not an integer the gateway read (the engine judges it). */
    public static final int UNREADABLE = -2;

    /**
     * What the gateway does with one request: refuse it ({@link #problem}), set its completion budget to
     * {@link #budget} (above 0), or neither (send it as it is).
     */
    public record Verdict(Problem problem, int budget) {
        /** Send the request unchanged; shared, no allocation per request. */
        public static final Verdict PASS = new Verdict(null, 0);

        public boolean passes() {
            return problem == null && budget == 0;
        }
    }

    /**
     * The completion budget the engines read from a request (validated ≥ 1 by the body stage): chat's
     * {@code max_completion_tokens} when given, else {@code max_tokens}; completions' {@code max_tokens} only (their
     * request models have no other field). {@link #ABSENT} or {@link #UNREADABLE} otherwise.
     */
    public static int requested(RequestFields f, boolean chat) {
        if (chat) {
            if (f.maxCompletionTokensUnreadable) {
                return UNREADABLE;
            }
            if (f.hasMaxCompletionTokens) {
                return f.maxCompletionTokens;
            }
        }
        if (f.maxTokensUnreadable) {
            return UNREADABLE;
        }
        return f.hasMaxTokens ? f.maxTokens : ABSENT;
    }

    /**
     * The verdict for one request.
     *
     * @param contextLen   the rule's context length in tokens (above 0)
     * @param promptTokens the longest prompt's token count, or (when {@code exact} is false) a count it exceeds
     * @param requested    {@link #requested}'s value
     * @param refusesExactFill the rule's engine refuses {@code prompt + budget == context} (SGLang's {@code >=}), so
     *                     a budget sent there leaves one token of the context free
     * @param clamp        {@code on_context_overflow: clamp}
     */
    public static Verdict decide(int contextLen, int promptTokens, boolean exact, int requested, boolean chat,
                                 boolean refusesExactFill, boolean clamp) {
        if (exact ? promptTokens >= contextLen : promptTokens + 1 >= contextLen) {
            // No budget can help: both engines refuse a prompt that leaves no room (vLLM: max_tokens would be 0).
            return new Verdict(overflow(contextLen, promptTokens, exact, requested > 0 ? requested : ABSENT, chat), 0);
        }
        if (!exact || requested == UNREADABLE || (requested == ABSENT && chat)) {
            return Verdict.PASS; // a bound that proves nothing, a budget the engine reads itself, or chat's fill-the-rest
        }
        boolean implicit = requested == ABSENT;
        int asked = implicit ? COMPLETIONS_DEFAULT_MAX_TOKENS : requested;
        if ((long) promptTokens + asked > contextLen && !implicit && !clamp) {
            return new Verdict(overflow(contextLen, promptTokens, true, asked, chat), 0);
        }
        int room = contextLen - promptTokens - (refusesExactFill ? 1 : 0);
        if (asked <= room || room < 1) {
            // It fits as sent; or (SGLang, prompt = context - 1) nothing fits there and its own 400 is the answer.
            return Verdict.PASS;
        }
        return new Verdict(null, room);
    }

    /**
     * OpenAI's 400 for a request over the context length. {@code param} is {@code messages} (chat) or {@code prompt}
     * (completions), as OpenAI names it and as the engines' own overflow errors are normalised
     * ({@code EngineErrors}).
     *
     * @param completion the budget the client asked for, or {@link #ABSENT}: then the prompt alone is named
     */
    public static Problem overflow(int contextLen, int promptTokens, boolean exact, int completion, boolean chat) {
        String where = chat ? "messages" : "prompt";
        String prompt = exact ? Integer.toString(promptTokens) : "more than " + promptTokens;
        String message;
        if (completion == ABSENT) {
            message = "This model's maximum context length is " + contextLen + " tokens. However, your " + where
                + " resulted in " + prompt + " tokens. Please reduce the length of the " + where + ".";
        } else {
            long total = (long) promptTokens + completion;
            message = "This model's maximum context length is " + contextLen + " tokens. However, you requested "
                + (exact ? "" : "more than ") + total + " tokens (" + prompt + " in the " + where + ", " + completion
                + " in the completion). Please reduce the length of the " + where + " or completion.";
        }
        return new Problem(where, "context_length_exceeded", message, "context_length_exceeded");
    }

    /**
     * Sets the request's completion budget to {@code budget}, in place: every top-level integer
     * {@code max_tokens} / {@code max_completion_tokens} above it is rewritten (duplicates included, so whichever
     * occurrence the engine reads is lowered; a lower budget only ever has fewer digits, so the body shrinks and the
     * rest moves left within its own buffer), or, when the client sent none, {@code "max_tokens":budget} is added as
     * the object's last member (which the engines' JSON reads last, so it wins over a {@code null}). Runs after
     * {@link EngineFieldStripper#strip}: the offsets {@code f} recorded are mapped past what it removed.
     *
     * @param maxBodyBytes the body's size limit ({@code limits.max_body_bytes})
     * @return the edited body: {@code body} itself, or — when the member had to be added and the buffer cannot grow
     *         (the read buffer's slice the front door kept) — a larger copy, {@code body} released; null when nothing
     *         could be written (adding the member would pass the size limit): the request then goes as it is and the
     *         engine judges it
     */
    public static ByteBuf lowerBudget(ByteBuf body, RequestFields f, int budget, boolean insert, int maxBodyBytes) {
        if (insert) {
            byte[] member = (",\"max_tokens\":" + budget).getBytes(StandardCharsets.US_ASCII);
            if (f.objectEnd < 0 || (long) body.readableBytes() + member.length > maxBodyBytes) {
                return null;
            }
            if (body.maxWritableBytes() < member.length) {
                ByteBuf roomy = body.alloc().buffer(body.readableBytes() + member.length, maxBodyBytes);
                roomy.writeBytes(body, body.readerIndex(), body.readableBytes());
                body.release();
                body = roomy;
            }
            int base = body.readerIndex();
            int at = base + EngineFieldStripper.shifted(f, f.objectEnd);
            byte[] tail = new byte[body.writerIndex() - at]; // the closing brace and any whitespace after it
            body.getBytes(at, tail);
            body.writerIndex(at);
            body.writeBytes(member).writeBytes(tail);
            f.hasMaxTokens = true;
            f.maxTokens = budget;
            return body;
        }
        int base = body.readerIndex();
        byte[] digits = Integer.toString(budget).getBytes(StandardCharsets.US_ASCII);
        int removed = 0; // bytes the edits so far took out: later offsets move left by it
        boolean edited = false;
        for (int k = 0; k < f.budgetValueRangeCount; k++) {
            int start = numberStart(body, base + EngineFieldStripper.shifted(f, f.budgetValueRanges[k * 2]) - removed);
            int end = start + (f.budgetValueRanges[k * 2 + 1] - f.budgetValueRanges[k * 2]);
            if (!above(body, start, end, budget)) {
                continue;
            }
            body.setBytes(start, digits);
            int gap = (end - start) - digits.length;
            if (gap > 0) {
                int keep = body.writerIndex() - end;
                body.setBytes(start + digits.length, body, end, keep); // moves left: safe within one buffer
                body.writerIndex(body.writerIndex() - gap);
                removed += gap;
            }
            edited = true;
        }
        if (edited) {
            f.maxTokens = Math.min(f.maxTokens, budget);
            f.maxCompletionTokens = Math.min(f.maxCompletionTokens, budget);
        }
        return edited ? body : null;
    }

    /**
     * The first byte of the JSON integer around {@code at}: the non-blocking parser locates a number token at or just
     * past its first character, and what precedes a member's value is ':' or whitespace, never a digit.
     */
    private static int numberStart(ByteBuf body, int at) {
        int i = at;
        while (i > body.readerIndex()) {
            byte b = body.getByte(i - 1);
            if ((b < '0' || b > '9') && b != '-') {
                break;
            }
            i--;
        }
        return i;
    }

    /** Whether the JSON integer in {@code [start, end)} is above {@code budget} (a negative one never is). */
    private static boolean above(ByteBuf body, int start, int end, int budget) {
        if (body.getByte(start) == '-') {
            return false;
        }
        if (end - start > 10) {
            return true; // more digits than any int
        }
        long v = 0;
        for (int i = start; i < end; i++) {
            v = v * 10 + (body.getByte(i) - '0');
        }
        return v > budget;
    }
}
