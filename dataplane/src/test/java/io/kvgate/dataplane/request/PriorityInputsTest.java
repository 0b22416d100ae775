package io.kvgate.dataplane.request;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.route.PriorityClass;
import io.netty.handler.codec.http.DefaultHttpHeaders;
import io.netty.handler.codec.http.HttpHeaders;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** A request head's admission inputs: class from the header or the API key (a ceiling), tenant from the key. */
class PriorityInputsTest {

    private static HttpHeaders head(String priority, String key) {
        HttpHeaders h = new DefaultHttpHeaders();
        if (priority != null) {
            h.set("X-Kvgate-Priority", priority);
        }
        if (key != null) {
            h.set("Authorization", "Bearer " + key);
        }
        return h;
    }

    private static RuleConfig.AdmissionConfig keyed(String key, String cls) {
        return new RuleConfig.AdmissionConfig(16, 1000, -1, -1, 4, 0, Map.of(PriorityInputs.fingerprint(key), cls));
    }

    @Test
    void theFingerprintIsTheHexSha256OfTheKey() {
        assertEquals("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", PriorityInputs.fingerprint("abc"));
    }

    @Test
    void theHeaderNamesTheClassAndAnUnknownValueIsAProblemNamingIt() {
        RuleConfig.AdmissionConfig none = RuleConfig.AdmissionConfig.OFF;
        assertEquals(PriorityClass.STANDARD, PriorityInputs.priority(head(null, null), none));
        assertEquals(PriorityClass.INTERACTIVE, PriorityInputs.priority(head("Interactive", null), none));
        assertEquals(PriorityClass.BATCH, PriorityInputs.priority(head("batch", "k"), none));
        assertNull(PriorityInputs.problem(head("batch", null)));
        assertNull(PriorityInputs.problem(head(null, null)));
        Problem p = PriorityInputs.problem(head("urgent", null));
        assertEquals("invalid_priority", p.reason());
        assertTrue(p.message().contains("X-Kvgate-Priority: 'urgent'"), p.message());
        assertTrue(p.message().contains("interactive, standard or batch"), p.message());
    }

    @Test
    void anApiKeysClassIsACeilingTheHeaderMayOnlyLower() {
        RuleConfig.AdmissionConfig a = keyed("sk-standard", "standard");
        assertEquals(PriorityClass.STANDARD, PriorityInputs.priority(head(null, "sk-standard"), a));
        assertEquals(PriorityClass.STANDARD, PriorityInputs.priority(head("interactive", "sk-standard"), a), "cannot raise");
        assertEquals(PriorityClass.BATCH, PriorityInputs.priority(head("batch", "sk-standard"), a), "may lower");
        assertEquals(PriorityClass.INTERACTIVE, PriorityInputs.priority(head("interactive", "sk-unlisted"), a),
            "a key without a class is classed by its header");
        assertEquals(PriorityClass.BATCH, PriorityInputs.priority(head(null, "sk-b"), keyed("sk-b", "batch")));
    }

    @Test
    void theTenantIsTheBearerTokensHash() {
        assertEquals(0L, PriorityInputs.tenant(head(null, null)));
        long a = PriorityInputs.tenant(head(null, "sk-a"));
        assertNotEquals(0L, a);
        assertEquals(a, PriorityInputs.tenant(head("batch", "sk-a")));
        assertNotEquals(a, PriorityInputs.tenant(head(null, "sk-b")));
    }
}
