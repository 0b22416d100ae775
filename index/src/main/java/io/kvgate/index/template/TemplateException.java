package io.kvgate.index.template;

/**
 * A template failed to compile or to render. The message names the line and column where the template went wrong.
 * A template's own {@code raise_exception(msg)} call surfaces as an instance with {@link #raised()} true and
 * {@link #detail()} equal to {@code msg}, so callers can pass the template author's message to the client verbatim.
 */
public class TemplateException extends Exception {
    private final int line;
    private final int column;
    private final String detail;
    private final boolean raised;

    public TemplateException(String detail, int line, int column) {
        this(detail, line, column, false);
    }

    TemplateException(String detail, int line, int column, boolean raised) {
        super(line > 0 ? detail + " (template line " + line + ", column " + column + ")" : detail, null, false, false);
        this.detail = detail;
        this.line = line;
        this.column = column;
        this.raised = raised;
    }

    /** 1-based template line of the failure, or 0 when unknown. */
    public int line() {
        return line;
    }

    /** 1-based template column of the failure, or 0 when unknown. */
    public int column() {
        return column;
    }

    /** The message without the position suffix; for {@code raise_exception(msg)} exactly {@code msg}. */
    public String detail() {
        return detail;
    }

    /** True when the template itself called {@code raise_exception}. */
    public boolean raised() {
        return raised;
    }
}
