package io.kvgate.dataplane.route;

import static io.kvgate.dataplane.route.RouteFixtures.config;
import static io.kvgate.dataplane.route.RouteFixtures.decide;
import static io.kvgate.dataplane.route.RouteFixtures.endpoints;
import static io.kvgate.dataplane.route.RouteFixtures.table;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.dataplane.route.RuleStats.MissReason;
import io.kvgate.dataplane.route.RuleStats.Tier;
import java.util.HashSet;
import java.util.Set;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** Consistent hashing with bounded loads: owner affinity, the bounded clockwise walk, fallback. */
class ChwblPolicyTest {
    private final ManualClock clock = new ManualClock();

    /** The ring on the head of the prompt (the tests below that skip the common prefix say so). */
    private Rule rule(double loadFactor) {
        return rule("prefix_blocks: 1, virtual_nodes: 64, skip_common_prefix: false, load_factor: " + loadFactor);
    }

    private Rule rule(String knobs) {
        return table(config("", RouteFixtures.rule("c", "    policy: chwbl\n    fallback: round_robin\n    block_size: 16\n"
            + "    chwbl: {" + knobs + "}\n", endpoints(4))), null, clock).ruleByName("c");
    }

    /** 64 tokens of the system prompt every request shares, 4 of a conversation's own, then {@code tail} of its turns. */
    private static int[] conversation(int c, int tail) {
        int[] t = new int[64 + 64 + 16 * tail];
        for (int i = 0; i < t.length; i++) {
            t[i] = i < 64 ? 7 + i : c * 100_000 + i;
        }
        return t;
    }

    @Test
    void theKeySkipsThePrefixEveryPromptSharesSoConversationsSpread() {
        Rule r = rule("prefix_blocks: 4, virtual_nodes: 64, load_factor: 10");
        ChwblPolicy p = (ChwblPolicy) r.policy();
        Set<EndpointState> owners = new HashSet<>();
        EndpointState[] first = new EndpointState[32];
        for (int c = 0; c < 32; c++) {
            first[c] = decide(r, request(r, conversation(c, 0)), clock.nanoTime());
            first[c].onCompleted(1, 0, 0, 5, 1, clock.nanoTime());
            owners.add(first[c]);
        }
        assertEquals(4, p.commonBlocks(), "the 64-token system prompt is the common prefix");
        assertEquals(4, owners.size(), "32 conversations over 4 endpoints reach every endpoint");
        for (int c = 2; c < 32; c++) { // the first two were keyed before the common prefix was known
            for (int turn = 1; turn < 4; turn++) {
                EndpointState ep = decide(r, request(r, conversation(c, turn)), clock.nanoTime());
                assertSame(first[c], ep, "conversation " + c + " turn " + turn + " stays with its first turn");
                ep.onCompleted(1, 0, 0, 5, 1, clock.nanoTime());
            }
        }

        Rule head = rule("prefix_blocks: 4, virtual_nodes: 64, load_factor: 10, skip_common_prefix: false");
        Set<EndpointState> headOwners = new HashSet<>();
        for (int c = 0; c < 32; c++) {
            EndpointState ep = decide(head, request(head, conversation(c, 0)), clock.nanoTime());
            ep.onCompleted(1, 0, 0, 5, 1, clock.nanoTime());
            headOwners.add(ep);
        }
        assertEquals(1, headOwners.size(), "keyed on the shared system prompt alone, every conversation has one owner");
    }

    @Test
    void aPromptThatStartsDifferentlyEndsTheCommonPrefix() {
        Rule r = rule("prefix_blocks: 4, virtual_nodes: 64");
        ChwblPolicy p = (ChwblPolicy) r.policy();
        assertEquals(-1, p.commonBlocks());
        p.keyOf(conversation(1, 0));
        assertEquals(8, p.commonBlocks(), "one prompt: all its full blocks");
        p.keyOf(conversation(2, 2));
        assertEquals(4, p.commonBlocks());
        p.keyOf(java.util.Arrays.copyOf(conversation(3, 0), 40)); // 2 full blocks of the system prompt
        assertEquals(2, p.commonBlocks(), "a shorter prompt shares only its own full blocks");
        long shortKey = p.keyOf(java.util.Arrays.copyOf(conversation(3, 0), 32));
        assertEquals(shortKey, p.keyOf(java.util.Arrays.copyOf(conversation(4, 0), 32)),
            "a prompt inside the common prefix is keyed from its start");
        int[] other = conversation(5, 0);
        other[0] = 99;
        p.keyOf(other);
        assertEquals(0, p.commonBlocks(), "a different first block: nothing is common, the key is the head's again");
        assertEquals(p.keyOf(conversation(6, 0)), p.keyOf(conversation(7, 1)), "the same first 4 blocks, the same key");
    }

    private static RouteEvent request(Rule r, int[] tokens) {
        return RouteEvent.of(r, Role.ANY, tokens, null, SessionKeys.NONE, false, false);
    }

    private static int[] prompt(int family, int tail) {
        int[] t = new int[40];
        for (int i = 0; i < t.length; i++) {
            t[i] = i < 16 ? family * 1000 + i : tail * 7 + i; // the first block (the key) is the family's
        }
        return t;
    }

    @Test
    void aPromptFamilyGoesToItsOwnerAndFamiliesSpread() {
        Rule r = rule(0.25);
        EndpointState owner = decide(r, request(r, prompt(1, 1)), clock.nanoTime());
        owner.onCompleted(1, 0, 0, 5, 1, clock.nanoTime());
        for (int i = 2; i < 10; i++) {
            EndpointState ep = decide(r, request(r, prompt(1, i)), clock.nanoTime());
            assertSame(owner, ep, "same first block, same owner");
            ep.onCompleted(1, 0, 0, 5, 1, clock.nanoTime());
        }
        Set<EndpointState> owners = new HashSet<>();
        for (int f = 0; f < 64; f++) {
            EndpointState ep = decide(r, request(r, prompt(f, 0)), clock.nanoTime());
            owners.add(ep);
            ep.onCompleted(1, 0, 0, 5, 1, clock.nanoTime());
        }
        assertEquals(4, owners.size(), "64 families over 4 endpoints reach every endpoint");
        assertEquals(73, r.stats().tierCount(Tier.CHWBL_OWNER));
    }

    @Test
    void anOwnerOverTheBoundSendsTheRequestClockwiseToTheNextEndpointUnderIt() {
        Rule r = rule(0.0);
        EndpointState owner = decide(r, request(r, prompt(5, 0)), clock.nanoTime());
        // owner: 1 in flight, total 1, bound = ceil((1 + 1) / 4) = 1: owner is full
        EndpointState next = decide(r, request(r, prompt(5, 1)), clock.nanoTime());
        assertNotSame(owner, next);
        assertEquals(1, r.stats().tierCount(Tier.CHWBL_WALK));
    }

    @Test
    void theWalkNeverPicksAnEndpointOverTheBound() {
        Rule r = rule(0.25);
        SplittableRandom rnd = new SplittableRandom(3);
        for (int i = 0; i < 2000; i++) {
            long total = 0;
            for (EndpointState e : r.endpoints()) {
                total += e.outstanding();
            }
            double bound = Math.ceil(1.25 * (total + 1) / 4);
            EndpointState ep = decide(r, request(r, prompt(rnd.nextInt(8), i)), clock.nanoTime());
            assertNotNull(ep);
            assertTrue(ep.outstanding() <= bound, "load after the decision " + ep.outstanding() + " <= bound " + bound);
            if (rnd.nextInt(3) == 0) { // requests finish at random
                EndpointState done = r.endpoints().get(rnd.nextInt(4));
                if (done.outstanding() > 0) {
                    done.onCompleted(1, 0, 0, 5, 1, clock.nanoTime());
                }
            }
        }
    }

    @Test
    void aRequestWithoutTokensTakesTheFallback() {
        Rule r = rule(0.25);
        assertNotNull(decide(r, request(r, null), clock.nanoTime()));
        assertEquals(1, r.stats().missCount(MissReason.NO_TOKENS));
        assertEquals(1, r.stats().tierCount(Tier.FALLBACK));
    }

    private static RouteEvent textRequest(Rule r, String text) {
        return request(r, null).textPrefixKey(io.kvgate.dataplane.request.RoutingInputs.textPrefixKey(text, 32));
    }

    @Test
    void withoutTokensTheTextPrefixKeyKeepsAFamilyOnItsOwner() {
        Rule r = rule(0.25);
        String system = "You are a helpful assistant. Q:"; // 31 chars: the 32-char key covers it and one more
        EndpointState owner = decide(r, textRequest(r, system + "a question"), clock.nanoTime());
        owner.onCompleted(1, 0, 0, 5, 1, clock.nanoTime());
        for (int i = 0; i < 8; i++) {
            EndpointState ep = decide(r, textRequest(r, system + "a different tail " + i), clock.nanoTime());
            assertSame(owner, ep, "same first 32 characters, same owner");
            ep.onCompleted(1, 0, 0, 5, 1, clock.nanoTime());
        }
        Set<EndpointState> owners = new HashSet<>();
        for (int f = 0; f < 64; f++) {
            EndpointState ep = decide(r, textRequest(r, "family " + f + " system prompt, long enough to key"), clock.nanoTime());
            owners.add(ep);
            ep.onCompleted(1, 0, 0, 5, 1, clock.nanoTime());
        }
        assertEquals(4, owners.size(), "64 text families over 4 endpoints reach every endpoint");
        assertEquals(73, r.stats().tierCount(Tier.CHWBL_OWNER));
        assertEquals(0, r.stats().missCount(MissReason.NO_TOKENS));
    }

    @Test
    void theTextPrefixKeyIsBoundedToItsCharsAndNeverTheNoKeyValue() {
        long k = io.kvgate.dataplane.request.RoutingInputs.textPrefixKey("abcdef", 3);
        assertEquals(k, io.kvgate.dataplane.request.RoutingInputs.textPrefixKey("abcxyz", 3));
        assertTrue(k != io.kvgate.dataplane.request.RoutingInputs.textPrefixKey("abd", 3));
        assertTrue(k != io.kvgate.dataplane.request.RoutingInputs.textPrefixKey("abc", 2), "the length is part of the key");
        assertEquals(io.kvgate.dataplane.request.RoutingInputs.NO_TEXT_KEY,
            io.kvgate.dataplane.request.RoutingInputs.textPrefixKey("", 1024));
    }
}
