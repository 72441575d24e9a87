/*
 * grammar.h: context-free grammars (llama.cpp's GBNF text format) and a byte-level matcher.
 *
 * A grammar is parsed once into flat rules: each rule is a list of alternatives, each alternative
 * a sequence of byte sets and rule references. Repetition, groups and character classes beyond
 * ASCII are desugared into generated rules at parse time (classes as UTF-8 byte sequences), so the
 * matcher only ever tests one byte against one 256-bit set.
 *
 * The matcher holds the set of pushdown stacks the bytes so far leave possible. It is bounded:
 * at most SYN_GRAMMAR_MAX_STACKS stacks, SYN_GRAMMAR_MAX_DEPTH entries per stack and
 * SYN_GRAMMAR_MAX_NEST rule expansions without consuming a byte (left recursion); passing a bound
 * is an error naming it, never a hang.
 */
#ifndef SYN_GRAMMAR_H
#define SYN_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "synapse.h"

#define SYN_GRAMMAR_MAX_STACKS 4096
#define SYN_GRAMMAR_MAX_DEPTH 512
#define SYN_GRAMMAR_MAX_NEST 128
#define SYN_GRAMMAR_MAX_ELEMENTS (1u << 20)
#define SYN_GRAMMAR_MAX_REPEAT 1000

typedef struct syn_grammar syn_grammar;
typedef struct syn_grammar_matcher syn_grammar_matcher;

/* Parses GBNF text (rules `name ::= ...`, "literals", [classes], [^negated], ., ( ), * + ?
 * {m}, {m,}, {m,n}, # comments); the start rule is `root`. SYN_ERR_FORMAT with the line and
 * column for a syntax error or an undefined rule, SYN_ERR_UNSUPPORTED for a bound passed. */
syn_status syn_grammar_parse_gbnf(const char *text, syn_grammar **out);
void syn_grammar_free(syn_grammar *g);

/* Compiles a JSON Schema (at most 1 MiB of text) into a grammar of the JSON texts it accepts,
 * with whitespace bounded (at most 4 blanks in a row). Enforced: type (each, and unions),
 * properties (in the schema's order), required, additionalProperties (absent or true: any other
 * key, not a listed one, with any value; a schema: values of it; false: no other key), enum,
 * const, items, prefixItems, minItems/maxItems (<= 100), minLength/maxLength (<= 1000),
 * minimum/maximum/exclusiveMinimum/exclusiveMaximum for integers (digit ranges), anyOf, oneOf
 * when its branches are provably disjoint (types, const/enum values, a required property with
 * disjoint const/enum values), local $ref into $defs/definitions or "#", format date,
 * date-time (months 01-12, days by month, hours 00-23), uuid; annotations (title, description,
 * default, examples, $schema, $id, $comment) are ignored. Any other keyword or value, or one
 * beside $ref/anyOf/oneOf/enum/const that those would drop, is SYN_ERR_UNSUPPORTED naming it; a
 * $ref cycle that cannot terminate or nesting past 64 is SYN_ERR_UNSUPPORTED; bad JSON or too
 * large a text is SYN_ERR_INVALID_ARGUMENT. */
syn_status syn_grammar_from_json_schema(const char *schema, syn_grammar **out);
/* Any JSON object, any keys and nested values (the `json_object` response format). */
syn_status syn_grammar_json_object(syn_grammar **out);

/* JSON Schemas as GBNF rules to embed in a larger grammar (tool calls): each added schema gets
 * a rule (*name, such as "r12") for its instances; syn_json_rules_text then appends the shared
 * JSON rules (ws, jstring, jvalue, ...: rule names not to define again) once and gives the text
 * (owned by jr, NULL without memory), after which nothing more can be added. Errors of add: as
 * syn_grammar_from_json_schema's. */
typedef struct syn_json_rules syn_json_rules;
syn_status syn_json_rules_new(syn_json_rules **out);
syn_status syn_json_rules_add(syn_json_rules *jr, json_t *schema, char name[16]);
const char *syn_json_rules_text(syn_json_rules *jr);
void syn_json_rules_free(syn_json_rules *jr);

/* syn_grammar_parse_gbnf, then a first expansion, so that a rule cycle that never produces a
 * byte ($ref loops) is SYN_ERR_UNSUPPORTED here rather than at the request's first step. */
syn_status syn_grammar_parse_checked(const char *text, syn_grammar **out);

/* A matcher at the start of g (g must outlive it). Fails only on a bound or allocation. */
syn_status syn_grammar_matcher_new(const syn_grammar *g, syn_grammar_matcher **out);
void syn_grammar_matcher_free(syn_grammar_matcher *m);

/* Feeds n bytes. *accepted is false when some byte cannot continue the grammar; the matcher is
 * then unchanged. An error (a bound) also leaves it unchanged. */
syn_status syn_grammar_matcher_feed(syn_grammar_matcher *m, const void *bytes, size_t n,
                                    bool *accepted);

/* Like syn_grammar_matcher_feed, but never changes the matcher: whether the bytes could be fed. */
syn_status syn_grammar_matcher_accepts(syn_grammar_matcher *m, const void *bytes, size_t n,
                                       bool *accepted);

/* Whether the bytes fed so far form a complete sentence of the grammar. */
bool syn_grammar_matcher_can_end(const syn_grammar_matcher *m);

/* A tokenizer's vocabulary as a byte trie, built once per tokenizer and shared read-only by
 * any number of matchers. End-of-generation tokens are kept aside; tokens with no bytes are
 * never allowed; control and user-defined tokens (<|im_start|>, <tool_call>) only where the
 * grammar spells out their text literally, so never inside a JSON string or a [class]. */
typedef struct syn_grammar_vocab syn_grammar_vocab;
syn_status syn_grammar_vocab_new(const syn_tokenizer *tok, syn_grammar_vocab **out);
void syn_grammar_vocab_free(syn_grammar_vocab *v);

/* Sets bit id of allowed ((n_vocab + 63) / 64 words) for every token whose bytes can continue
 * the grammar from m's state, clearing the others; end-of-generation tokens are allowed exactly
 * when the grammar can end here. The matcher keeps a lazy DFA over its stack sets (at most 4096
 * states, then restarted) and the mask of each state it computed (at most 64): a state met
 * again costs a copy; a new one a trie walk of one table look-up per node. */
syn_status syn_grammar_matcher_allowed(syn_grammar_matcher *m, const syn_grammar_vocab *v,
                                       uint64_t *allowed);

/* Feeds token id's bytes (an end-of-generation token: accepted when the grammar can end). */
syn_status syn_grammar_matcher_feed_token(syn_grammar_matcher *m, const syn_grammar_vocab *v,
                                          int32_t id, bool *accepted);

#endif
