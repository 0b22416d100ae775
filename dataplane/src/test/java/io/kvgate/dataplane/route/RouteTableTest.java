package io.kvgate.dataplane.route;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.control.config.RuleConfig;
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
}
