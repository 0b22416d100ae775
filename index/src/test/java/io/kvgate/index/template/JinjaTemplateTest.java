package io.kvgate.index.template;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Contract tests beyond Jinja2 parity: errors carry positions, raise_exception carries its message, bounds, threads. */
class JinjaTemplateTest {
    private static Map<String, Object> ctx(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return m;
    }

    @Test
    void compileErrorNamesLineAndColumn() {
        TemplateException e = assertThrows(TemplateException.class, () -> JinjaTemplate.compile("line1\n{{ x|nosuch }}"));
        assertEquals(2, e.line());
        assertEquals(6, e.column());
        assertTrue(e.getMessage().contains("No filter named 'nosuch'"), e.getMessage());
        assertFalse(e.raised());
    }

    @Test
    void renderErrorNamesLine() throws Exception {
        JinjaTemplate t = JinjaTemplate.compile("a\nb\n{{ missing.attr }}");
        TemplateException e = assertThrows(TemplateException.class, () -> t.render(ctx()));
        assertEquals(3, e.line());
        assertTrue(e.detail().contains("'missing' is undefined"), e.detail());
    }

    @Test
    void raiseExceptionCarriesTheTemplateAuthorsMessage() throws Exception {
        JinjaTemplate t = JinjaTemplate.compile("{{ raise_exception('Only user and assistant roles are supported!') }}");
        TemplateException e = assertThrows(TemplateException.class, () -> t.render(ctx()));
        assertTrue(e.raised());
        assertEquals("Only user and assistant roles are supported!", e.detail());
        assertEquals(1, e.line());
    }

    @Test
    void contentIsNeverReinterpretedAsTemplateCode() throws Exception {
        JinjaTemplate t = JinjaTemplate.compile("{{ m }}|{{ m|trim }}|{{ m ~ '' }}");
        String evil = "{{ raise_exception('x') }}{% for i in range(99999) %}{% endfor %}{# #}";
        assertEquals(evil + "|" + evil + "|" + evil, t.render(ctx("m", evil)));
    }

    @Test
    void outputIsBounded() throws Exception {
        // 100000 iterations (the sandbox's range limit) of a 1 KiB string nested 1000 times exceeds the output cap.
        JinjaTemplate t = JinjaTemplate.compile("{% for i in range(100000) %}{% for j in range(1000) %}{{ s }}{% endfor %}{% endfor %}");
        TemplateException e = assertThrows(TemplateException.class, () -> t.render(ctx("s", "x".repeat(1024))));
        assertTrue(e.detail().contains("rendered output exceeds"), e.detail());
    }

    @Test
    void rangeIsBoundedLikeTheSandbox() throws Exception {
        JinjaTemplate t = JinjaTemplate.compile("{{ range(100001)|length }}");
        assertThrows(TemplateException.class, () -> t.render(ctx()));
        assertEquals("100000", JinjaTemplate.compile("{{ range(100000)|length }}").render(ctx()));
    }

    @Test
    void macroRecursionIsBounded() throws Exception {
        JinjaTemplate t = JinjaTemplate.compile("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
        TemplateException e = assertThrows(TemplateException.class, () -> t.render(ctx()));
        assertTrue(e.detail().contains("recursion"), e.detail());
    }

    @Test
    void renderDoesNotMutateTheContext() throws Exception {
        JinjaTemplate t = JinjaTemplate.compile("{% set messages = messages[1:] %}{% set x = 1 %}{{ messages|length }}");
        List<Object> msgs = new ArrayList<>(List.of("a", "b", "c"));
        Map<String, Object> c = ctx("messages", msgs);
        assertEquals("2", t.render(c));
        assertEquals(3, msgs.size());
        assertEquals(1, c.size());
    }

    @Test
    void namespaceIsPerRender() throws Exception {
        JinjaTemplate t = JinjaTemplate.compile("{% set ns = namespace(n=0) %}{% for i in items %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}");
        assertEquals("6", t.render(ctx("items", List.of(1L, 2L, 3L))));
        assertEquals("6", t.render(ctx("items", List.of(1L, 2L, 3L))));
    }

    @Test
    @Timeout(60)
    void oneCompiledTemplateRendersConcurrently() throws Exception {
        JinjaTemplate t = JinjaTemplate.compile("{% set ns = namespace(s='') %}{% for m in messages %}{% set ns.s = ns.s ~ m.content %}"
                + "{{ loop.index }}:{{ m.content }};{% endfor %}{{ ns.s|length }}");
        int threads = 4;
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Future<Boolean>> results = new ArrayList<>();
            for (int th = 0; th < threads; th++) {
                final int id = th;
                results.add(pool.submit((Callable<Boolean>) () -> {
                    for (int round = 0; round < 300; round++) {
                        List<Object> msgs = new ArrayList<>();
                        StringBuilder expected = new StringBuilder();
                        int total = 0;
                        for (int k = 0; k < 1 + (round + id) % 7; k++) {
                            String content = "t" + id + "r" + round + "k" + k;
                            msgs.add(Map.of("content", content));
                            expected.append(k + 1).append(':').append(content).append(';');
                            total += content.length();
                        }
                        expected.append(total);
                        if (!t.render(ctx("messages", msgs)).contentEquals(expected)) {
                            return false;
                        }
                    }
                    return true;
                }));
            }
            for (Future<Boolean> f : results) {
                assertTrue(f.get(50, TimeUnit.SECONDS));
            }
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void javaIntegersAndNullsBehaveLikePython() throws Exception {
        JinjaTemplate t = JinjaTemplate.compile("{{ i + 1 }} {{ n is none }} {{ n }} {{ missing is defined }} {{ f }}");
        assertEquals("42 True None False 0.5", t.render(ctx("i", 41, "n", null, "f", 0.5)));
    }
}
