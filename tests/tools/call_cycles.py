#!/usr/bin/env python3
"""call_cycles.py DIR...: prints each pair of C files that call each other (a function defined in
one is called in the other and the other way round); exits 1 when there is any. A textual scan:
non-static function definitions at the start of a line, calls as NAME( outside string literals."""
import itertools, pathlib, re, sys

DEF = re.compile(r'^(?!static\b)[A-Za-z_][\w \*]*?\b(\w+)\(([^;{]*?)\)\s*\{', re.M)
STRING = re.compile(r'"(\\.|[^"\\])*"')
COMMENT = re.compile(r'/\*.*?\*/', re.S)

files = sorted(str(p) for d in sys.argv[1:] for p in pathlib.Path(d).rglob('*.c'))
text = {f: COMMENT.sub('', open(f, encoding='utf-8').read()) for f in files}
defined_in = {}
for f, s in text.items():
    for m in DEF.finditer(s):
        defined_in.setdefault(m.group(1), f)
calls = {f: set() for f in files}
for f, s in text.items():
    body = STRING.sub('""', s)
    for name in set(re.findall(r'\b(\w+)\s*\(', body)):
        g = defined_in.get(name)
        if g and g != f:
            calls[f].add(g)
pairs = [(a, b) for a, b in itertools.combinations(files, 2) if b in calls[a] and a in calls[b]]
for a, b in pairs:
    print(f'{a} <-> {b}')
sys.exit(1 if pairs else 0)
