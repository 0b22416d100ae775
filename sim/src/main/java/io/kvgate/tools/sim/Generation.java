package io.kvgate.tools.sim;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http.DefaultHttpContent;
import io.netty.handler.codec.http.DefaultHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * One admitted generation: produces tokens on event-loop timers (first token after the latency model's TTFT,
 * then one step per inter-token latency) and writes them as SSE events, one flushed event per token and choice,
 * or as one JSON body at the end. Event-loop confined; never blocks.
 */
final class Generation {
    static final byte[] DONE = "data: [DONE]\n\n".getBytes(StandardCharsets.US_ASCII);
    private static final JsonNodeFactory JSON = JsonNodeFactory.instance;

    /** One output sequence (a choice). */
    static final class Seq {
        final int index;
        final int promptIndex;
        final long seed;
        int limit;
        boolean natural;
        final StringBuilder text = new StringBuilder();
        int tokens;
        int emitted;
        String finishReason;
        String stopReason;
        boolean finished;
        boolean finishSent;
        /** TensorRT-LLM context server: cut at the first token for a KV hand-off (its answer says not_finished). */
        boolean handoff;
        /** Greedy: the context so far (prompt + generated words, {@link TextGenerator}); 0 unused when sampled. */
        boolean greedy;
        long context;
        boolean blankFirst;
        /** Greedy without max_tokens: EOS comes from the context ({@link TextGenerator#greedyEos}). */
        boolean greedyEos;
        /** The ids of the generated tokens ({@code return_token_ids}), and how many went out in chunks. */
        final java.util.ArrayList<Integer> ids = new java.util.ArrayList<>();
        int idsSent;
        boolean promptIdsSent;

        Seq(int index, int promptIndex, long seed, int limit, boolean natural) {
            this.index = index;
            this.promptIndex = promptIndex;
            this.seed = seed;
            this.limit = limit;
            this.natural = natural;
        }
    }

    final EngineSimulator engine;
    final ChannelHandlerContext ctx;
    final CompletionRequest req;
    final String requestId;
    final String id;
    final long created;
    final String model;
    final boolean keepAlive;
    final Seq[] seqs;
    final int promptTokens;
    final int rank;
    int cachedTokens;
    long plannedTtftNs;
    int dieAfterChunks = -1;
    int errorAfterChunks = -1;
    /** Token faults (issue #41): close, go silent, or send the error frame once this many tokens were generated. */
    int dieAfterTokens = -1;
    int stallAfterTokens = -1;
    int errorAfterTokens = -1;
    /** Fault: added to the first token's delay. */
    long slowFirstTokenNs;
    /** Fault: the stream ends cleanly (chunked terminator) without {@code data: [DONE]}. */
    boolean endWithoutDone;
    /** Extra top-level field for the non-streaming body (vLLM prefill: kv_transfer_params). */
    JsonNode kvTransferParamsOut;
    /** vLLM P/D: this is a prefill leg (do_remote_decode) whose answer carries kv_transfer_params. */
    boolean pdPrefill;
    /** TensorRT-LLM P/D: a context_only request whose answer carries choices[0].disaggregated_params. */
    boolean trtllmContext;
    /** vLLM P/D decode: blocks pulled from the prefill. */
    int transferredBlocks;
    /** P/D decode: prompt tokens whose KV arrived from the prefill (no prefill time here). */
    int transferredTokens;
    /** SGLang P/D: bootstrap room, -1 when none. */
    long pdRoom = -1;
    /** llama.cpp: the slot it runs on, -1 before. */
    int slot = -1;
    /** True once admitted to a running slot. */
    boolean started;
    private boolean completed;

    /** Prefix-cache blocks this generation holds (one lease per prompt). */
    final java.util.ArrayList<PrefixCache.Lease> leases = new java.util.ArrayList<>(1);
    /** Called once when the generation ends (any way): releases cache references, P/D state. */
    Runnable onEnd;

    private int chunksWritten;
    private boolean headersSent;
    private boolean roleSent;
    private boolean ended;
    private ScheduledFuture<?> timer;
    private final int maxStopLen;

    Generation(EngineSimulator engine, ChannelHandlerContext ctx, CompletionRequest req, String requestId,
               boolean keepAlive, int rank) {
        this.engine = engine;
        this.ctx = ctx;
        this.req = req;
        this.requestId = requestId;
        this.keepAlive = keepAlive;
        this.rank = rank;
        SimulatorConfig c = engine.config;
        this.id = (req.chat ? "chatcmpl-" : "cmpl-") + requestId;
        this.created = c.epochSeconds.getAsLong();
        this.model = req.responseModel(c);
        List<int[]> prompts = req.prompts;
        this.seqs = new Seq[prompts.size() * req.n];
        int total = 0;
        for (int p = 0; p < prompts.size(); p++) {
            int[] tokens = prompts.get(p);
            total += tokens.length;
            long promptHash = TextGenerator.hashTokens(tokens);
            for (int i = 0; i < req.n; i++) {
                // Greedy decoding ignores the seed and the choice: n greedy choices are identical (SGLang).
                long seed = req.greedy ? TextGenerator.sequenceSeed(c.seed, 0, promptHash, 0)
                    : TextGenerator.sequenceSeed(c.seed, req.requestSeed, promptHash, i);
                int max = req.maxTokens[p];
                boolean natural = max < 0;
                int limit = natural ? TextGenerator.naturalLength(seed, c.naturalMinTokens, c.naturalMaxTokens) : max;
                if (natural && limit > req.contextRoom[p]) {
                    // no max_tokens: the answer runs into the context end before its EOS
                    limit = req.contextRoom[p];
                    natural = false;
                }
                Seq seq = new Seq(p * req.n + i, p, seed, limit, natural);
                if (req.greedy) {
                    seq.greedy = true;
                    seq.context = req.greedyContext[p];
                    seq.blankFirst = req.blankFirst[p];
                    if (max < 0) {
                        // The context decides EOS, so a continued run ends where the uninterrupted one did; the
                        // context end still cuts it ("length").
                        seq.limit = req.contextRoom[p];
                        seq.natural = false;
                        seq.greedyEos = true;
                    }
                }
                if (limit == 0) {
                    // SGLang accepts max_tokens 0: the prompt is processed, nothing is generated.
                    seq.finished = true;
                    seq.finishReason = "length";
                }
                seqs[p * req.n + i] = seq;
            }
        }
        this.promptTokens = total;
        int m = 0;
        for (String s : req.stop) {
            m = Math.max(m, s.length());
        }
        this.maxStopLen = m;
    }

    /**
     * TensorRT-LLM context server ({@code context_only}): only the first token is produced here. A sequence that would
     * go on is cut for the hand-off and answers {@code finish_reason: "not_finished"}; one that ends at its first
     * token anyway answers its own reason: {@code length} ({@code max_tokens} 1, the hand-off is still set up) or
     * {@code stop} (EOS or a stop string: no hand-off).
     */
    void contextOnly() {
        for (Seq s : seqs) {
            if (s.limit > 1) {
                s.limit = 1;
                s.natural = false;
                s.handoff = true;
            }
        }
    }

    /** SGLang prefill server: only the first token is produced here; decoding happens on the decode server. */
    void limitToFirstToken() {
        for (Seq s : seqs) {
            s.limit = 1;
            s.natural = false;
        }
    }

    boolean completedNormally() {
        return completed;
    }

    int completionTokens() {
        int c = 0;
        for (Seq s : seqs) {
            c += s.tokens;
        }
        return c;
    }

    /** Admitted: send stream headers at once (the engines start the response before the first token). */
    void start(long firstTokenDelayNs) {
        firstTokenDelayNs += slowFirstTokenNs;
        plannedTtftNs = firstTokenDelayNs;
        if (!ctx.channel().isActive()) {
            end();
            return;
        }
        if (req.stream) {
            HttpResponse head = new DefaultHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK);
            head.headers().set(HttpHeaderNames.CONTENT_TYPE, "text/event-stream; charset=utf-8");
            head.headers().set(HttpHeaderNames.TRANSFER_ENCODING, HttpHeaderValues.CHUNKED);
            head.headers().set("x-request-id", requestId);
            HttpUtil.setKeepAlive(head, keepAlive);
            ctx.writeAndFlush(head);
            headersSent = true;
        }
        timer = ctx.executor().schedule(this::step, firstTokenDelayNs, TimeUnit.NANOSECONDS);
    }

    private void step() {
        timer = null;
        if (ended) {
            return;
        }
        if (!ctx.channel().isActive()) {
            engine.stats.inc("aborted_by_client");
            end();
            return;
        }
        if (tokenFault()) {
            return;
        }
        boolean allDone = true;
        for (Seq s : seqs) {
            if (!s.finished) {
                advance(s);
            }
            allDone &= s.finished;
        }
        if (req.stream) {
            if (!writeStreamStep()) {
                return;
            }
            if (allDone) {
                finishStream();
                return;
            }
        } else if (allDone) {
            finishJson();
            return;
        }
        timer = ctx.executor().schedule(this::step, engine.latency.interTokenDelayNs(), TimeUnit.NANOSECONDS);
    }

    /**
     * The token faults, checked before each step: once the first sequence generated the fault's token count, the
     * connection is closed (die), nothing more is sent while it stays open (stall: the generation holds its slot
     * until the client leaves), or the dialect's in-stream error frame ends the stream. True when the step must not run.
     */
    private boolean tokenFault() {
        int done = seqs.length == 0 ? 0 : seqs[0].tokens;
        if (dieAfterTokens >= 0 && done >= dieAfterTokens) {
            engine.stats.inc("faults_died_after_tokens");
            ctx.channel().close();
            end();
            return true;
        }
        if (stallAfterTokens >= 0 && done >= stallAfterTokens) {
            engine.stats.inc("faults_stalled_after_tokens");
            ctx.flush();
            return true; // no timer: silent until the client closes (SimHttpHandler ends the generation then)
        }
        if (errorAfterTokens >= 0 && done >= errorAfterTokens && req.stream) {
            errorAfterChunks = 0;
            engine.stats.inc("faults_error_after_tokens");
            writeEvent(null); // the mid-stream error frame path
            return true;
        }
        return false;
    }

    private void advance(Seq s) {
        int before = s.text.length();
        String token;
        if (s.greedy) {
            String word = TextGenerator.greedyWord(s.context);
            token = s.tokens == 0 && !s.blankFirst ? word : " " + word;
            s.context = TextGenerator.greedyNext(s.context, WordTokenizer.wordKey(word));
        } else {
            token = TextGenerator.token(s.seed, s.tokens);
        }
        s.text.append(token);
        if (req.returnTokenIds) {
            s.ids.add(WordTokenizer.tokenId(token));
        }
        s.tokens++;
        if (maxStopLen > 0) {
            int from = Math.max(0, before - maxStopLen + 1);
            int best = -1;
            String hit = null;
            for (String stop : req.stop) {
                int at = s.text.indexOf(stop, from);
                if (at >= 0 && (best < 0 || at < best)) {
                    best = at;
                    hit = stop;
                }
            }
            if (hit != null) {
                // Both engines trim the stop string unless asked to keep it.
                s.text.setLength(req.keepStop ? best + hit.length() : best);
                s.finished = true;
                s.finishReason = "stop";
                s.stopReason = hit;
                return;
            }
        }
        if (s.tokens >= s.limit) {
            s.finished = true;
            s.finishReason = s.handoff ? "not_finished" : s.natural ? "stop" : "length";
        } else if (s.greedyEos && TextGenerator.greedyEos(s.context,
            (engine.config.naturalMinTokens + engine.config.naturalMaxTokens + 1) / 2)) {
            s.finished = true;
            s.finishReason = "stop";
        }
    }

    /** Characters that may be the start of a stop string: held back until the next token decides. */
    private int holdback(Seq s) {
        if (s.finished || maxStopLen == 0) {
            return 0;
        }
        int best = 0;
        for (String stop : req.stop) {
            for (int k = Math.min(stop.length() - 1, s.text.length()); k > best; k--) {
                if (CharSequence.compare(s.text.subSequence(s.text.length() - k, s.text.length()), stop.substring(0, k)) == 0) {
                    best = k;
                    break;
                }
            }
        }
        return best;
    }

    private boolean writeStreamStep() {
        if (req.chat && !roleSent) {
            roleSent = true;
            for (Seq s : seqs) {
                ObjectNode roleChunk = chunk(s, "", true, null);
                if (req.returnTokenIds) {
                    roleChunk.set("prompt_token_ids", idArray(req.prompts.get(s.promptIndex))); // vLLM: the first chunk ever
                }
                if (!writeEvent(roleChunk)) {
                    return false;
                }
            }
        }
        // One chunk behind, so the step's last chunk is known: llama-server puts its timings on its last chunk.
        ObjectNode pending = null;
        boolean allFinished = true;
        for (Seq s : seqs) {
            allFinished &= s.finished;
            if (s.finishSent) {
                continue;
            }
            int visible = s.text.length() - holdback(s);
            String delta = visible > s.emitted ? s.text.substring(s.emitted, visible) : "";
            if (delta.isEmpty() && !s.finished) {
                continue;
            }
            s.emitted = Math.max(s.emitted, visible);
            if (s.finished) {
                s.finishSent = true;
            }
            if (pending != null && !writeEvent(pending)) {
                return false;
            }
            pending = chunk(s, delta, false, s.finished ? s.finishReason : null);
        }
        if (pending != null && allFinished && !req.includeUsage && engine.config.dialect == Dialect.LLAMACPP) {
            pending.set("timings", timings()); // to_json_oaicompat_chat_stream: deltas.back()
        }
        return pending == null || writeEvent(pending);
    }

    /**
     * llama-server's {@code result_timings::to_json} (without speculative drafts): cached, evaluated and predicted
     * token counts with their times, from the latency model's per-token costs.
     */
    private ObjectNode timings() {
        ObjectNode t = JSON.objectNode();
        int evaluated = Math.max(0, promptTokens - cachedTokens);
        int predicted = completionTokens();
        double promptMs = evaluated * engine.config.prefillUsPerToken / 1000.0;
        double predictedMs = (double) predicted * engine.config.itlMs;
        t.put("cache_n", cachedTokens);
        t.put("prompt_n", evaluated);
        t.put("prompt_ms", promptMs);
        t.put("prompt_per_token_ms", evaluated == 0 ? 0.0 : promptMs / evaluated);
        t.put("prompt_per_second", promptMs == 0 ? 0.0 : 1000.0 * evaluated / promptMs);
        t.put("predicted_n", predicted);
        t.put("predicted_ms", predictedMs);
        t.put("predicted_per_token_ms", predicted == 0 ? 0.0 : predictedMs / predicted);
        t.put("predicted_per_second", predictedMs == 0 ? 0.0 : 1000.0 * predicted / predictedMs);
        return t;
    }

    private static ArrayNode idArray(int[] ids) {
        ArrayNode a = JSON.arrayNode(ids.length);
        for (int t : ids) {
            a.add(t);
        }
        return a;
    }

    /** Writes one SSE event; applies the mid-stream faults. Returns false when the generation ended. */
    private boolean writeEvent(ObjectNode event) {
        if (dieAfterChunks >= 0 && chunksWritten >= dieAfterChunks) {
            engine.stats.inc("faults_died_mid_stream");
            ctx.channel().close();
            end();
            return false;
        }
        if (errorAfterChunks >= 0 && chunksWritten >= errorAfterChunks) {
            engine.stats.inc("faults_error_mid_stream");
            ObjectNode frame = engine.replies.streamErrorFrame("simulated engine failure mid-stream");
            if (frame == null) {
                // trtllm-serve's stream generators catch nothing: the response is aborted mid-body.
                ctx.channel().close();
                end();
                return false;
            }
            ctx.write(new DefaultHttpContent(sse(frame)));
            if (engine.config.dialect != Dialect.LLAMACPP) {
                // llama-server ends the stream after its error event, without [DONE]
                ctx.write(new DefaultHttpContent(Unpooled.wrappedBuffer(DONE)));
            }
            writeLast();
            return false;
        }
        chunksWritten++;
        ctx.writeAndFlush(new DefaultHttpContent(sse(event)));
        return true;
    }

    private ByteBuf sse(JsonNode event) {
        byte[] json = SimReplies.bytes(event);
        ByteBuf buf = ctx.alloc().buffer(json.length + 8);
        buf.writeBytes(EngineSimulator.DATA_PREFIX).writeBytes(json).writeByte('\n').writeByte('\n');
        return buf;
    }

    private void finishStream() {
        if (req.includeUsage) {
            ObjectNode u = header(req.chat ? "chat.completion.chunk" : "text_completion");
            u.putArray("choices");
            u.set("usage", usage());
            if (engine.config.dialect == Dialect.LLAMACPP) {
                u.set("timings", timings()); // the usage chunk is deltas.back() now
            }
            if (!writeEvent(u)) {
                return;
            }
        }
        if (endWithoutDone) {
            engine.stats.inc("faults_end_without_done");
        } else {
            ctx.write(new DefaultHttpContent(Unpooled.wrappedBuffer(DONE)));
        }
        completed = true;
        writeLast();
    }

    private void writeLast() {
        var f = ctx.writeAndFlush(LastHttpContent.EMPTY_LAST_CONTENT);
        if (!keepAlive) {
            f.addListener(ChannelFutureListener.CLOSE);
        }
        end();
    }

    private void finishJson() {
        if (dieAfterChunks >= 0) {
            engine.stats.inc("faults_died_mid_stream");
            ctx.channel().close();
            end();
            return;
        }
        Dialect dialect = engine.config.dialect;
        boolean vllm = dialect.vllmLike();
        ObjectNode body = header(req.chat ? "chat.completion" : "text_completion");
        ArrayNode choices = body.putArray("choices");
        for (Seq s : seqs) {
            ObjectNode c = choices.addObject();
            c.put("index", s.index);
            if (req.chat) {
                ObjectNode m = c.putObject("message");
                m.put("role", "assistant");
                m.put("content", s.text.toString());
                if (vllm) {
                    m.putArray("tool_calls");
                } else {
                    m.putNull("reasoning_content");
                    m.putNull("tool_calls");
                }
            } else {
                c.put("text", s.text.toString());
            }
            c.putNull("logprobs");
            c.put("finish_reason", s.finishReason);
            putStopReason(c, s);
            if (req.returnTokenIds) {
                ArrayNode ids = c.putArray("token_ids");
                s.ids.forEach(ids::add);
                if (!req.chat) {
                    c.set("prompt_token_ids", idArray(req.prompts.get(s.promptIndex)));
                }
            }
            if (dialect == Dialect.VLLM && !req.chat) {
                c.putNull("prompt_logprobs");
            }
            if (trtllmContext && s.index == 0) {
                c.set("disaggregated_params", engine.pd().trtllmContextParams(this, firstTokenId(s), !"stop".equals(s.finishReason)));
            }
        }
        body.set("usage", usage());
        if (req.returnTokenIds && req.chat) {
            body.set("prompt_token_ids", idArray(req.prompts.get(0)));
        }
        if (trtllmContext) {
            var ids = body.putArray("prompt_token_ids");
            for (int t : req.prompts.get(0)) {
                ids.add(t);
            }
        }
        if (dialect == Dialect.VLLM) {
            if (req.chat) {
                body.putNull("prompt_logprobs");
            }
            if (kvTransferParamsOut != null) {
                body.set("kv_transfer_params", kvTransferParamsOut);
            } else {
                body.putNull("kv_transfer_params");
            }
        }
        engine.replies.json(ctx, HttpResponseStatus.OK, body, requestId, keepAlive);
        completed = true;
        end();
    }

    private void putStopReason(ObjectNode c, Seq s) {
        String field = engine.config.dialect.vllmLike() ? "stop_reason" : "matched_stop";
        if (s.stopReason != null) {
            c.put(field, s.stopReason);
        } else {
            c.putNull(field);
        }
    }

    private ObjectNode header(String object) {
        ObjectNode o = JSON.objectNode();
        o.put("id", id);
        o.put("object", object);
        o.put("created", created);
        o.put("model", model);
        return o;
    }

    private ObjectNode chunk(Seq s, String delta, boolean role, String finishReason) {
        boolean vllm = engine.config.dialect.vllmLike();
        ObjectNode o = header(req.chat ? "chat.completion.chunk" : "text_completion");
        ObjectNode c = o.putArray("choices").addObject();
        c.put("index", s.index);
        if (req.chat) {
            ObjectNode d = c.putObject("delta");
            if (vllm) {
                if (role) {
                    d.put("role", "assistant");
                }
                d.put("content", delta);
            } else {
                if (role) {
                    d.put("role", "assistant");
                } else {
                    d.putNull("role");
                }
                d.put("content", delta);
                d.putNull("reasoning_content");
                d.putNull("tool_calls");
            }
        } else {
            c.put("text", delta);
        }
        c.putNull("logprobs");
        if (req.returnTokenIds && !role) {
            // vLLM: each choice chunk carries the ids of the tokens it adds; completions' first one the prompt's too
            if (!req.chat && s.idsSent == 0 && !s.promptIdsSent) {
                s.promptIdsSent = true;
                c.set("prompt_token_ids", idArray(req.prompts.get(s.promptIndex)));
            }
            ArrayNode ids = c.putArray("token_ids");
            for (int i = s.idsSent; i < s.ids.size(); i++) {
                ids.add(s.ids.get(i));
            }
            s.idsSent = s.ids.size();
        }
        if (finishReason != null) {
            c.put("finish_reason", finishReason);
        } else {
            c.putNull("finish_reason");
        }
        if (!vllm || !req.chat || finishReason != null) {
            putStopReason(c, s);
        }
        if (req.continuousUsage) {
            o.set("usage", usage());
        } else if (!vllm) {
            o.putNull("usage");
        }
        return o;
    }

    /** A stable token id for the sequence's first generated word (the simulator generates words, not ids). */
    private static int firstTokenId(Seq s) {
        String first = s.text.toString().strip().split(" ", 2)[0];
        return Math.floorMod(first.hashCode(), 150_000);
    }

    ObjectNode usage() {
        ObjectNode u = JSON.objectNode();
        int completion = completionTokens();
        u.put("prompt_tokens", promptTokens);
        u.put("total_tokens", promptTokens + completion);
        u.put("completion_tokens", completion);
        u.putObject("prompt_tokens_details").put("cached_tokens", cachedTokens);
        return u;
    }

    /** Ends the generation exactly once: cancels the timer, releases the slot and resources. */
    void end() {
        if (ended) {
            return;
        }
        ended = true;
        if (timer != null) {
            timer.cancel(false);
            timer = null;
        }
        if (onEnd != null) {
            onEnd.run();
        }
        engine.onGenerationEnd(this);
    }

    boolean headersSent() {
        return headersSent;
    }

    boolean ended() {
        return ended;
    }
}
