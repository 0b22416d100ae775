package io.kvgate.index.template;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Runtime value types beyond the plain Java ones. Template values are: {@code null} (None), {@link Boolean},
 * {@link Long}/{@link Integer} (int), {@link Double} (float), {@link String}, {@link List} (list), {@link Map} (dict),
 * and the types below.
 */
final class Values {
    private Values() {
    }

    /** Jinja2's default Undefined: prints empty, is falsy, iterates empty, fails on attribute access and arithmetic. */
    static final class Undefined {
        final String message;

        Undefined(String message) {
            this.message = message;
        }

        static Undefined missingName(String name) {
            return new Undefined("'" + name + "' is undefined");
        }

        static Undefined missingAttr(Object obj, Object attr) {
            return new Undefined("'" + PyOps.objectDesc(obj) + "' has no attribute " + PyOps.repr(attr));
        }
    }

    /** Python's dict_items / dict_keys / dict_values view: a list everywhere except its repr. */
    static final class DictView extends java.util.ArrayList<Object> {
        final String kind;

        DictView(String kind, java.util.Collection<?> items) {
            super(items);
            this.kind = kind;
        }

        @Override
        public boolean equals(Object o) {
            return super.equals(o);
        }

        @Override
        public int hashCode() {
            return super.hashCode();
        }
    }

    /** A Python tuple: an immutable sequence rendered as {@code (a, b)}. */
    record PyTuple(List<Object> items) { }

    /** Jinja2's {@code namespace()}: the one mutable object a template may assign attributes on. Render-local. */
    static final class Namespace {
        final Map<String, Object> attrs = new LinkedHashMap<>();
    }

    /** Something a template can call: a global function, a bound method, a macro. */
    interface PyCallable {
        Object call(Evaluator ev, List<Object> args, List<String> kwNames, List<Object> kwValues, Node at) throws TemplateException;
    }

    /** A method looked up on a value, e.g. {@code s.startswith}; dispatched by name when called. */
    record BoundMethod(Object self, String name) implements PyCallable {
        @Override
        public Object call(Evaluator ev, List<Object> args, List<String> kwNames, List<Object> kwValues, Node at)
                throws TemplateException {
            return Builtins.callMethod(ev, self, name, args, kwNames, kwValues, at);
        }
    }

    /** A macro closed over the frame it was defined in. */
    record MacroValue(Node.Macro node, Evaluator.Frame defFrame) implements PyCallable {
        @Override
        public Object call(Evaluator ev, List<Object> args, List<String> kwNames, List<Object> kwValues, Node at)
                throws TemplateException {
            return ev.callMacro(this, args, kwNames, kwValues, at);
        }
    }

    /** Jinja2's {@code loop} object; one per for-loop, advanced per iteration. */
    static final class LoopContext {
        final List<Object> items;
        int index0;
        /** Arguments of the last {@code loop.changed(...)} call; null before the first. */
        List<Object> lastChanged;

        LoopContext(List<Object> items) {
            this.items = items;
        }

        Object attr(String name) {
            int n = items.size();
            return switch (name) {
                case "index" -> (long) (index0 + 1);
                case "index0" -> (long) index0;
                case "revindex" -> (long) (n - index0);
                case "revindex0" -> (long) (n - index0 - 1);
                case "first" -> index0 == 0;
                case "last" -> index0 == n - 1;
                case "length" -> (long) n;
                case "depth" -> 1L;
                case "depth0" -> 0L;
                case "previtem" -> index0 > 0 ? items.get(index0 - 1) : new Undefined("there is no previous item");
                case "nextitem" -> index0 < n - 1 ? items.get(index0 + 1) : new Undefined("there is no next item");
                case "cycle", "changed" -> new BoundMethod(this, name);
                default -> Undefined.missingAttr(this, name);
            };
        }
    }
}
