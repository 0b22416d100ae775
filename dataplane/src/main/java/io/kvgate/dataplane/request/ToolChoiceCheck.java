package io.kvgate.dataplane.request;

import io.kvgate.control.config.RuleConfig;

/**
 * Tool calls on a rule whose engines run without a tool-call parser ({@code tool_call_parser: none}; review row 18).
 * Both engines pick the parser at startup, and without one they disagree: vLLM refuses {@code tool_choice: "auto"}
 * (also the default once {@code tools} is a non-empty list: ChatCompletionRequest.check_tool_usage) with a 400,
 * "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set" (serving_chat
 * create_chat_completion), while SGLang answers 200 with any call the model makes left in {@code content} and
 * {@code tool_calls} null. The gateway answers vLLM's 400 for both, before any engine. {@code "required"} and a named
 * function are served by both engines through structured output without a parser, and {@code "none"} asks for no
 * call, so those pass; an empty or malformed {@code tools} is the engines' own 400 (row 17). Allocation-free.
 */
public final class ToolChoiceCheck {
    /** vLLM's words (its flags named as they are: they are what an operator must add to the engines). */
    static final String MESSAGE = "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set";

    private ToolChoiceCheck() {}

    /** The 400 for a request that lets the model choose a tool on a rule without a parser, else null. */
    public static Problem problem(RequestFields f, RuleConfig rule) {
        if (!rule.withoutToolCallParser() || !f.hasTools || !f.toolsNonEmpty) {
            return null;
        }
        boolean auto = f.toolChoice == RequestFields.TOOL_CHOICE_AUTO || f.toolChoice == RequestFields.TOOL_CHOICE_ABSENT;
        return auto ? new Problem("tool_choice", "tool_call_parser", MESSAGE, "invalid_value") : null;
    }
}
