package io.kvgate.dataplane.request;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class RequestIdsTest {
    @Test
    void aGeneratedIdIs32LowerCaseHexDigits() {
        String a = RequestIds.generate();
        assertEquals(32, a.length());
        assertTrue(a.matches("[0-9a-f]{32}"), a);
        assertNotEquals(a, RequestIds.generate(), "128 random bits: two ids do not repeat");
    }

    @Test
    void aSaneClientIdIsKeptAnythingElseReplaced() {
        assertEquals("client-id_42", RequestIds.keepOrGenerate("client-id_42"));
        String longest = "x".repeat(256);
        assertEquals(longest, RequestIds.keepOrGenerate(longest));
        for (String bad : new String[] {null, "", "x".repeat(257), "has space", "tab\there", "crlf\r\nX-Evil: 1", "é"}) {
            String id = RequestIds.keepOrGenerate(bad);
            assertTrue(id.matches("[0-9a-f]{32}"), "replaced: " + bad);
        }
    }
}
