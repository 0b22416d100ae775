package io.kvgate.tools.bench;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * The request bodies of a run, deterministic for a seed: the body of arrival {@code seq} depends only on the
 * configuration, the seed and {@code seq} (multi-turn: on the conversation and turn, plus the replies the server
 * gave, which are part of the history by design).
 *
 * <ul>
 *   <li><b>fixed</b>: one body of exactly {@code --payload-bytes} bytes, sent every time (the data-path cost of a
 *       request of that size; nothing varies, so a cache-aware server sees a 100% hit after the first).</li>
 *   <li><b>shared-prefix</b>: {@code --groups} system prompts of {@code --system-tokens} words; each request picks a
 *       group at random and adds a fresh question of {@code --question-tokens} words (the KV-reuse workload).</li>
 *   <li><b>multi-turn</b>: {@code --conversations} conversations of {@code --turns} turns; turn k sends the system
 *       prompt, every earlier user message and the assistant's actual earlier replies, then a new user message of
 *       {@code --question-tokens} words. A conversation has at most one request outstanding; when it finishes its
 *       last turn (or a turn fails) it restarts as a new conversation.</li>
 *   <li><b>random</b>: a prompt of a random number of words in [{@code --random-min-tokens},
 *       {@code --random-max-tokens}], uniform or ({@code --random-distribution log-uniform}) log-uniform: mixed
 *       prompt lengths, mostly short with a long tail, as a token-aware load signal needs.</li>
 * </ul>
 * Text prompts are words of the {@link Vocabulary}; with {@code --token-ids} prompts are token-id arrays on
 * {@code /v1/completions}.
 *
 * <p>Threading: single owner (the driver's event loop).
 */
public abstract sealed class PromptWorkload {
    private static final JsonFactory JSON = new JsonFactory();

    protected final BenchConfig config;

    protected PromptWorkload(BenchConfig config) {
        this.config = config;
    }

    /** A fresh workload for one target run (the same seed gives the same bodies for every target). */
    public static PromptWorkload create(BenchConfig config) {
        return switch (config.workload()) {
            case FIXED -> new Fixed(config);
            case SHARED_PREFIX -> new SharedPrefix(config);
            case MULTI_TURN -> new MultiTurn(config);
            case RANDOM -> new RandomPrompts(config);
        };
    }

    /** The body for arrival {@code seq}, or null when nothing can be sent now (every conversation is waiting). */
    public abstract BenchRequest next(long seq);

    /** A request handed out by {@link #next} finished; {@code reply} is the generated text when {@link #wantsReply()}. */
    public void onComplete(BenchRequest request, boolean ok, CharSequence reply) {}

    /** True when {@link #next} always returns the same instance (the driver then encodes it once). */
    public boolean reusesRequests() {
        return false;
    }

    /** True when {@link #onComplete} needs the generated text (the driver then collects it). */
    public boolean wantsReply() {
        return false;
    }

    /** One chat message. */
    protected record Message(String role, String content) {}

    /** Encodes a request body; {@code messages} for chat, or a text/token-id prompt for completions. */
    protected byte[] encode(List<Message> messages, String textPrompt, int[] tokenPrompt) {
        return encode(messages, textPrompt, tokenPrompt, null);
    }

    /** As above, with {@code user} (the OpenAI end-user id, a gateway's session key) when not null. */
    protected byte[] encode(List<Message> messages, String textPrompt, int[] tokenPrompt, String user) {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream(256);
        try (JsonGenerator g = JSON.createGenerator(bytes)) {
            g.writeStartObject();
            g.writeStringField("model", config.model());
            if (config.route() == BenchConfig.Route.CHAT) {
                g.writeArrayFieldStart("messages");
                for (Message m : messages) {
                    g.writeStartObject();
                    g.writeStringField("role", m.role());
                    g.writeStringField("content", m.content());
                    g.writeEndObject();
                }
                g.writeEndArray();
            } else if (tokenPrompt != null) {
                g.writeFieldName("prompt");
                g.writeArray(tokenPrompt, 0, tokenPrompt.length);
            } else {
                g.writeStringField("prompt", textPrompt);
            }
            g.writeNumberField("max_tokens", config.maxTokens());
            if (user != null) {
                g.writeStringField("user", user);
            }
            if (config.ignoreEos()) {
                g.writeBooleanField("ignore_eos", true);
            }
            g.writeBooleanField("stream", config.stream());
            if (config.stream()) {
                g.writeObjectFieldStart("stream_options");
                g.writeBooleanField("include_usage", true);
                g.writeEndObject();
            }
            g.writeEndObject();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return bytes.toByteArray();
    }

    /** A body for a single-prompt workload: chat = one user message (after an optional system message). */
    protected byte[] encodeSimple(String system, String user, int[] systemIds, int[] userIds) {
        if (config.tokenIds()) {
            int[] all = new int[(systemIds == null ? 0 : systemIds.length) + userIds.length];
            int n = 0;
            if (systemIds != null) {
                System.arraycopy(systemIds, 0, all, 0, systemIds.length);
                n = systemIds.length;
            }
            System.arraycopy(userIds, 0, all, n, userIds.length);
            return encode(null, null, all);
        }
        if (config.route() == BenchConfig.Route.CHAT) {
            List<Message> messages = new ArrayList<>(2);
            if (system != null) {
                messages.add(new Message("system", system));
            }
            messages.add(new Message("user", user));
            return encode(messages, null, null);
        }
        return encode(null, system == null ? user : system + "\n\n" + user, null);
    }

    protected SplittableRandom randomFor(long stream) {
        return new SplittableRandom(Vocabulary.mix(config.seed(), stream));
    }

    /** One body of exactly {@code --payload-bytes} bytes, reused for every request. */
    static final class Fixed extends PromptWorkload {
        private final BenchRequest request;

        Fixed(BenchConfig config) {
            super(config);
            int target = config.payloadBytes();
            SplittableRandom random = randomFor(-1);
            byte[] body;
            if (config.tokenIds()) {
                // Each id adds its digits plus a comma (none before the first): grow to the smallest size >= target.
                int base = encode(null, null, new int[0]).length;
                List<Integer> ids = new ArrayList<>();
                long size = base;
                while (size < target) {
                    int id = Vocabulary.TOKEN_ID_BASE + random.nextInt(Vocabulary.TOKEN_ID_RANGE);
                    size += Integer.toString(id).length() + (ids.isEmpty() ? 0 : 1);
                    ids.add(id);
                }
                // JSON has no padding inside an int array, so the body is at most a few bytes over the target.
                body = encode(null, null, ids.stream().mapToInt(Integer::intValue).toArray());
            } else {
                byte[] empty = encodeSimple(null, "", null, null);
                int promptChars = target - empty.length;
                if (promptChars < 1) {
                    throw new IllegalArgumentException("--payload-bytes=" + target + " must be > " + empty.length
                        + " (the size of the request with an empty prompt for this model name and flags)");
                }
                StringBuilder sb = new StringBuilder(promptChars + 16);
                while (sb.length() < promptChars) {
                    Vocabulary.appendWords(sb, random, 1);
                }
                sb.setLength(promptChars);
                if (sb.charAt(promptChars - 1) == ' ') {
                    sb.setCharAt(promptChars - 1, 'a');
                }
                body = encodeSimple(null, sb.toString(), null, null);
            }
            request = new BenchRequest(body, null);
        }

        @Override
        public BenchRequest next(long seq) {
            return request;
        }

        @Override
        public boolean reusesRequests() {
            return true;
        }
    }

    /** Groups of requests sharing a long system prompt, each with its own question. */
    static final class SharedPrefix extends PromptWorkload {
        private final String[] systemText;
        private final int[][] systemIds;

        SharedPrefix(BenchConfig config) {
            super(config);
            systemText = new String[config.groups()];
            systemIds = new int[config.groups()][];
            for (int g = 0; g < config.groups(); g++) {
                SplittableRandom random = randomFor(-1000 - g);
                if (config.tokenIds()) {
                    systemIds[g] = Vocabulary.tokenIds(random, config.systemTokens());
                } else {
                    // The group number first, so two groups never share a prefix by chance.
                    systemText[g] = "group " + g + ": " + Vocabulary.words(random, config.systemTokens());
                }
            }
        }

        /** The group arrival {@code seq} belongs to. */
        int groupOf(long seq) {
            return randomFor(seq).nextInt(config.groups());
        }

        @Override
        public BenchRequest next(long seq) {
            SplittableRandom random = randomFor(seq);
            int g = random.nextInt(config.groups());
            if (config.tokenIds()) {
                return new BenchRequest(encodeSimple(null, null, systemIds[g], Vocabulary.tokenIds(random, config.questionTokens())), null);
            }
            return new BenchRequest(encodeSimple(systemText[g], Vocabulary.words(random, config.questionTokens()), null, null), null);
        }
    }

    /** Prompts of random length: uniform in [min, max], or log-uniform (the same number of prompts per decade). */
    static final class RandomPrompts extends PromptWorkload {
        RandomPrompts(BenchConfig config) {
            super(config);
        }

        /** The next prompt length in [min, max] (inclusive). */
        int length(SplittableRandom random) {
            int min = config.randomMinTokens();
            int max = config.randomMaxTokens();
            if (config.randomDistribution() == BenchConfig.Distribution.LOG_UNIFORM && max > min) {
                // exp of a uniform draw in [ln min, ln(max + 1)), floored: every length in range, max included.
                double lo = Math.log(min);
                double hi = Math.log(max + 1.0);
                return (int) Math.min(max, Math.max(min, Math.floor(Math.exp(lo + random.nextDouble() * (hi - lo)))));
            }
            return min + random.nextInt(max - min + 1);
        }

        @Override
        public BenchRequest next(long seq) {
            SplittableRandom random = randomFor(seq);
            int n = length(random);
            if (config.tokenIds()) {
                return new BenchRequest(encodeSimple(null, null, null, Vocabulary.tokenIds(random, n)), null);
            }
            return new BenchRequest(encodeSimple(null, Vocabulary.words(random, n), null, null), null);
        }
    }

    /** Conversations whose history grows turn by turn with the server's own replies. */
    static final class MultiTurn extends PromptWorkload {
        /** Bound on one stored reply, so a runaway server cannot grow the history without limit. */
        static final int MAX_REPLY_CHARS = 1 << 20;

        static final class Conversation {
            final long id;
            final List<Message> history = new ArrayList<>();
            int turn;

            Conversation(long id) {
                this.id = id;
            }
        }

        private final ArrayDeque<Conversation> ready = new ArrayDeque<>();
        private long nextConversationId;

        MultiTurn(BenchConfig config) {
            super(config);
            for (int i = 0; i < config.conversations(); i++) {
                ready.add(fresh());
            }
        }

        private Conversation fresh() {
            Conversation c = new Conversation(nextConversationId++);
            if (config.systemTokens() > 0) {
                c.history.add(new Message("system", "conversation " + c.id + ": "
                    + Vocabulary.words(randomFor(-2_000_000 - c.id), config.systemTokens())));
            }
            return c;
        }

        @Override
        public BenchRequest next(long seq) {
            Conversation c = ready.poll();
            if (c == null) {
                return null;
            }
            // The user message depends on (conversation, turn) only, not on which arrival carries it.
            String user = Vocabulary.words(randomFor(Vocabulary.mix(c.id, c.turn) ^ 0x5DEECE66DL), config.questionTokens());
            c.history.add(new Message("user", user));
            byte[] body;
            String userId = config.conversationUser() ? "conversation-" + config.seed() + "-" + c.id : null;
            if (config.route() == BenchConfig.Route.CHAT) {
                body = encode(c.history, null, null, userId);
            } else {
                StringBuilder sb = new StringBuilder();
                for (Message m : c.history) {
                    sb.append(m.role()).append(": ").append(m.content()).append('\n');
                }
                sb.append("assistant:");
                body = encode(null, sb.toString(), null, userId);
            }
            return new BenchRequest(body, c);
        }

        @Override
        public void onComplete(BenchRequest request, boolean ok, CharSequence reply) {
            Conversation c = (Conversation) request.conversation;
            if (c == null) {
                return;
            }
            c.turn++;
            if (ok && c.turn < config.turns()) {
                String text = reply == null ? "" : reply.length() > MAX_REPLY_CHARS
                    ? reply.subSequence(0, MAX_REPLY_CHARS).toString() : reply.toString();
                c.history.add(new Message("assistant", text));
                ready.add(c);
            } else {
                // Done, or the history would be inconsistent after a failed turn: start a new conversation.
                ready.add(fresh());
            }
        }

        @Override
        public boolean wantsReply() {
            return true;
        }

        int readyConversations() {
            return ready.size();
        }
    }
}
