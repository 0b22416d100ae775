package io.kvgate.dataplane.request;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.dataplane.request.JsonLexer.JsonToken;
import org.junit.jupiter.api.Test;

/** The ids kept by {@link PromptIds} on its own: the limit, the shapes, and what {@link PromptIds#reset} drops. */
class PromptIdsTest {

    private static PromptIds list(int limit, int... ids) {
        PromptIds p = new PromptIds();
        p.limit(limit);
        p.startPrompt();
        for (int id : ids) {
            p.element(JsonToken.VALUE_NUMBER_INT, id);
        }
        return p;
    }

    @Test
    void keepsNoMoreThanItsLimit() {
        PromptIds p = list(3, 5, 6, 7, 8, 9);
        assertEquals(PromptIds.LIST, p.shape());
        assertTrue(p.firstValid());
        assertTrue(p.keeps(3), "the first 3 were kept");
        assertFalse(p.keeps(4), "the 4th was counted, not kept");
        assertArrayEquals(new int[] {5, 6, 7}, p.first(3));
    }

    @Test
    void aShorterPromptIsKeptWhole() {
        PromptIds p = list(100, 1, 2);
        assertTrue(p.keeps(100));
        assertArrayEquals(new int[] {1, 2}, p.first(100));
    }

    @Test
    void limitZeroReadsNothing() {
        PromptIds p = list(0, 1, 2, 3);
        assertEquals(PromptIds.NONE, p.shape());
    }

    @Test
    void anIdOutOfRangeMakesTheFirstPromptInvalid() {
        PromptIds p = list(10, 1, -1, 3);
        assertEquals(PromptIds.LIST, p.shape());
        assertFalse(p.firstValid());
    }

    @Test
    void aBatchKeepsItsFirstListAndChecksTheRest() {
        PromptIds p = new PromptIds();
        p.limit(10);
        p.startPrompt();
        p.element(JsonToken.START_ARRAY, -1);
        p.listElement(4);
        p.listElement(5);
        p.endList();
        p.element(JsonToken.START_ARRAY, -1);
        p.endList(); // an empty later list
        assertEquals(PromptIds.BATCH, p.shape());
        assertTrue(p.firstValid());
        assertFalse(p.restValid());
        assertArrayEquals(new int[] {4, 5}, p.first(10));
    }

    @Test
    void anEmptyFirstListIsInvalid() {
        PromptIds p = new PromptIds();
        p.limit(10);
        p.startPrompt();
        p.element(JsonToken.START_ARRAY, -1);
        p.endList();
        assertFalse(p.firstValid());
    }

    @Test
    void aLaterPromptReplacesAnEarlierOne() {
        PromptIds p = list(10, 1, 2, 3);
        p.startPrompt();
        p.element(JsonToken.VALUE_STRING, -1);
        assertEquals(PromptIds.NONE, p.shape());
    }

    @Test
    void resetDropsALongArrayAndTheLimit() {
        int[] many = new int[PromptIds.RETAINED_IDS + 1];
        PromptIds p = list(many.length, many);
        assertTrue(p.keeps(many.length));
        p.reset();
        assertEquals(0, p.limit());
        p.limit(many.length);
        p.startPrompt();
        p.element(JsonToken.VALUE_NUMBER_INT, 9);
        assertArrayEquals(new int[] {9}, p.first(many.length), "a fresh array, nothing of the last prompt");
    }
}
