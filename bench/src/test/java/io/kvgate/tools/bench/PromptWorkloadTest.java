package io.kvgate.tools.bench;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(10)
class PromptWorkloadTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    private static BenchConfig.Builder cfg(BenchConfig.Workload w) {
        return BenchConfig.builder().target("http://127.0.0.1:1").model("m").rate(1).workload(w);
    }

    private static JsonNode json(BenchRequest r) throws Exception {
        return JSON.readTree(r.body());
    }

    @Test
    void fixedPayloadHasExactlyTheRequestedSizeAndIsReused() throws Exception {
        for (int size : new int[] {256, 1024, 16384, 1 << 20}) {
            PromptWorkload w = PromptWorkload.create(cfg(BenchConfig.Workload.FIXED).payloadBytes(size).build());
            BenchRequest r = w.next(0);
            assertEquals(size, r.body().length);
            assertSame(r, w.next(1));
            assertTrue(w.reusesRequests());
            assertEquals("user", json(r).get("messages").get(0).get("role").asText());
        }
        BenchConfig.Builder b = cfg(BenchConfig.Workload.FIXED).payloadBytes(4096).route(BenchConfig.Route.COMPLETIONS);
        b.tokenIds = true;
        byte[] ids = PromptWorkload.create(b.build()).next(0).body();
        assertTrue(ids.length >= 4096 && ids.length < 4096 + 8, "len " + ids.length);
    }

    @Test
    void bodiesAreDeterministicForASeedAndDifferForAnother() {
        for (BenchConfig.Workload w : new BenchConfig.Workload[] {BenchConfig.Workload.SHARED_PREFIX, BenchConfig.Workload.RANDOM}) {
            PromptWorkload a = PromptWorkload.create(cfg(w).seed(1).build());
            PromptWorkload b = PromptWorkload.create(cfg(w).seed(1).build());
            PromptWorkload c = PromptWorkload.create(cfg(w).seed(2).build());
            for (long seq = 0; seq < 20; seq++) {
                assertArrayEquals(a.next(seq).body(), b.next(seq).body());
            }
            assertFalse(java.util.Arrays.equals(a.next(0).body(), c.next(0).body()));
            // Order of asking does not matter: arrival 7's body depends only on 7.
            assertArrayEquals(a.next(7).body(), PromptWorkload.create(cfg(w).seed(1).build()).next(7).body());
        }
    }

    @Test
    void sharedPrefixGroupsShareTheirSystemPromptExactly() throws Exception {
        BenchConfig.Builder b = cfg(BenchConfig.Workload.SHARED_PREFIX);
        b.groups = 3;
        b.systemTokens = 200;
        b.questionTokens = 10;
        PromptWorkload w = PromptWorkload.create(b.build());
        Set<String> systems = new HashSet<>();
        Set<String> questions = new HashSet<>();
        for (long seq = 0; seq < 60; seq++) {
            JsonNode m = json(w.next(seq)).get("messages");
            String system = m.get(0).get("content").asText();
            assertEquals("system", m.get(0).get("role").asText());
            assertEquals(200 + 2, system.split(" ").length); // "group N:" + 200 words
            systems.add(system);
            questions.add(m.get(1).get("content").asText());
            assertEquals(10, m.get(1).get("content").asText().split(" ").length);
        }
        assertEquals(3, systems.size());
        assertTrue(questions.size() > 55);
    }

    @Test
    void randomPromptLengthsStayInRange() throws Exception {
        BenchConfig.Builder b = cfg(BenchConfig.Workload.RANDOM).route(BenchConfig.Route.COMPLETIONS);
        b.randomMinTokens = 5;
        b.randomMaxTokens = 9;
        PromptWorkload w = PromptWorkload.create(b.build());
        Set<Integer> lengths = new HashSet<>();
        for (long seq = 0; seq < 200; seq++) {
            int n = json(w.next(seq)).get("prompt").asText().split(" ").length;
            assertTrue(n >= 5 && n <= 9);
            lengths.add(n);
        }
        assertEquals(5, lengths.size());
    }

    @Test
    void logUniformLengthsCoverTheRangeWithAsManyPromptsPerDecade() {
        BenchConfig.Builder b = cfg(BenchConfig.Workload.RANDOM).route(BenchConfig.Route.COMPLETIONS);
        b.randomMinTokens = 50;
        b.randomMaxTokens = 50_000;
        b.randomDistribution = BenchConfig.Distribution.LOG_UNIFORM;
        PromptWorkload.RandomPrompts w = (PromptWorkload.RandomPrompts) PromptWorkload.create(b.build());
        java.util.SplittableRandom random = new java.util.SplittableRandom(3);
        int[] decades = new int[3]; // [50, 500), [500, 5000), [5000, 50000]
        int n = 30_000;
        int min = Integer.MAX_VALUE;
        int max = 0;
        for (int i = 0; i < n; i++) {
            int len = w.length(random);
            assertTrue(len >= 50 && len <= 50_000, "length " + len);
            min = Math.min(min, len);
            max = Math.max(max, len);
            decades[len < 500 ? 0 : len < 5000 ? 1 : 2]++;
        }
        for (int d : decades) {
            assertTrue(Math.abs(d - n / 3.0) < 0.03 * n, java.util.Arrays.toString(decades));
        }
        assertTrue(min < 60 && max > 45_000, min + ".." + max);
        // Uniform (the default) puts 90 % of the prompts in the top decade.
        b.randomDistribution = BenchConfig.Distribution.UNIFORM;
        PromptWorkload.RandomPrompts u = (PromptWorkload.RandomPrompts) PromptWorkload.create(b.build());
        int top = 0;
        for (int i = 0; i < n; i++) {
            top += u.length(random) >= 5000 ? 1 : 0;
        }
        assertTrue(Math.abs(top - 0.9 * n) < 0.02 * n, "uniform top decade " + top);
    }

    @Test
    void conversationUserNamesEachConversationInTheUserField() throws Exception {
        BenchConfig.Builder b = cfg(BenchConfig.Workload.MULTI_TURN).seed(9);
        b.conversations = 2;
        b.turns = 2;
        b.systemTokens = 0;
        b.questionTokens = 3;
        PromptWorkload plain = PromptWorkload.create(b.build());
        assertNull(json(plain.next(0)).get("user"), "no user field unless asked");
        b.conversationUser = true;
        PromptWorkload w = PromptWorkload.create(b.build());
        BenchRequest a0 = w.next(0);
        BenchRequest b0 = w.next(1);
        assertEquals("conversation-9-0", json(a0).get("user").asText());
        assertEquals("conversation-9-1", json(b0).get("user").asText());
        w.onComplete(a0, true, "reply");
        assertEquals("conversation-9-0", json(w.next(2)).get("user").asText(), "the next turn keeps its conversation's id");
    }

    @Test
    void multiTurnWaitsForRepliesAndGrowsTheHistory() throws Exception {
        BenchConfig.Builder b = cfg(BenchConfig.Workload.MULTI_TURN);
        b.conversations = 1;
        b.turns = 2;
        b.systemTokens = 0;
        b.questionTokens = 3;
        PromptWorkload w = PromptWorkload.create(b.build());
        BenchRequest t0 = w.next(0);
        assertNull(w.next(1)); // the only conversation is waiting for its reply
        w.onComplete(t0, true, "the reply");
        BenchRequest t1 = w.next(1);
        JsonNode m = json(t1).get("messages");
        assertEquals(3, m.size());
        assertEquals(json(t0).get("messages").get(0), m.get(0));
        assertEquals("assistant", m.get(1).get("role").asText());
        assertEquals("the reply", m.get(1).get("content").asText());
        w.onComplete(t1, true, "second");
        // Two turns done: a new conversation starts from scratch.
        JsonNode fresh = json(w.next(2)).get("messages");
        assertEquals(1, fresh.size());
        assertNotEquals(m.get(0), fresh.get(0));
        assertTrue(w.wantsReply());
    }

    @Test
    void vocabularyIsDedupedLowercaseWords() {
        Set<String> seen = new HashSet<>();
        for (int i = 0; i < Vocabulary.size(); i++) {
            String word = Vocabulary.word(i);
            assertTrue(word.matches("[a-z]+"), word);
            assertTrue(seen.add(word), word);
        }
        assertTrue(Vocabulary.size() > 400);
        assertEquals("ab", new String("ab".getBytes(StandardCharsets.US_ASCII), StandardCharsets.US_ASCII));
    }
}
