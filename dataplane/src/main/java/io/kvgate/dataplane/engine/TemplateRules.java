package io.kvgate.dataplane.engine;

import java.util.function.UnaryOperator;

/**
 * How an engine chooses the chat template it renders with (prompt.PromptPipeline does the choosing):
 *
 * @param chatTemplateFile  the text it renders from a rule's {@code chat_template} file's source (its
 *                          {@code --chat-template}), or null: it takes no template file (configuration refuses one)
 * @param processorFirst    a processor template ({@code chat_template.json}/{@code processor_config.json}) wins over
 *                          the tokenizer's, for plain and tool requests alike (SGLang)
 * @param processorForPlain a processor template renders requests without tools; the tokenizer's still renders those
 *                          with tools (vLLM)
 */
public record TemplateRules(UnaryOperator<String> chatTemplateFile, boolean processorFirst, boolean processorForPlain) {
    /**
     * The tokenizer's own templates, with transformers' {@code tool_use} switch: engines that take no template file
     * and no processor template, and a model directory used without a rule.
     */
    public static final TemplateRules TOKENIZER_ONLY = new TemplateRules(null, false, false);
}
