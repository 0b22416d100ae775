/**
 * A Jinja interpreter that renders a model's {@code chat_template} byte-for-byte as HF transformers does
 * (Jinja2 {@code ImmutableSandboxedEnvironment}, {@code trim_blocks}, {@code lstrip_blocks}, loopcontrols, transformers'
 * {@code tojson}/{@code raise_exception}/{@code strftime_now}, its {@code {% generation %}} tag).
 *
 * <p>Pipeline: {@link io.kvgate.index.template.Lexer} (Jinja2's whitespace rules) → {@link io.kvgate.index.template.Parser}
 * (Jinja2's grammar and precedence) → immutable {@link io.kvgate.index.template.Node} tree → per-render
 * {@link io.kvgate.index.template.Evaluator} over plain Java values with Python semantics
 * ({@link io.kvgate.index.template.PyOps}, {@link io.kvgate.index.template.PyStr}, {@link io.kvgate.index.template.Builtins}).
 *
 * <p>Supported: print/if/elif/else/for (filter, else, unpacking, loop.*, break/continue)/set (tuple, namespace
 * attribute, block set with filters)/macro (defaults, varargs, kwargs, {@code call} blocks with {@code caller})/with/
 * filter blocks/raw/comments; all expression syntax incl. slices with steps, chained comparisons, inline if,
 * {@code *args}/{@code **kwargs} calls; filters abs attr capitalize center count d default dictsort e escape first float
 * forceescape format indent int items join last length list lower map max min reject rejectattr replace reverse round
 * safe select selectattr sort string sum title tojson trim truncate unique upper wordcount; every Jinja2 test; str, dict
 * and list methods templates use. Strings index and count by code point, as in Python.
 *
 * <p>Not supported (compile error, never a silently different output): include/extends/import/block, recursive loops,
 * autoescape, filters batch filesizeformat groupby pprint random slice striptags urlencode urlize wordwrap xmlattr,
 * format specs in {@code str.format}. Known differences: filters that return generators in Jinja2 (map, select, reverse
 * ...) return lists, so printing one directly differs (Jinja2 prints {@code <generator object ...>}); Markup auto-escape
 * semantics of {@code escape} output are not modelled; integers are 64-bit (overflow is an error, not a bigint).
 */
package io.kvgate.index.template;
