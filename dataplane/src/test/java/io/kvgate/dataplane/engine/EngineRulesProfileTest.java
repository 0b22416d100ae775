package io.kvgate.dataplane.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.kvgate.control.config.EngineRules;
import io.kvgate.control.config.RuleConfig;
import org.junit.jupiter.api.Test;

/**
 * The configuration's facts about each engine ({@link EngineRules}, read by the rule checks in {@code control}) agree
 * with what the engine's profile does on the data path: one engine, one set of facts, whichever module reads them.
 */
class EngineRulesProfileTest {
    @Test
    void everyProfileHasTheRulesOfItsNameAndEveryEngineAProfile() {
        assertEquals(EngineRules.ALL.size(), EngineProfiles.ALL.size());
        for (EngineProfile p : EngineProfiles.ALL) {
            assertEquals(p.name(), p.configRules().name());
            assertEquals(RuleConfig.ENGINES.indexOf(p.name()), EngineRules.ALL.indexOf(p.configRules()), p.name());
        }
    }

    @Test
    void disaggregationFactsMatchTheProfilesProtocol() {
        for (EngineProfile p : EngineProfiles.ALL) {
            EngineRules r = p.configRules();
            assertEquals(p.pdProtocol() != PdProtocol.NONE, r.disaggregates(), p.name() + ": policy pd");
            assertEquals(p.pdProtocol() == PdProtocol.BOOTSTRAP_ROOM, r.bootstrapPort(), p.name() + ": bootstrap_port");
            if (r.disaggregates()) {
                assertEquals(p.decodeServesAlone(), r.decodeServesAlone(), p.name() + ": conditional P/D");
            }
            assertEquals(p.namesAdapterInLoraPath(), r.splitsModelAtColon(), p.name() + ": SGLang's 'base:adapter' model form");
        }
    }
}
