"""A standalone ``main`` for an emitted kernel: run it outside Python.

``emit_main(spec)`` returns C to append to ``emit_c``'s output. The program takes one
file per operand, in operand order (raw little-endian elements in the operand's memory
order: C order, or its transpose's for a column-major operand); it reads every operand,
calls ``kernel`` once, and writes the output operand back to its file. Each
operand gets a heap block of exactly its size, so AddressSanitizer catches an access
one element past any operand (numpy's allocations would hide it). Exit status: 0 on
success, 2 on a bad file, 3 if the kernel failed to allocate.

Used by the sanitizer tests (``tests/test_sanitize.py``); also a way to run a kernel
under gdb, perf or valgrind.
"""
from __future__ import annotations

from morello.codegen.writer import Writer
from morello.specs import Spec


def emit_main(spec: Spec) -> str:
    info = spec.kind.info
    ops = spec.operands
    w = Writer()
    w.line("#include <stdio.h>")
    with w.block("static void *morello_read(const char *path, size_t n) {"):
        w.line("void *p = malloc(n ? n : 1);")
        w.line('FILE *f = fopen(path, "rb");')
        w.line("if (!p || !f || fread(p, 1, n, f) != n) { fprintf(stderr, "
               '"cannot read %zu bytes of %s\\n", n, path); exit(2); }')
        w.line("fclose(f);")
        w.line("return p;")
    with w.block("int main(int argc, char **argv) {"):
        w.line(f"if (argc != {len(ops) + 1}) {{ fprintf(stderr, \"usage: %s "
               + " ".join(f"{n.upper()}" for n in info.operands)
               + '\\n", argv[0]); return 2; }')
        for i, (name, t) in enumerate(zip(info.operands, ops)):
            w.line(f"{t.dtype.c_type} *{name} = morello_read(argv[{i + 1}], {t.bytes});")
        w.line(f"int status = kernel({', '.join(info.operands)});")
        w.line("if (status != 0) { fprintf(stderr, \"kernel failed: %d\\n\", status); "
               "return 3; }")
        out = info.operands[info.output]
        w.line(f'FILE *f = fopen(argv[{info.output + 1}], "wb");')
        w.line(f"if (!f || fwrite({out}, 1, {ops[info.output].bytes}, f) != "
               f"{ops[info.output].bytes}) return 2;")
        w.line("fclose(f);")
        for name in info.operands:
            w.line(f"free({name});")
        w.line("return 0;")
    return str(w)
