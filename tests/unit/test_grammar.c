/* test_grammar.c: GBNF parsing (desugaring, errors) and the byte matcher (accept, reject,
 * completion, UTF-8 classes, the bounds on hostile grammars). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "../support/test_util.h"
#include "core/clock.h"
#include "grammar/grammar.h"
#include "synapse.h"
#include "tokenizer/tokenizer.h"

/* Whether the whole of text is a sentence of the grammar; -1 when it stops being a prefix. */
static int match(const char *gbnf, const char *text) {
    syn_grammar *g;
    assert_int_equal(syn_grammar_parse_gbnf(gbnf, &g), SYN_OK);
    syn_grammar_matcher *m;
    assert_int_equal(syn_grammar_matcher_new(g, &m), SYN_OK);
    bool ok;
    assert_int_equal(syn_grammar_matcher_feed(m, text, strlen(text), &ok), SYN_OK);
    int r = ok ? syn_grammar_matcher_can_end(m) : -1;
    syn_grammar_matcher_free(m);
    syn_grammar_free(g);
    return r;
}

static void test_literals_alternatives_groups(void **state) {
    (void)state;
    const char *g = "root ::= \"yes\" | \"no\" | (\"may\" \"be\")  # a comment\n";
    assert_int_equal(match(g, "yes"), 1);
    assert_int_equal(match(g, "no"), 1);
    assert_int_equal(match(g, "maybe"), 1);
    assert_int_equal(match(g, "ye"), 0); /* a prefix, not complete */
    assert_int_equal(match(g, "yesx"), -1);
    assert_int_equal(match(g, "x"), -1);
    assert_int_equal(match(g, ""), 0);
}

static void test_rule_references_across_lines(void **state) {
    (void)state;
    const char *g = "root ::= greet \" \" name\n"
                    "greet ::= \"hi\"\n"
                    "   | \"hello\"\n"
                    "name ::= [A-Z] [a-z]*\n";
    assert_int_equal(match(g, "hi Bob"), 1);
    assert_int_equal(match(g, "hello X"), 1);
    assert_int_equal(match(g, "hello x"), -1);
    assert_int_equal(match(g, "hi "), 0);
}

static void test_classes_and_repetition(void **state) {
    (void)state;
    assert_int_equal(match("root ::= [0-9]+", "0123"), 1);
    assert_int_equal(match("root ::= [0-9]+", ""), 0);
    assert_int_equal(match("root ::= [^0-9]*", "abc"), 1);
    assert_int_equal(match("root ::= [^0-9]*", "ab1"), -1);
    assert_int_equal(match("root ::= \"a\"? \"b\"", "b"), 1);
    assert_int_equal(match("root ::= \"a\"? \"b\"", "ab"), 1);
    assert_int_equal(match("root ::= \"a\"? \"b\"", "aab"), -1);
    assert_int_equal(match("root ::= \"ab\"{2,3}", "abab"), 1);
    assert_int_equal(match("root ::= \"ab\"{2,3}", "ababab"), 1);
    assert_int_equal(match("root ::= \"ab\"{2,3}", "abababab"), -1);
    assert_int_equal(match("root ::= \"ab\"{2,3}", "ab"), 0);
    assert_int_equal(match("root ::= [a]{3}", "aaa"), 1);
    assert_int_equal(match("root ::= [a]{3}", "aaaa"), -1);
    assert_int_equal(match("root ::= [a]{2,}", "aaaaaa"), 1);
    assert_int_equal(match("root ::= [a]{2,}", "a"), 0);
    assert_int_equal(match("root ::= [\\-x]+", "-x-"), 1);
    assert_int_equal(match("root ::= \"\\x41\\n\\\"\"", "A\n\""), 1);
}

static void test_utf8_classes(void **state) {
    (void)state;
    /* é (2 bytes), € (3 bytes), 😀 (4 bytes) */
    assert_int_equal(match("root ::= .+", "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"), 1);
    assert_int_equal(match("root ::= .", "\xff"), -1);         /* not UTF-8 */
    assert_int_equal(match("root ::= .", "\xed\xa0\x80"), -1); /* a surrogate */
    assert_int_equal(match("root ::= [^\"]*", "\xe2\x82\xac"), 1);
    assert_int_equal(match("root ::= [\\u00e0-\\u00ff]", "\xc3\xa9"), 1);
    assert_int_equal(match("root ::= [\\u00e0-\\u00ff]", "\xc3\x80"), -1);
    assert_int_equal(match("root ::= \"\xc3\xa9t\xc3\xa9\"", "\xc3\xa9t\xc3\xa9"), 1);
    assert_int_equal(match("root ::= [\\u0800-\\U0010FFFF]", "\xf4\x8f\xbf\xbf"), 1);
    assert_int_equal(match("root ::= [\\u0800-\\U0010FFFF]", "\xdf\xbf"), -1);
}

static void test_json_like_grammar(void **state) {
    (void)state;
    const char *g = "root ::= value\n"
                    "value ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
                    "object ::= \"{\" ws (string ws \":\" ws value ws (\",\" ws string ws \":\" ws "
                    "value ws)*)? \"}\"\n"
                    "array ::= \"[\" ws (value ws (\",\" ws value ws)*)? \"]\"\n"
                    "string ::= \"\\\"\" ([^\"\\\\] | \"\\\\\" [\"\\\\nt])* \"\\\"\"\n"
                    "number ::= \"-\"? [0-9]+ (\".\" [0-9]+)?\n"
                    "ws ::= [ ]{0,4}\n";
    assert_int_equal(match(g, "{\"a\": [1, 2.5, -3], \"b\": {\"c\": null}}"), 1);
    assert_int_equal(match(g, "[true,false,\"x\\n\"]"), 1);
    assert_int_equal(match(g, "{\"a\" 1}"), -1);
    assert_int_equal(match(g, "{\"a\":     1}"), -1); /* whitespace is bounded */
    assert_int_equal(match(g, "[[[[[[[[[[1]]]]]]]]]]"), 1);
}

static void test_rejection_leaves_state(void **state) {
    (void)state;
    syn_grammar *g;
    assert_int_equal(syn_grammar_parse_gbnf("root ::= \"abc\"", &g), SYN_OK);
    syn_grammar_matcher *m;
    assert_int_equal(syn_grammar_matcher_new(g, &m), SYN_OK);
    bool ok;
    assert_int_equal(syn_grammar_matcher_feed(m, "a", 1, &ok), SYN_OK);
    assert_true(ok);
    assert_int_equal(syn_grammar_matcher_feed(m, "bx", 2, &ok), SYN_OK);
    assert_false(ok);
    assert_int_equal(syn_grammar_matcher_feed(m, "bc", 2, &ok), SYN_OK); /* still after "a" */
    assert_true(ok);
    assert_true(syn_grammar_matcher_can_end(m));
    syn_grammar_matcher_free(m);
    syn_grammar_free(g);
}

static void expect_parse_error(const char *gbnf, syn_status status, const char *needle) {
    syn_grammar *g = (syn_grammar *)1;
    assert_int_equal(syn_grammar_parse_gbnf(gbnf, &g), status);
    assert_null(g);
    if (!strstr(syn_last_error(), needle)) fail_msg("'%s' lacks '%s'", syn_last_error(), needle);
}

static void test_parse_errors(void **state) {
    (void)state;
    expect_parse_error("root ::= foo", SYN_ERR_FORMAT, "undefined rule 'foo'");
    expect_parse_error("start ::= \"a\"", SYN_ERR_FORMAT, "no 'root' rule");
    expect_parse_error("root ::= \"abc", SYN_ERR_FORMAT, "unterminated");
    expect_parse_error("root ::= [a-", SYN_ERR_FORMAT, "unterminated");
    expect_parse_error("root ::= (\"a\"", SYN_ERR_FORMAT, "expected ')'");
    expect_parse_error("root ::= \"a\")", SYN_ERR_FORMAT, "unmatched ')'");
    expect_parse_error("root ::= [z-a]", SYN_ERR_FORMAT, "backwards");
    expect_parse_error("root ::= \"a\"{3,2}", SYN_ERR_FORMAT, "n < m");
    expect_parse_error("root ::= \"a\"\nroot ::= \"b\"", SYN_ERR_FORMAT,
                       "line 2 column 1: rule defined twice");
    expect_parse_error("root ::= \"\\q\"", SYN_ERR_FORMAT, "unknown escape");
    expect_parse_error("root ::= \"a\"{5000}", SYN_ERR_UNSUPPORTED, "repetition count above 1000");
    expect_parse_error("= \"a\"", SYN_ERR_FORMAT, "line 1 column 1: expected a rule");
}

static void test_bounds(void **state) {
    (void)state;
    syn_grammar *g;
    syn_grammar_matcher *m = NULL;
    /* left recursion can never consume a byte first: the nesting bound names itself */
    assert_int_equal(syn_grammar_parse_gbnf("root ::= root \"a\" | \"b\"", &g), SYN_OK);
    assert_int_equal(syn_grammar_matcher_new(g, &m), SYN_ERR_UNSUPPORTED);
    assert_non_null(strstr(syn_last_error(), "left recursion"));
    syn_grammar_free(g);
    /* a grammar whose ambiguity doubles per byte (distinct continuations) hits the stack bound */
    assert_int_equal(
        syn_grammar_parse_gbnf("root ::= \"x\" root \"y\" | \"x\" root \"z\" | \"\"", &g), SYN_OK);
    assert_int_equal(syn_grammar_matcher_new(g, &m), SYN_OK);
    bool ok;
    assert_int_equal(syn_grammar_matcher_feed(m, "xxxxxxxx", 8, &ok), SYN_OK);
    assert_true(ok);
    assert_int_equal(syn_grammar_matcher_feed(m, "xxxxxxxx", 8, &ok), SYN_ERR_UNSUPPORTED);
    assert_non_null(strstr(syn_last_error(), "more than 4096 parser stacks"));
    assert_int_equal(syn_grammar_matcher_feed(m, "yyyyyyyy", 8, &ok), SYN_OK); /* unchanged */
    assert_true(ok && syn_grammar_matcher_can_end(m));
    syn_grammar_matcher_free(m);
    syn_grammar_free(g);
    /* nesting deeper than the depth bound */
    assert_int_equal(syn_grammar_parse_gbnf("root ::= \"(\" root \")\" | \"x\"", &g), SYN_OK);
    assert_int_equal(syn_grammar_matcher_new(g, &m), SYN_OK);
    char open[600];
    memset(open, '(', sizeof open);
    assert_int_equal(syn_grammar_matcher_feed(m, open, sizeof open, &ok), SYN_ERR_UNSUPPORTED);
    assert_non_null(strstr(syn_last_error(), "depth bound"));
    syn_grammar_matcher_free(m);
    syn_grammar_free(g);
}

/* As match, for a grammar compiled from a JSON Schema. */
static int schema_match(const char *schema, const char *text) {
    syn_grammar *g;
    if (syn_grammar_from_json_schema(schema, &g) != SYN_OK) fail_msg("%s", syn_last_error());
    syn_grammar_matcher *m;
    assert_int_equal(syn_grammar_matcher_new(g, &m), SYN_OK);
    bool ok;
    assert_int_equal(syn_grammar_matcher_feed(m, text, strlen(text), &ok), SYN_OK);
    int r = ok ? syn_grammar_matcher_can_end(m) : -1;
    syn_grammar_matcher_free(m);
    syn_grammar_free(g);
    return r;
}

static void test_schema_keywords(void **state) {
    (void)state;
    const char *obj =
        "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"},"
        " \"age\": {\"type\": \"integer\", \"minimum\": 0}}, \"required\": [\"name\"],"
        " \"additionalProperties\": false}";
    assert_int_equal(schema_match(obj, "{\"name\": \"Bo\", \"age\": 3}"), 1);
    assert_int_equal(schema_match(obj, "{\"name\":\"x\"}"), 1);
    assert_int_equal(schema_match(obj, "{\"age\": 3}"), -1);
    assert_int_equal(schema_match(obj, "{\"name\": \"x\", \"extra\": 1}"), -1);
    assert_int_equal(schema_match(obj, "{\"name\": \"x\", \"age\": -1}"), -1);
    assert_int_equal(schema_match(obj, "{}"), -1);
    const char *opt =
        "{\"properties\": {\"a\": {\"type\": \"boolean\"}, \"b\": {\"type\": \"null\"}}}";
    assert_int_equal(schema_match(opt, "{}"), 1);
    assert_int_equal(schema_match(opt, "{\"b\": null}"), 1);
    assert_int_equal(schema_match(opt, "{\"a\": true, \"b\": null}"), 1);
    assert_int_equal(schema_match(opt, "{\"a\": 1}"), -1);
    assert_int_equal(schema_match("{\"type\": [\"number\", \"null\"]}", "-1.5e3"), 1);
    assert_int_equal(schema_match("{\"type\": [\"number\", \"null\"]}", "null"), 1);
    assert_int_equal(schema_match("{\"type\": [\"number\", \"null\"]}", "\"1\""), -1);
    assert_int_equal(schema_match("{\"type\": \"integer\"}", "1.5"), -1);
    assert_int_equal(schema_match("{\"enum\": [\"red\", 2, [1]]}", "\"red\""), 1);
    assert_int_equal(schema_match("{\"enum\": [\"red\", 2, [1]]}", "[1]"), 1);
    assert_int_equal(schema_match("{\"enum\": [\"red\", 2, [1]]}", "\"blue\""), -1);
    assert_int_equal(schema_match("{\"const\": {\"k\": \"v\"}}", "{\"k\":\"v\"}"), 1);
    const char *arr = "{\"type\": \"array\", \"items\": {\"type\": \"integer\"}, \"minItems\": 2,"
                      " \"maxItems\": 3}";
    assert_int_equal(schema_match(arr, "[1, 2]"), 1);
    assert_int_equal(schema_match(arr, "[1,2,3]"), 1);
    assert_int_equal(schema_match(arr, "[1]"), -1);
    assert_int_equal(schema_match(arr, "[1,2,3,4]"), -1);
    assert_int_equal(schema_match(arr, "[\"a\"]"), -1);
    const char *tup =
        "{\"type\": \"array\", \"prefixItems\": [{\"type\": \"string\"}, {\"type\": \"boolean\"}]}";
    assert_int_equal(schema_match(tup, "[\"a\", false]"), 1);
    assert_int_equal(schema_match(tup, "[false, \"a\"]"), -1);
    const char *str = "{\"type\": \"string\", \"minLength\": 2, \"maxLength\": 3}";
    assert_int_equal(schema_match(str, "\"ab\""), 1);
    assert_int_equal(schema_match(str, "\"a\\n\""), 1);
    assert_int_equal(schema_match(str, "\"a\""), -1);
    assert_int_equal(schema_match(str, "\"abcd\""), -1);
    const char *any =
        "{\"anyOf\": [{\"type\": \"string\"}, {\"type\": \"integer\", \"minimum\": 1}]}";
    assert_int_equal(schema_match(any, "\"s\""), 1);
    assert_int_equal(schema_match(any, "7"), 1);
    assert_int_equal(schema_match(any, "0"), -1);
    const char *list = "{\"$ref\": \"#/$defs/node\", \"$defs\": {\"node\": {\"type\": \"object\","
                       " \"properties\": {\"v\": {\"type\": \"integer\"}, \"next\": {\"anyOf\":"
                       " [{\"$ref\": \"#/$defs/node\"}, {\"type\": \"null\"}]}}, \"required\": "
                       "[\"v\", \"next\"]}}}";
    assert_int_equal(schema_match(list, "{\"v\": 1, \"next\": {\"v\": 2, \"next\": null}}"), 1);
    assert_int_equal(schema_match(list, "{\"v\": 1, \"next\": {\"v\": 2}}"), -1);
    assert_int_equal(schema_match("{\"type\": \"string\", \"format\": \"date\"}", "\"2026-12-02\""),
                     1);
    assert_int_equal(schema_match("{\"type\": \"string\", \"format\": \"date\"}", "\"2026-1-02\""),
                     -1);
    assert_int_equal(schema_match("{\"type\": \"string\", \"format\": \"date-time\"}",
                                  "\"2026-12-02T21:55:00Z\""),
                     1);
    assert_int_equal(schema_match("{\"type\": \"string\", \"format\": \"uuid\"}",
                                  "\"123e4567-e89b-12d3-a456-426614174000\""),
                     1);
    assert_int_equal(schema_match("{\"type\": \"string\", \"format\": \"uuid\"}", "\"123e4567\""),
                     -1);
    /* additionalProperties: absent or true any extra key, a schema its values, false none */
    const char *open_obj =
        "{\"type\": \"object\", \"properties\": {\"id\": {\"type\": \"integer\"}},"
        " \"required\": [\"id\"]}";
    assert_int_equal(schema_match(open_obj, "{\"id\": 1, \"x\": [true], \"i\": {}}"), 1);
    assert_int_equal(schema_match(open_obj, "{\"id\": 1, \"id\": \"s\"}"), -1); /* not again */
    assert_int_equal(schema_match(open_obj, "{\"id\": 1, \"idx\": \"s\"}"), 1);
    assert_int_equal(schema_match(open_obj, "{\"x\": 1}"), -1);
    const char *opt_obj = "{\"properties\": {\"a\": {\"type\": \"null\"}}, "
                          "\"additionalProperties\": {\"type\": \"integer\"}}";
    assert_int_equal(schema_match(opt_obj, "{\"b\": 2, \"c\": 3}"), 1);
    assert_int_equal(schema_match(opt_obj, "{\"a\": null, \"b\": 2}"), 1);
    assert_int_equal(schema_match(opt_obj, "{\"b\": \"s\"}"), -1);
    assert_int_equal(schema_match(opt_obj, "{\"a\": 2}"), -1);
    assert_int_equal(schema_match("{\"type\": \"object\", \"additionalProperties\": false}", "{}"),
                     1);
    assert_int_equal(
        schema_match("{\"type\": \"object\", \"additionalProperties\": false}", "{\"a\": 1}"), -1);
    /* integer ranges, bounds inclusive and exclusive (both drafts' forms) */
    const char *range = "{\"type\": \"integer\", \"minimum\": -15, \"maximum\": 1234}";
    for (int v = -40; v <= 1300; v++) {
        char num[16];
        snprintf(num, sizeof num, "%d", v);
        if ((schema_match(range, num) == 1) != (v >= -15 && v <= 1234))
            fail_msg("%d in -15..1234", v);
    }
    assert_int_equal(schema_match(range, "01"), -1);
    assert_int_equal(schema_match(range, "-0"), -1);
    const char *ex = "{\"type\": \"integer\", \"exclusiveMinimum\": 7, \"exclusiveMaximum\": 100}";
    assert_int_equal(schema_match(ex, "7"), 0);
    assert_int_equal(schema_match(ex, "-1"), -1);
    assert_int_equal(schema_match(ex, "8"), 1);
    assert_int_equal(schema_match(ex, "99"), 1);
    assert_int_equal(schema_match(ex, "100"), -1);
    const char *d4 = "{\"type\": \"integer\", \"minimum\": 0, \"exclusiveMinimum\": true}";
    assert_int_equal(schema_match(d4, "0"), -1);
    assert_int_equal(schema_match(d4, "123456789012"), 1);
    assert_int_equal(schema_match("{\"type\": \"integer\", \"maximum\": -3}", "-3"), 1);
    assert_int_equal(schema_match("{\"type\": \"integer\", \"maximum\": -3}", "-2"), 0);
    assert_int_equal(schema_match("{\"type\": \"integer\", \"maximum\": -3}", "2"), -1);
    assert_int_equal(schema_match("{\"type\": \"integer\", \"maximum\": -3}", "-30000"), 1);
    /* oneOf with provably disjoint branches */
    const char *one =
        "{\"oneOf\": [{\"type\": \"object\", \"properties\": {\"kind\": {\"const\":"
        " \"a\"}, \"n\": {\"type\": \"integer\"}}, \"required\": [\"kind\"],"
        " \"additionalProperties\": false}, {\"type\": \"object\", \"properties\":"
        " {\"kind\": {\"const\": \"b\"}}, \"required\": [\"kind\"]}, {\"type\": \"string\"}]}";
    assert_int_equal(schema_match(one, "{\"kind\": \"a\", \"n\": 1}"), 1);
    assert_int_equal(schema_match(one, "{\"kind\": \"b\", \"n\": \"x\"}"), 1);
    assert_int_equal(schema_match(one, "\"s\""), 1);
    assert_int_equal(schema_match(one, "{\"kind\": \"c\"}"), -1);
    /* dates: months 01-12, days by month, hours 00-23 */
    const char *date = "{\"type\": \"string\", \"format\": \"date\"}";
    assert_int_equal(schema_match(date, "\"2026-02-29\""), 1);
    assert_int_equal(schema_match(date, "\"2026-02-30\""), -1);
    assert_int_equal(schema_match(date, "\"2026-04-31\""), -1);
    assert_int_equal(schema_match(date, "\"2026-12-31\""), 1);
    assert_int_equal(schema_match(date, "\"2026-13-01\""), -1);
    assert_int_equal(schema_match(date, "\"2026-00-10\""), -1);
    const char *dt = "{\"type\": \"string\", \"format\": \"date-time\"}";
    assert_int_equal(schema_match(dt, "\"2026-12-02T24:00:00Z\""), -1);
    assert_int_equal(schema_match(dt, "\"2026-12-02T23:59:60.5+05:30\""), 1);
    assert_int_equal(schema_match(dt, "\"2026-12-02T23:60:00Z\""), -1);
    /* the generic json_object grammar */
    syn_grammar *g;
    assert_int_equal(syn_grammar_json_object(&g), SYN_OK);
    syn_grammar_matcher *m;
    assert_int_equal(syn_grammar_matcher_new(g, &m), SYN_OK);
    bool ok;
    const char *any_obj = "{\"k\": {\"deep\": [1, \"x\", null]}, \"z\": false}";
    assert_int_equal(syn_grammar_matcher_feed(m, any_obj, strlen(any_obj), &ok), SYN_OK);
    assert_true(ok && syn_grammar_matcher_can_end(m));
    syn_grammar_matcher_free(m);
    syn_grammar_free(g);
    assert_int_equal(schema_match("{\"type\": \"object\"}", "{\"a\": [1, {\"b\": null}]}"), 1);
    assert_int_equal(schema_match("{\"type\": \"object\"}", "[1]"), -1);
}

static void expect_schema_error(const char *schema, syn_status status, const char *needle) {
    syn_grammar *g = (syn_grammar *)1;
    assert_int_equal(syn_grammar_from_json_schema(schema, &g), status);
    assert_null(g);
    if (!strstr(syn_last_error(), needle)) fail_msg("'%s' lacks '%s'", syn_last_error(), needle);
}

static void test_schema_errors(void **state) {
    (void)state;
    expect_schema_error("{\"type\": \"string\", \"pattern\": \"a+\"}", SYN_ERR_UNSUPPORTED,
                        "'pattern'");
    expect_schema_error("{\"type\": \"number\", \"maximum\": 9}", SYN_ERR_UNSUPPORTED, "'maximum'");
    expect_schema_error("{\"type\": \"integer\", \"minimum\": 9, \"maximum\": 3}",
                        SYN_ERR_UNSUPPORTED, "no integer fits");
    expect_schema_error("{\"oneOf\": [{\"type\": \"string\"}, {\"type\": \"string\","
                        " \"maxLength\": 3}]}",
                        SYN_ERR_UNSUPPORTED, "'oneOf'");
    expect_schema_error("{\"oneOf\": [{\"type\": \"integer\"}, {\"type\": \"number\"}]}",
                        SYN_ERR_UNSUPPORTED, "'oneOf'");
    expect_schema_error("{\"type\": \"string\", \"anyOf\": [{\"maxLength\": 3}]}",
                        SYN_ERR_UNSUPPORTED, "'type' beside 'anyOf'");
    expect_schema_error("{\"type\": \"string\", \"enum\": [\"a\", 1]}", SYN_ERR_UNSUPPORTED,
                        "'type' beside 'enum'");
    expect_schema_error("{\"type\": \"string\", \"format\": \"email\"}", SYN_ERR_UNSUPPORTED,
                        "'email'");
    expect_schema_error("{\"$ref\": \"#/$defs/a\", \"$defs\": {\"a\": {\"$ref\": \"#/$defs/a\"}}}",
                        SYN_ERR_UNSUPPORTED, "$ref cycle");
    expect_schema_error("{\"$ref\": \"#/$defs/none\"}", SYN_ERR_INVALID_ARGUMENT, "names nothing");
    expect_schema_error("{\"$ref\": \"http://x/y\"}", SYN_ERR_UNSUPPORTED, "not a local");
    expect_schema_error("{\"type\": ", SYN_ERR_INVALID_ARGUMENT, "not JSON");
    expect_schema_error("{\"type\": \"frobnicate\"}", SYN_ERR_UNSUPPORTED, "'frobnicate'");
    const size_t big = (1u << 20) + 16;
    char *s = malloc(big + 1);
    assert_non_null(s);
    memset(s, ' ', big);
    memcpy(s, "{\"type\": \"string\"}", 18);
    s[big] = 0;
    expect_schema_error(s, SYN_ERR_INVALID_ARGUMENT, "above the 1048576-byte bound");
    free(s);
}

/* The trie walk's mask equals feeding every token's bytes on its own, at several states. */
static void check_mask_against_naive(syn_grammar_matcher *m, const syn_grammar_vocab *v,
                                     const syn_tokenizer *tok, size_t *n_allowed) {
    const int32_t n = syn_tokenizer_n_vocab(tok);
    uint64_t *allowed = malloc(((size_t)n + 63) / 64 * sizeof *allowed);
    assert_non_null(allowed);
    assert_int_equal(syn_grammar_matcher_allowed(m, v, allowed), SYN_OK);
    *n_allowed = 0;
    for (int32_t id = 0; id < n; id++) {
        bool want;
        if (syn_tokenizer_is_eog(tok, id)) {
            want = syn_grammar_matcher_can_end(m);
        } else if (tokenizer_is_special(tok, id)) {
            want = false; /* these grammars never spell out a control token */
        } else {
            char buf[1024];
            size_t len;
            assert_int_equal(syn_tokenizer_token_bytes(tok, id, buf, sizeof buf, &len), SYN_OK);
            bool ok = false;
            if (len) assert_int_equal(syn_grammar_matcher_accepts(m, buf, len, &ok), SYN_OK);
            want = len && ok;
        }
        const bool got = allowed[id >> 6] >> (id & 63) & 1;
        if (got != want) fail_msg("token %d: mask %d, naive %d", id, got, want);
        *n_allowed += want;
    }
    free(allowed);
}

static void test_token_mask_on_tiny_tokenizer(void **state) {
    (void)state;
    syn_model *model;
    assert_int_equal(syn_model_load(test_data_path("qwen2-tiny-synth-q8_0.gguf"), NULL, &model),
                     SYN_OK);
    const syn_tokenizer *tok = syn_model_tokenizer(model);
    syn_grammar_vocab *v;
    assert_int_equal(syn_grammar_vocab_new(tok, &v), SYN_OK);
    syn_grammar *g;
    assert_int_equal(syn_grammar_parse_gbnf(
                         "root ::= \"{\\\"n\\\": \" [0-9]{1,6} \"}\" | \"[\" [^\\]]* \"]\"", &g),
                     SYN_OK);
    syn_grammar_matcher *m;
    assert_int_equal(syn_grammar_matcher_new(g, &m), SYN_OK);
    size_t n_allowed;
    check_mask_against_naive(m, v, tok, &n_allowed);
    assert_true(n_allowed > 0);
    bool ok;
    assert_int_equal(syn_grammar_matcher_feed(m, "{\"n\": 1", 7, &ok), SYN_OK);
    assert_true(ok);
    check_mask_against_naive(m, v, tok, &n_allowed);
    assert_true(n_allowed > 1);
    /* EOG only once the grammar can end */
    const int32_t eos = syn_tokenizer_eos(tok);
    assert_int_equal(syn_grammar_matcher_feed_token(m, v, eos, &ok), SYN_OK);
    assert_false(ok);
    assert_int_equal(syn_grammar_matcher_feed(m, "}", 1, &ok), SYN_OK);
    check_mask_against_naive(m, v, tok, &n_allowed);
    assert_int_equal(syn_grammar_matcher_feed_token(m, v, eos, &ok), SYN_OK);
    assert_true(ok);
    syn_grammar_matcher_free(m);
    syn_grammar_matcher_new(g, &m);
    assert_int_equal(syn_grammar_matcher_feed(m, "[", 1, &ok), SYN_OK); /* nearly all allowed */
    check_mask_against_naive(m, v, tok, &n_allowed);
    assert_true(n_allowed > 100000);
    syn_grammar_matcher_free(m);
    syn_grammar_free(g);
    syn_grammar_vocab_free(v);
    syn_model_free(model);
}

/* Characters (not bytes) of UTF-8 text s: maxLength counts characters. */
static size_t utf8_chars(const char *s) {
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* An engine request with a grammar at temperature 1: under several seeds the output parses as
 * the JSON object the grammar describes and ends at end-of-generation. */
static void test_engine_request_follows_grammar(void **state) {
    (void)state;
    syn_model *model;
    assert_int_equal(syn_model_load(test_data_path("qwen2-tiny-synth-q8_0.gguf"), NULL, &model),
                     SYN_OK);
    syn_engine_params ep = syn_engine_default_params();
    ep.n_parallel = 2;
    ep.n_threads = 2;
    syn_engine *e;
    assert_int_equal(syn_engine_new(model, &ep, &e), SYN_OK);
    syn_request_params p = syn_request_default_params();
    p.prompt_text = "Give me JSON:";
    p.max_tokens = 64;
    p.sampling.temperature = 1.0f;
    p.grammar = "root ::= \"{\\\"n\\\": \" [1-9] [0-9]{0,3} \", \\\"ok\\\": \" (\"true\" | "
                "\"false\") \"}\"";
    for (uint64_t seed = 1; seed <= 3; seed++) {
        p.sampling.seed = seed;
        syn_request *r;
        assert_int_equal(syn_engine_submit(e, &p, &r), SYN_OK);
        syn_request_result res;
        assert_int_equal(syn_request_wait(r, &res), SYN_OK);
        assert_int_equal(res.finish, SYN_FINISH_EOG);
        char text[1024];
        size_t len;
        assert_int_equal(syn_detokenize(syn_model_tokenizer(model), res.tokens, res.n_tokens, text,
                                        sizeof text - 1, &len),
                         SYN_OK);
        text[len] = 0;
        json_error_t jerr;
        json_t *j = json_loads(text, 0, &jerr);
        if (!j) fail_msg("seed %d: '%s' is not JSON: %s", (int)seed, text, jerr.text);
        assert_true(json_is_object(j) && json_object_size(j) == 2);
        json_int_t n = json_integer_value(json_object_get(j, "n"));
        assert_true(json_is_integer(json_object_get(j, "n")) && n >= 1 && n <= 9999);
        assert_true(json_is_boolean(json_object_get(j, "ok")));
        json_decref(j);
        syn_request_free(r);
    }
    /* a JSON Schema: the output parses and is an instance */
    p.grammar = NULL;
    p.json_schema =
        "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\","
        " \"maxLength\": 8}, \"tags\": {\"type\": \"array\", \"items\": {\"enum\": [\"a\","
        " \"b\"]}, \"maxItems\": 3}}, \"required\": [\"name\", \"tags\"],"
        " \"additionalProperties\": false}";
    for (uint64_t seed = 1; seed <= 3; seed++) {
        p.sampling.seed = seed;
        p.max_tokens = 200;
        syn_request *r;
        assert_int_equal(syn_engine_submit(e, &p, &r), SYN_OK);
        syn_request_result res;
        assert_int_equal(syn_request_wait(r, &res), SYN_OK);
        assert_int_equal(res.finish, SYN_FINISH_EOG);
        char text[4096];
        size_t len;
        assert_int_equal(syn_detokenize(syn_model_tokenizer(model), res.tokens, res.n_tokens, text,
                                        sizeof text - 1, &len),
                         SYN_OK);
        text[len] = 0;
        json_error_t jerr;
        json_t *j = json_loads(text, 0, &jerr);
        if (!j) fail_msg("seed %d: '%s' is not JSON: %s", (int)seed, text, jerr.text);
        assert_true(json_is_object(j) && json_object_size(j) == 2);
        json_t *name = json_object_get(j, "name"), *tags = json_object_get(j, "tags");
        assert_true(json_is_string(name) && utf8_chars(json_string_value(name)) <= 8);
        assert_true(json_is_array(tags) && json_array_size(tags) <= 3);
        for (size_t i = 0; i < json_array_size(tags); i++) {
            const char *t = json_string_value(json_array_get(tags, i));
            assert_true(t && (!strcmp(t, "a") || !strcmp(t, "b")));
        }
        json_decref(j);
        syn_request_free(r);
    }
    p.json_schema = "{\"type\": \"string\", \"pattern\": \"x\"}";
    syn_request *r = NULL;
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_ERR_UNSUPPORTED);
    assert_non_null(strstr(syn_last_error(), "'pattern'"));
    p.grammar = "root ::= \"x\"";
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(syn_last_error(), "mutually exclusive"));
    p.json_schema = NULL;
    p.grammar = "root ::= nowhere";
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(syn_last_error(), "undefined rule 'nowhere'"));
    syn_engine_free(e);
    syn_model_free(model);
}

/* A token id of text (one token with parse_special). */
static int32_t one_token(const syn_tokenizer *tok, const char *text) {
    int32_t ids[4];
    size_t n;
    assert_int_equal(syn_tokenize(tok, text, strlen(text), false, true, ids, 4, &n), SYN_OK);
    assert_int_equal(n, 1);
    return ids[0];
}

static bool bit(const uint64_t *mask, int32_t id) { return mask[id >> 6] >> (id & 63) & 1; }

/* Control tokens are allowed only where the grammar spells them out, never inside a string. */
static void test_special_tokens_only_where_literal(void **state) {
    (void)state;
    syn_model *model;
    assert_int_equal(syn_model_load(test_data_path("qwen2-tiny-synth-q8_0.gguf"), NULL, &model),
                     SYN_OK);
    const syn_tokenizer *tok = syn_model_tokenizer(model);
    const int32_t im_start = one_token(tok, "<|im_start|>"), call = one_token(tok, "<tool_call>");
    assert_true(tokenizer_is_special(tok, im_start));
    syn_grammar_vocab *v;
    assert_int_equal(syn_grammar_vocab_new(tok, &v), SYN_OK);
    syn_grammar *g;
    assert_int_equal(
        syn_grammar_parse_gbnf("root ::= \"<tool_call>\" \"\\\"\" [^\"]* \"\\\"\"", &g), SYN_OK);
    syn_grammar_matcher *m;
    assert_int_equal(syn_grammar_matcher_new(g, &m), SYN_OK);
    uint64_t *mask = malloc(((size_t)syn_tokenizer_n_vocab(tok) + 63) / 64 * sizeof *mask);
    assert_non_null(mask);
    assert_int_equal(syn_grammar_matcher_allowed(m, v, mask), SYN_OK);
    assert_true(bit(mask, call));
    assert_false(bit(mask, im_start));
    bool ok;
    assert_int_equal(syn_grammar_matcher_feed_token(m, v, call, &ok), SYN_OK);
    assert_true(ok);
    assert_int_equal(syn_grammar_matcher_feed(m, "\"ab", 3, &ok), SYN_OK);
    assert_true(ok);
    assert_int_equal(syn_grammar_matcher_allowed(m, v, mask), SYN_OK);
    assert_false(bit(mask, im_start)); /* its bytes fit [^"]*, but it is markup */
    assert_false(bit(mask, call));
    assert_true(bit(mask, one_token(tok, "<")));
    assert_int_equal(syn_grammar_matcher_feed_token(m, v, im_start, &ok), SYN_OK);
    assert_false(ok);
    free(mask);
    syn_grammar_matcher_free(m);
    syn_grammar_free(g);
    syn_grammar_vocab_free(v);
    syn_model_free(model);
}

/* Masks inside a JSON string on the 151,936-token vocabulary: the state repeats, so after the
 * first step the mask is a cached copy; a fresh state costs one DFA walk of the trie. Both are
 * checked against the naive per-token answer at the end. */
static void test_mask_speed_in_string(void **state) {
    (void)state;
    syn_model *model;
    assert_int_equal(syn_model_load(test_data_path("qwen2-tiny-synth-q8_0.gguf"), NULL, &model),
                     SYN_OK);
    const syn_tokenizer *tok = syn_model_tokenizer(model);
    syn_grammar_vocab *v;
    assert_int_equal(syn_grammar_vocab_new(tok, &v), SYN_OK);
    syn_grammar *g;
    assert_int_equal(syn_grammar_from_json_schema(
                         "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                         "\"bio\":{\"type\":\"string\",\"maxLength\":400}},\"required\":[\"name\","
                         "\"bio\"],\"additionalProperties\":false}",
                         &g),
                     SYN_OK);
    syn_grammar_matcher *m;
    assert_int_equal(syn_grammar_matcher_new(g, &m), SYN_OK);
    uint64_t *mask = malloc(((size_t)syn_tokenizer_n_vocab(tok) + 63) / 64 * sizeof *mask);
    assert_non_null(mask);
    bool ok;
    assert_int_equal(syn_grammar_matcher_feed(m, "{\"name\": \"", 10, &ok), SYN_OK);
    assert_true(ok);
    const char *word = "ab";
    double t0 = syn_now_ms();
    assert_int_equal(syn_grammar_matcher_allowed(m, v, mask), SYN_OK); /* the first: a walk */
    const double first_ms = syn_now_ms() - t0;
    t0 = syn_now_ms();
    for (int i = 0; i < 50; i++) { /* an unbounded string: one state */
        assert_int_equal(syn_grammar_matcher_allowed(m, v, mask), SYN_OK);
        assert_int_equal(syn_grammar_matcher_feed(m, word, 2, &ok), SYN_OK);
    }
    const double repeat_ms = (syn_now_ms() - t0) / 50;
    assert_int_equal(syn_grammar_matcher_feed(m, "\", \"bio\": \"", 11, &ok), SYN_OK);
    assert_true(ok);
    t0 = syn_now_ms();
    for (int i = 0; i < 50; i++) { /* maxLength: every position is a new state */
        assert_int_equal(syn_grammar_matcher_allowed(m, v, mask), SYN_OK);
        assert_int_equal(syn_grammar_matcher_feed(m, word, 2, &ok), SYN_OK);
    }
    const double fresh_ms = (syn_now_ms() - t0) / 50;
    print_message("mask in a string: %.3f ms first, %.3f ms repeated, %.3f ms bounded string\n",
                  first_ms, repeat_ms, fresh_ms);
    assert_true(repeat_ms < 5.0);
    size_t n_allowed;
    check_mask_against_naive(m, v, tok, &n_allowed);
    assert_true(n_allowed > 100000);
    free(mask);
    syn_grammar_matcher_free(m);
    syn_grammar_free(g);
    syn_grammar_vocab_free(v);
    syn_model_free(model);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_literals_alternatives_groups),
        cmocka_unit_test(test_rule_references_across_lines),
        cmocka_unit_test(test_classes_and_repetition),
        cmocka_unit_test(test_utf8_classes),
        cmocka_unit_test(test_json_like_grammar),
        cmocka_unit_test(test_rejection_leaves_state),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_schema_keywords),
        cmocka_unit_test(test_schema_errors),
        cmocka_unit_test(test_token_mask_on_tiny_tokenizer),
        cmocka_unit_test(test_special_tokens_only_where_literal),
        cmocka_unit_test(test_mask_speed_in_string),
        cmocka_unit_test(test_engine_request_follows_grammar),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
