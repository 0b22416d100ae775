package io.kvgate.index.prompt;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Request validation (the OpenAI {@code param} of every refusal) and vLLM conventions, on the Qwen3 template. */
class PromptRendererTest {
    private static final JsonNode CFG = TestSupport.tokenizerConfig("qwen3");
    private static final PromptRenderer QWEN3 = new PromptRenderer((text, add) -> new int[] {text.length(), add ? 1 : 0},
            CFG.get("chat_template").asText(), null, "<|im_end|>");

    private static JsonNode json(String s) throws Exception {
        return TestSupport.JSON.readTree(s.replace('\'', '"'));
    }

    private static String param(String body) throws Exception {
        JsonNode b = json(body);
        return assertThrows(PromptException.class, () -> QWEN3.renderChatText(b)).param();
    }

    @Test
    void chatValidationNamesTheField() throws Exception {
        assertEquals("messages", param("{'model':'m'}"));
        assertEquals("messages", param("{'messages':[]}"));
        assertEquals("messages", param("{'messages':'hi'}"));
        assertEquals("messages[0].role", param("{'messages':[{'content':'x'}]}"));
        assertEquals("messages[1]", param("{'messages':[{'role':'user','content':'x'}, 3]}"));
        assertEquals("messages[0].content", param("{'messages':[{'role':'user','content':5}]}"));
        assertEquals("messages[0].content[1].type",
                param("{'messages':[{'role':'user','content':[{'type':'text','text':'a'},{'type':'image_url','image_url':{'url':'x'}}]}]}"));
        assertEquals("add_generation_prompt", param("{'messages':[{'role':'user','content':'x'}],'add_generation_prompt':'yes'}"));
        assertEquals("continue_final_message",
                param("{'messages':[{'role':'assistant','content':'x'}],'continue_final_message':true}"));
        assertEquals("tools[0].function.name", param("{'messages':[{'role':'user','content':'x'}],'tools':[{'type':'function','function':{}}]}"));
        assertEquals("tools[0].type", param("{'messages':[{'role':'user','content':'x'}],'tools':[{'type':'web','function':{'name':'f'}}]}"));
        assertEquals("messages[0].tool_calls[0].function.arguments",
                param("{'messages':[{'role':'assistant','content':'','tool_calls':[{'id':'1','type':'function','function':{'name':'f','arguments':'{bad'}}]}]}"));
        assertEquals("chat_template_kwargs.messages", param("{'messages':[{'role':'user','content':'x'}],'chat_template_kwargs':{'messages':[]}}"));
        assertEquals("body", assertThrows(PromptException.class, () -> QWEN3.renderChatText(json("[1]"))).param());
    }

    @Test
    void continueFinalMessageLeavesTheAssistantTurnOpen() throws Exception {
        String out = QWEN3.renderChatText(json("{'messages':[{'role':'user','content':'Hi'},{'role':'assistant','content':'Hello, I am '}],"
                + "'add_generation_prompt':false,'continue_final_message':true}"));
        assertEquals("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello, I am ", out);
    }

    @Test
    void kwargsReachTheTemplateAndTextPartsJoinWithNewline() throws Exception {
        String out = QWEN3.renderChatText(json("{'messages':[{'role':'user','content':[{'type':'text','text':'a'},{'type':'text','text':'b'}]}],"
                + "'chat_template_kwargs':{'enable_thinking':false}}"));
        assertEquals("<|im_start|>user\na\nb<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n", out);
    }

    @Test
    void toolCallArgumentsStringIsParsedAndReserialized() throws Exception {
        String out = QWEN3.renderChatText(json("{'messages':[{'role':'user','content':'w?'},{'role':'assistant','content':null,"
                + "'tool_calls':[{'id':'c1','type':'function','function':{'name':'get','arguments':'{\\'city\\':  \\'Zürich\\'}'}}]},"
                + "{'role':'tool','tool_call_id':'c1','content':'sunny'}]}"));
        assertTrue(out.contains("<tool_call>\n{\"name\": \"get\", \"arguments\": {\"city\": \"Zürich\"}}\n</tool_call>"), out);
        assertTrue(out.endsWith("<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n<|im_start|>assistant\n"), out);
    }

    @Test
    void toolsAreDumpedLikeVllmsPydanticModel() throws Exception {
        String out = QWEN3.renderChatText(json("{'messages':[{'role':'user','content':'x'}],'tools':[{'function':{'parameters':{'type':'object'},'name':'f'}}]}"));
        assertTrue(out.contains("{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": null, \"parameters\": {\"type\": \"object\"}}}"), out);
    }

    @Test
    void raiseExceptionBecomesA400WithTheTemplatesMessage() throws Exception {
        PromptRenderer strict = new PromptRenderer((t, a) -> new int[0],
                "{% if messages[0].role != 'user' %}{{ raise_exception('first message must be user') }}{% endif %}ok", null, null);
        PromptException e = assertThrows(PromptException.class,
                () -> strict.renderChatText(json("{'messages':[{'role':'assistant','content':'x'}]}")));
        assertEquals("messages", e.param());
        assertEquals("first message must be user", e.getMessage());
    }

    @Test
    void badTemplateFailsAtConstruction() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> new PromptRenderer((t, a) -> new int[0], "{% if %}", null, null));
        assertTrue(e.getMessage().contains("line 1"), e.getMessage());
    }

    @Test
    void completionShapes() throws Exception {
        List<RenderedPrompt> one = QWEN3.renderCompletion(json("{'prompt':'abc'}"));
        assertArrayEquals(new int[] {3, 1}, one.get(0).tokenIds());
        assertEquals(2, QWEN3.renderCompletion(json("{'prompt':['a','bb']}")).size());
        assertArrayEquals(new int[] {5, 6}, QWEN3.renderCompletion(json("{'prompt':[5,6]}")).get(0).tokenIds());
        assertEquals(2, QWEN3.renderCompletion(json("{'prompt':[[1],[2,3]]}")).size());
        for (String[] bad : new String[][] {{"{}", "prompt"}, {"{'prompt':[]}", "prompt"}, {"{'prompt':[1,'a']}", "prompt[1]"},
                {"{'prompt':['a',[1]]}", "prompt[1]"}, {"{'prompt':[[1],[]]}", "prompt[1]"}, {"{'prompt':[-1]}", "prompt[0]"},
                {"{'prompt':[[1, 2.5]]}", "prompt[0][1]"}, {"{'prompt':7}", "prompt"}}) {
            JsonNode b = json(bad[0]);
            assertEquals(bad[1], assertThrows(PromptException.class, () -> QWEN3.renderCompletion(b)).param(), bad[0]);
        }
    }
}
