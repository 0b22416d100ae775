package io.kvgate.dataplane.route;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.index.block.BlockIndexConfig;
import org.junit.jupiter.api.Test;

/** What the applied table tells the body stage: how much request text any of its rules keys on. */
class RouteTableTest {
    private static int textPrefixChars(String rules) {
        return RouteFixtures.table(RouteFixtures.config("", rules), null, new ManualClock()).textPrefixChars();
    }

    @Test
    void theTextPrefixIsTheLongestChwblPrefixAndNoneWithoutChwbl() {
        String[] ep = RouteFixtures.endpoints(1);
        assertEquals(0, textPrefixChars(RouteFixtures.rule("a", "", ep) + RouteFixtures.rule("b", "    policy: least_outstanding\n", ep)),
            "no rule keys on text: none is decoded");
        assertEquals(0, textPrefixChars(RouteFixtures.rule("kv", "    policy: kv_exact\n", ep)), "kv_exact keys on tokens");
        assertEquals(RuleConfig.DEFAULT_PREFIX_CHARS, textPrefixChars(RouteFixtures.rule("a", "", ep)
            + RouteFixtures.rule("c", "    policy: chwbl\n", ep)));
        assertEquals(300, textPrefixChars(RouteFixtures.rule("c1", "    policy: chwbl\n    chwbl: {prefix_chars: 16}\n", ep)
            + RouteFixtures.rule("c2", "    policy: chwbl\n    chwbl: {prefix_chars: 300}\n", ep)));
        assertEquals(RuleConfig.MAX_PREFIX_CHARS, textPrefixChars(RouteFixtures.rule("c",
            "    policy: chwbl\n    chwbl: {prefix_chars: " + RuleConfig.MAX_PREFIX_CHARS + "}\n", ep)));
    }

    private static int promptIdsKept(String rules) {
        return RouteFixtures.table(RouteFixtures.config("", rules), null, new ManualClock()).promptIdsKept();
    }

    @Test
    void theBodyStageKeepsTokenIdsOnlyWhenARuleRoutesOnThem() {
        String[] ep = RouteFixtures.endpoints(1);
        assertEquals(0, promptIdsKept(RouteFixtures.rule("a", "", ep) + RouteFixtures.rule("b", "    policy: least_outstanding\n", ep)),
            "no rule routes on token ids: none is kept");
        assertEquals(BlockIndexConfig.DEFAULT_MAX_PROMPT_BLOCKS * 16, promptIdsKept(RouteFixtures.rule("a", "", ep)
            + RouteFixtures.rule("kv", "    policy: kv_exact\n    block_size: 16\n", ep)),
            "the lookup depth of the kv rule, in tokens");
    }
}
