package io.kvgate.dataplane.request;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** Appending a member to a JSON body without re-serializing it (SGLang's lora_path, llama.cpp's id_slot). */
class JsonMembersTest {
    private static String append(String body, String name, String raw) {
        ByteBuf in = Unpooled.copiedBuffer(body, StandardCharsets.UTF_8);
        ByteBuf out = JsonMembers.append(in, name, raw, ByteBufAllocator.DEFAULT);
        in.release();
        String s = out.toString(StandardCharsets.UTF_8);
        out.release();
        return s;
    }

    @Test
    void theMemberGoesLastSoItWinsOverTheClientsCopy() throws Exception {
        String out = append("{\"model\":\"sql-lora\",\"lora_path\":\"other\"}\n ", "lora_path", JsonMembers.quote("sql-lora"));
        assertEquals("{\"model\":\"sql-lora\",\"lora_path\":\"other\",\"lora_path\":\"sql-lora\"}", out);
        assertEquals("sql-lora", new ObjectMapper().readTree(out).get("lora_path").asText(), "the last duplicate wins");
        assertEquals("{ \"lora_path\":null}", append("{ }", "lora_path", "null"), "an empty object gets no comma");
        assertThrows(IllegalArgumentException.class, () -> append("[1]", "x", "1"));
    }

    @Test
    void quotedNamesAreValidJsonStrings() throws Exception {
        String name = "a\"b\\c\nd\u0001é";
        String q = JsonMembers.quote(name);
        assertEquals(name, new ObjectMapper().readTree(q).asText());
    }
}
