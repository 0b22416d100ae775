package io.kvgate.dataplane.prompt;

import io.kvgate.dataplane.request.RequestFields;
import io.kvgate.dataplane.route.Rule;
import java.util.List;

/**
 * The {@code X-Kvgate-Warning} response header for {@code chat_template_kwargs} the chat template in use does not
 * declare (issue #13 item 6). The keys are still forwarded: vLLM drops them without a word
 * ({@code resolve_chat_template_kwargs} keeps only the template's undeclared variables and
 * {@code apply_chat_template}'s own parameters), SGLang hands them to the template, which ignores them — either way
 * a misspelt {@code enable_thinking} is a silent no-op, which the header makes visible. Stateless.
 */
public final class TemplateWarnings {
    /** The response header. */
    public static final String HEADER = io.kvgate.dataplane.request.ParsedRequest.WARNING_HEADER;
    /** At most this many keys are named (the rest are counted), each cut to {@link #MAX_KEY_CHARS} characters. */
    static final int MAX_KEYS = 8;
    static final int MAX_KEY_CHARS = 64;

    private TemplateWarnings() {}

    /**
     * The warning for a chat request of {@code rule}, or null (no {@code chat_template_kwargs}, no template to judge
     * by, every key declared). I/O thread; allocates only for requests that send the field.
     */
    public static String forRequest(Rule rule, RequestFields fields) {
        if (fields.templateKwargs.isEmpty()) {
            return null;
        }
        PromptPipeline p = PromptPipeline.of(rule);
        List<String> undeclared = p.undeclaredKwargs(fields.templateKwargs, fields.hasTools);
        return undeclared.isEmpty() ? null : header(undeclared, p.templateFor(fields.hasTools));
    }

    /** The header value: ASCII only (key names are escaped), bounded in length. */
    static String header(List<String> keys, PromptPipeline.Template t) {
        StringBuilder sb = new StringBuilder(160).append("chat_template_kwargs ");
        int n = Math.min(keys.size(), MAX_KEYS);
        for (int i = 0; i < n; i++) {
            if (i > 0) {
                sb.append(", ");
            }
            sb.append('\'');
            appendKey(sb, keys.get(i));
            sb.append('\'');
        }
        if (keys.size() > n) {
            sb.append(" and ").append(keys.size() - n).append(" more");
        }
        boolean one = keys.size() == 1;
        sb.append(one ? " is" : " are").append(" not declared by the chat template in use (").append(t.source().label())
            .append(", sha256 ").append(t.sha256(), 0, 12).append("): vLLM drops ").append(one ? "it" : "them")
            .append(", SGLang passes ").append(one ? "it" : "them").append(" to the template, which ignores ")
            .append(one ? "it" : "them");
        return sb.toString();
    }

    private static void appendKey(StringBuilder sb, String key) {
        int len = Math.min(key.length(), MAX_KEY_CHARS);
        for (int i = 0; i < len; i++) {
            char c = key.charAt(i);
            if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
                sb.append(c);
            } else {
                sb.append(String.format("\\u%04x", (int) c));
            }
        }
        if (key.length() > len) {
            sb.append("...");
        }
    }
}
