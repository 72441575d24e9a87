/* test_template.c: the Jinja engine against Python's Jinja2. Every case of
 * tests/data/templates/cases.json (48 real chat templates, six conversations each, rendered by
 * Jinja2 under Hugging Face's settings) must render byte for byte, and each case where the
 * template raises must be refused with the template's own message. Then the language's corners
 * (whitespace control, scoping, Python printing) and the bounds a hostile template meets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "../support/test_util.h"
#include "template/template.h"

/* 2026-01-15 09:30:00 UTC, the instant the cases were rendered at. */
#define CASES_NOW 1768469400

static char *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    buf[len] = '\0';
    fclose(f);
    *n = (size_t)len;
    return buf;
}

/* Renders source with vars; returns the status, *out the text or the error message. */
static syn_status render(const char *source, const char *vars, char **out) {
    syn_template *t;
    syn_status st = syn_template_parse(source, strlen(source), &t);
    if (st != SYN_OK) {
        *out = strdup(syn_last_error());
        return st;
    }
    json_t *v = vars ? json_loads(vars, 0, NULL) : NULL;
    if (vars) assert_non_null(v);
    size_t n;
    st = syn_template_render(t, v, CASES_NOW, out, &n);
    if (st != SYN_OK) *out = strdup(syn_last_error());
    json_decref(v);
    syn_template_free(t);
    return st;
}

static void expect_render(const char *source, const char *vars, const char *expected) {
    char *out;
    syn_status st = render(source, vars, &out);
    if (st != SYN_OK) fail_msg("'%s' failed: %s", source, out);
    assert_string_equal(out, expected);
    free(out);
}

static void expect_error(const char *source, const char *vars, syn_status status,
                         const char *message_part) {
    char *out;
    syn_status st = render(source, vars, &out);
    if (st == SYN_OK) fail_msg("'%s' rendered '%s', expected an error", source, out);
    assert_int_equal(st, status);
    if (!strstr(out, message_part))
        fail_msg("'%s': error '%s' lacks '%s'", source, out, message_part);
    free(out);
}

static void real_templates_render_as_jinja2_does(void **state) {
    (void)state;
    size_t n;
    char *text = read_file(test_data_path("templates/cases.json"), &n);
    json_error_t jerr;
    json_t *cases = json_loads(text, 0, &jerr);
    assert_non_null(cases);
    free(text);
    size_t i, exact = 0, refused = 0, failed = 0;
    json_t *c;
    json_array_foreach(cases, i, c) {
        const char *name = json_string_value(json_object_get(c, "template"));
        const char *which = json_string_value(json_object_get(c, "case"));
        const json_t *expected = json_object_get(c, "expected");
        const json_t *error = json_object_get(c, "error");
        if (!expected && !error) continue; /* Jinja2 itself could not render it */
        char path[512];
        snprintf(path, sizeof path, "templates/%s.jinja", name);
        size_t src_n;
        char *src = read_file(test_data_path(path), &src_n);
        syn_template *t;
        syn_status st = syn_template_parse(src, src_n, &t);
        free(src);
        if (st != SYN_OK) {
            print_message("%s/%s: parse: %s\n", name, which, syn_last_error());
            failed++;
            continue;
        }
        char *out = NULL;
        size_t out_n = 0;
        st = syn_template_render(t, json_object_get(c, "variables"), CASES_NOW, &out, &out_n);
        syn_template_free(t);
        if (expected) {
            const char *want = json_string_value(expected);
            if (st != SYN_OK) {
                print_message("%s/%s: %s\n", name, which, syn_last_error());
                failed++;
            } else if (out_n != json_string_length(expected) || memcmp(out, want, out_n) != 0) {
                size_t k = 0;
                while (k < out_n && want[k] == out[k])
                    k++;
                print_message("%s/%s: differs at byte %zu: got '%.60s' want '%.60s'\n", name, which,
                              k, out + k, want + k);
                failed++;
            } else {
                exact++;
            }
        } else {
            char want[600];
            snprintf(want, sizeof want, "template: %s", json_string_value(error));
            if (st == SYN_OK || strcmp(syn_last_error(), want) != 0) {
                print_message("%s/%s: expected the error '%s', got %s\n", name, which, want,
                              st == SYN_OK ? "a render" : syn_last_error());
                failed++;
            } else {
                refused++;
            }
        }
        free(out);
    }
    print_message("%zu cases exact, %zu refused as Jinja2 refuses them, %zu wrong\n", exact,
                  refused, failed);
    json_decref(cases);
    assert_int_equal(failed, 0);
    assert_true(exact >= 267 && refused >= 7);
}

static void whitespace_control(void **state) {
    (void)state;
    /* trim_blocks drops the newline after a block tag, lstrip_blocks its indentation */
    expect_render("a\n  {% if true %}\n  b\n  {% endif %}\nc", NULL, "a\n  b\nc");
    expect_render("x {{- ' y ' -}} z", NULL, "x y z");
    expect_render("a  {%- if true %} b{% endif %}", NULL, "a b");
    expect_render("  {%+ if true %}b{% endif %}", NULL, "  b");
    expect_render("{% if true +%}\nb{% endif %}", NULL, "\nb");
    expect_render("{# note #}\nx", NULL, "x");
    expect_render("{{ 'a' }}\nb", NULL, "a\nb"); /* no trim after an expression */
    expect_render("text\n", NULL, "text");       /* one trailing newline is dropped */
    expect_render("{% raw %}{{ x }}{% endraw %}", NULL, "{{ x }}");
    expect_render("a\r\nb", NULL, "a\nb");
}

static void scopes_and_namespaces(void **state) {
    (void)state;
    expect_render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}", NULL, "1");
    expect_render("{% if true %}{% set x = 2 %}{% endif %}{{ x }}", NULL, "2");
    expect_render("{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}"
                  "{% endfor %}{{ ns.n }}",
                  NULL, "3");
    expect_render("{% set b %}in {{ 1 + 1 }}{% endset %}[{{ b }}]", NULL, "[in 2]");
    expect_render("{% macro m(a, b=2) %}{{ a }}{{ b }}{{ varargs }}{{ kwargs }}{% endmacro %}"
                  "{{ m(1) }} {{ m(1, 3, 4, z=5) }}",
                  NULL, "12(){} 13(4,){'z': 5}");
    expect_render("{% macro w() %}<{{ caller() }}>{% endmacro %}{% call w() %}body{% endcall %}",
                  NULL, "<body>");
    expect_render(
        "{% for x in [1, 2, 3, 4] if x is odd %}{{ loop.index }}/{{ loop.length }}:{{ x }}"
        "{% if not loop.last %},{% endif %}{% endfor %}",
        NULL, "1/2:1,2/2:3");
    expect_render("{% for x in [1, 2, 3] %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}"
                  "{% if x == 3 %}{% break %}{% endif %}{% endfor %}",
                  NULL, "13");
    expect_render("{% for x in [] %}a{% else %}empty{% endfor %}", NULL, "empty");
    expect_render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}", NULL,
                  "a=1;b=2;");
    expect_render("{% filter upper %}shout {{ 'it' }}{% endfilter %}", NULL, "SHOUT IT");
    expect_render("{% generation %}kept{% endgeneration %}", NULL, "kept");
}

static void python_values(void **state) {
    (void)state;
    expect_render(
        "{{ none }} {{ true }} {{ 1.0 }} {{ 1e20 }} {{ 0.1 + 0.2 }} {{ 1e-5 }} {{ 7 / 2 }}", NULL,
        "None True 1.0 1e+20 0.30000000000000004 1e-05 3.5");
    expect_render("{{ [1, 'a', none] }} {{ {'k': (1, 2)} }} {{ (1,) }} {{ \"it's\" }}", NULL,
                  "[1, 'a', None] {'k': (1, 2)} (1,) it's");
    expect_render("{{ [\"it's\"] }}", NULL, "[\"it's\"]");
    expect_render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 'ab' * 2 }}", NULL,
                  "3 -4 2 1024 abab");
    expect_render("{{ x|tojson }}", "{\"x\": {\"b\": [1, 2.5, null], \"a\": \"é\\n\"}}",
                  "{\"b\": [1, 2.5, null], \"a\": \"é\\n\"}");
    expect_render("{{ x|tojson(indent=2) }}", "{\"x\": {\"a\": [1]}}",
                  "{\n  \"a\": [\n    1\n  ]\n}");
    expect_render("{{ x|tojson(ensure_ascii=true, sort_keys=true) }}",
                  "{\"x\": {\"b\": \"é\", \"a\": 1}}", "{\"a\": 1, \"b\": \"\\u00e9\"}");
    expect_render("{{ 'héllo'|length }} {{ 'héllo'[1] }} {{ 'abc'[::-1] }} {{ [1, 2, 3][1:] }}",
                  NULL, "5 é cba [2, 3]");
    expect_render("{{ ' a b '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'xxaxx'.strip('x') }}",
                  NULL, "['a', 'b'] ['a', 'b,c'] a");
    expect_render("{{ 'Hello World'.lower().title() }} {{ 'ABC'|capitalize }} {{ 'a-b'|upper }}",
                  NULL, "Hello World Abc A-B");
    expect_render("{{ x is defined }} {{ x|default('d') }} {{ x ~ 'y' }} {{ none is none }}", NULL,
                  "False d y True");
    expect_render("{{ [{'a': 1}, {'b': 2}]|selectattr('a')|list }} "
                  "{{ [{'n': 'x'}, {'n': 'y'}]|map(attribute='n')|join(', ') }}",
                  NULL, "[{'a': 1}] x, y");
    expect_render("{{ {'b': 1, 'A': 2}|dictsort }} {{ ['b', 'A']|sort }}", NULL,
                  "[('A', 2), ('b', 1)] ['A', 'b']");
    expect_render("{{ '%s is %d' % ('x', 3) }} {{ 'a\nb'|indent(2, true) }}", NULL,
                  "x is 3   a\n  b");
    expect_render("{{ strftime_now('%d %b %Y') }}", NULL, "15 Jan 2026");
}

static void errors_name_their_cause(void **state) {
    (void)state;
    expect_error("{{ raise_exception('no system role') }}", NULL, SYN_ERR_INVALID_ARGUMENT,
                 "template: no system role");
    expect_error("{{ x.y }}", NULL, SYN_ERR_INVALID_ARGUMENT, "'x' is undefined");
    expect_error("{{ 'a' + 1 }}", NULL, SYN_ERR_INVALID_ARGUMENT, "can only concatenate");
    expect_error("{% if x %}open", NULL, SYN_ERR_FORMAT, "'if' is not closed");
    expect_error("{% endfor %}", NULL, SYN_ERR_FORMAT, "unexpected 'endfor'");
    expect_error("{{ 1 +* 2 }}", NULL, SYN_ERR_FORMAT, "line 1");
    expect_error("{% include 'x.jinja' %}", NULL, SYN_ERR_UNSUPPORTED, "include");
    expect_error("{{ x|nosuchfilter }}", NULL, SYN_ERR_INVALID_ARGUMENT, "nosuchfilter");
}

/* prefix, then unit n times, then tail n times: a malloc'd string. */
static char *concat3(const char *prefix, const char *unit, size_t n, const char *tail) {
    size_t lp = strlen(prefix), lu = strlen(unit), lt = strlen(tail);
    char *s = malloc(lp + n * (lu + lt) + 1);
    assert_non_null(s);
    char *p = s;
    memcpy(p, prefix, lp);
    p += lp;
    for (size_t i = 0; i < n; i++, p += lu)
        memcpy(p, unit, lu);
    for (size_t i = 0; i < n; i++, p += lt)
        memcpy(p, tail, lt);
    *p = '\0';
    return s;
}

/* Each hostile template is refused by a bound, quickly. */
static void hostile_templates_meet_a_bound(void **state) {
    (void)state;
    struct {
        const char *what;
        char *source;
        const char *bound;
    } cases[7];
    cases[0].what = "a loop without end";
    cases[0].source = strdup("{% for i in range(1000000) %}{% for j in range(1000000) %}x"
                             "{% endfor %}{% endfor %}");
    cases[0].bound = "bound";
    cases[1].what = "recursion without end";
    cases[1].source = strdup("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}");
    cases[1].bound = "recursion bound";
    cases[2].what = "a gigabyte of output";
    cases[2].source = strdup("{% for i in range(100000) %}{{ 'x' * 10000 }}{% endfor %}");
    cases[2].bound = "output bound";
    /* 10,000 nested blocks and 10,000 nested parentheses */
    char *blocks = concat3("", "{% if true %}", 10000, "{% endif %}");
    char *parens = concat3("{{ ", "(", 10000, ")");
    parens = realloc(parens, strlen(parens) + 4);
    strcat(parens, " }}");
    cases[3].what = "10,000 nested blocks";
    cases[3].source = blocks;
    cases[3].bound = "nesting bound";
    cases[4].what = "10,000 nested parentheses";
    cases[4].source = parens;
    cases[4].bound = "nesting bound";
    cases[5].what = "a macro that calls itself twice, 60 deep";
    cases[5].source = strdup("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}"
                             "{% endmacro %}{{ f(60) }}");
    cases[5].bound = "bound";
    cases[6].what = "a long expression in a long loop";
    cases[6].source = concat3("{% for i in range(400000) %}{% set x = 0", " + i", 200, "");
    cases[6].source = realloc(cases[6].source, strlen(cases[6].source) + 16);
    strcat(cases[6].source, " %}{% endfor %}");
    cases[6].bound = "evaluation bound";
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        char *out;
        syn_status st = render(cases[i].source, NULL, &out);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
        print_message("%s: %s (%.3f s)\n", cases[i].what, out, seconds);
        assert_int_equal(st, SYN_ERR_UNSUPPORTED);
        assert_non_null(strstr(out, cases[i].bound));
        assert_true(seconds < 1.0);
        free(out);
        free(cases[i].source);
    }
    /* the source itself */
    size_t big = SYN_TEMPLATE_MAX_SOURCE + 1;
    char *huge = malloc(big + 1);
    memset(huge, 'x', big);
    huge[big] = '\0';
    syn_template *t;
    assert_int_equal(syn_template_parse(huge, big, &t), SYN_ERR_UNSUPPORTED);
    assert_non_null(strstr(syn_last_error(), "bound"));
    free(huge);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(real_templates_render_as_jinja2_does),
        cmocka_unit_test(whitespace_control),
        cmocka_unit_test(scopes_and_namespaces),
        cmocka_unit_test(python_values),
        cmocka_unit_test(errors_name_their_cause),
        cmocka_unit_test(hostile_templates_meet_a_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
