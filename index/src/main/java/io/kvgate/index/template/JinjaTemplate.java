package io.kvgate.index.template;

import java.time.Clock;
import java.util.List;
import java.util.Map;

/**
 * A compiled Jinja chat template that renders byte-for-byte as HF transformers does: Jinja2's
 * {@code ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])} with
 * transformers' {@code tojson}, {@code raise_exception} and {@code strftime_now}.
 *
 * <p>Context values are plain Java: {@code Map<String,Object>} (dict, insertion order kept), {@code List<Object>},
 * {@code String}, {@code Long}/{@code Integer}, {@code Double}, {@code Boolean}, {@code null} (None). A key absent from
 * a map is Jinja2's Undefined; a key present with {@code null} is None. Values are data: strings are never
 * re-interpreted as template code.
 *
 * <p>Threading contract: immutable after {@link #compile}; {@link #render} is reentrant and may be called from any
 * number of threads at once (all render state lives in a per-call evaluator). The context is only read.
 */
public final class JinjaTemplate {
    /** Bounds the rendered text of one call (a template looping over its own output cannot grow without limit). */
    public static final int MAX_OUTPUT_CHARS = 64 * 1024 * 1024;

    private final List<Node> body;
    private final java.util.Set<String> undeclared;

    private JinjaTemplate(List<Node> body) {
        this.body = body;
        this.undeclared = java.util.Collections.unmodifiableSet(Undeclared.of(body));
    }

    /**
     * The names this template reads from its render context, sorted: Jinja2's {@code meta.find_undeclared_variables}
     * (what vLLM keeps {@code chat_template_kwargs} to). Names the template binds itself before reading them (a
     * {@code set}, a loop target, a macro parameter) are not in it; globals such as {@code range} are.
     */
    public java.util.Set<String> undeclaredVariables() {
        return undeclared;
    }

    /** Parses the template; syntax errors, unknown tags, filters and tests fail here with the line and column. */
    public static JinjaTemplate compile(String source) throws TemplateException {
        if (source == null) {
            throw new TemplateException("template source is null", 0, 0);
        }
        try {
            return new JinjaTemplate(Parser.parse(source));
        } catch (StackOverflowError e) {
            throw new TemplateException("template nesting too deep to compile", 0, 0);
        }
    }

    /** Renders with the system clock for {@code strftime_now}. */
    public String render(Map<String, Object> context) throws TemplateException {
        return render(context, Clock.systemDefaultZone());
    }

    /** Renders with {@code clock} as the source of {@code strftime_now} (local date/time in the clock's zone). */
    public String render(Map<String, Object> context, Clock clock) throws TemplateException {
        try {
            return new Evaluator(context == null ? Map.of() : context, clock, MAX_OUTPUT_CHARS).render(body);
        } catch (StackOverflowError e) {
            throw new TemplateException("template nesting too deep", 0, 0);
        }
    }
}
