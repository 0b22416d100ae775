package io.kvgate.dataplane.exchange;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.buffer.UnpooledByteBufAllocator;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** llama.cpp slot pinning: the slot of a session is stable and in range; the body gains id_slot as its last member. */
class SlotPinTest {
    private static String pinned(String body, int slot) {
        ByteBuf in = Unpooled.copiedBuffer(body, StandardCharsets.UTF_8);
        ByteBuf out = SlotPin.withIdSlot(in, slot, UnpooledByteBufAllocator.DEFAULT);
        try {
            return out.toString(StandardCharsets.UTF_8);
        } finally {
            out.release();
            assertEquals(1, in.refCnt(), "the caller keeps its reference; the slice's is released with the result");
            in.release();
        }
    }

    @Test
    void idSlotIsAppendedLastSoItWinsOverTheClients() throws Exception {
        assertEquals("{\"model\":\"m\",\"id_slot\":0,\"id_slot\":3}", pinned("{\"model\":\"m\",\"id_slot\":0}", 3));
        assertEquals("{\"id_slot\":2}", pinned("{}", 2));
        assertEquals("{ \n\"id_slot\":1}", pinned("{ \n} \n", 1));
        assertEquals("{\"a\":[1] ,\"id_slot\":0}", pinned("{\"a\":[1] }\r\n", 0));
        assertEquals(3, new ObjectMapper().readTree(pinned("{\"model\":\"m\",\"id_slot\":0}", 3)).get("id_slot").asInt(),
            "Jackson, like llama-server's reader, keeps the last duplicate");
        assertThrows(IllegalArgumentException.class, () -> pinned("[1]", 0));
    }

    @Test
    void aSessionKeepsItsSlotAndSessionsSpreadOverAllSlots() {
        Set<Integer> seen = new HashSet<>();
        for (int i = 0; i < 200; i++) {
            int s = SlotPin.slotOf("conversation-" + i, 4);
            assertTrue(s >= 0 && s < 4, "in range: " + s);
            assertEquals(s, SlotPin.slotOf("conversation-" + i, 4), "stable");
            seen.add(s);
        }
        assertEquals(4, seen.size());
        assertEquals(0, SlotPin.slotOf("any", 1));
    }
}
