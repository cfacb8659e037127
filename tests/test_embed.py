"""Embedding: ``morello emit --name NAME --header FILE`` writes C with one exported
function and a header for C and C++; two kernels link into one program (C and C++), or
share one translation unit."""
from __future__ import annotations

import shutil
import subprocess

import pytest
from probes import run_cli

from morello.codegen.build import find_compiler

pytestmark = pytest.mark.isa("avx2")

FLAGS = ["-O2", "-Wall", "-Wextra", "-Werror", "-mavx2", "-mfma"]

# Two kernels: a 3x5 @ 5x7 matmul and a softmax of 4 rows of 19; inputs from a formula,
# checked against naive loops.
MAIN = r"""
#include <math.h>
#include <stdio.h>
#include "mm.h"
#include "sm.h"

static int check(void) {
    float a[15], b[35], c[21], x[76], y[76];
    for (int i = 0; i < 15; i++) a[i] = (float)((i * 7) % 11) / 11.0f - 0.5f;
    for (int i = 0; i < 35; i++) b[i] = (float)((i * 5) % 13) / 13.0f - 0.5f;
    for (int i = 0; i < 76; i++) x[i] = (float)((i * 3) % 17) - 8.0f;
    if (mm(a, b, c) != 0 || sm(x, y) != 0) return 1;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 7; j++) {
            float want = 0.0f;
            for (int k = 0; k < 5; k++) want += a[i * 5 + k] * b[k * 7 + j];
            if (fabsf(c[i * 7 + j] - want) > 1e-5f) return 2;
        }
    for (int r = 0; r < 4; r++) {
        float m = x[r * 19], s = 0.0f;
        for (int j = 0; j < 19; j++) m = fmaxf(m, x[r * 19 + j]);
        for (int j = 0; j < 19; j++) s += expf(x[r * 19 + j] - m);
        for (int j = 0; j < 19; j++) {
            float want = expf(x[r * 19 + j] - m) / s;
            if (fabsf(y[r * 19 + j] - want) > 1e-6f) return 3;
        }
    }
    return 0;
}
"""
C_MAIN = MAIN + ('int main(void) { int r = check(); printf("%s\\n", r ? "FAIL" : "OK"); '
                 'return r; }\n')
CXX_MAIN = MAIN.replace("#include <stdio.h>", "#include <cstdio>\n#include <cmath>") + \
    'int main() { int r = check(); std::printf("%s\\n", r ? "FAIL" : "OK"); return r; }\n'


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    d = tmp_path_factory.mktemp("embed")
    db = str(d / "db.sqlite")
    for name, argv in (("mm", ["matmul", "3", "5", "7"]), ("sm", ["softmax", "4", "19"])):
        code, out, err = run_cli(["emit", *argv, "--name", name, "--header",
                                  str(d / f"{name}.h"), "--db", db, "-q"])
        assert code == 0, err
        (d / f"{name}.c").write_text(out)
    return d


def _cc(*args, cwd):
    proc = subprocess.run([*args], cwd=cwd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_each_kernel_exports_only_its_name(kernels):
    cc = find_compiler()
    for name in ("mm", "sm"):
        _cc(cc, *FLAGS, "-c", f"{name}.c", "-o", f"{name}.o", cwd=kernels)
        syms = _cc("nm", "--defined-only", "-g", f"{name}.o", cwd=kernels).split()
        assert syms[-1] == name and len(syms) == 3, syms  # "ADDRESS T NAME"
        assert "bench" not in (kernels / f"{name}.c").read_text()


def test_two_kernels_link_into_a_c_program(kernels):
    cc = find_compiler()
    (kernels / "main.c").write_text(C_MAIN)
    for name in ("mm", "sm"):
        _cc(cc, *FLAGS, "-c", f"{name}.c", "-o", f"{name}.o", cwd=kernels)
    _cc(cc, *FLAGS, "-std=c99", "main.c", "mm.o", "sm.o", "-o", "main", "-lm", cwd=kernels)
    assert _cc(str(kernels / "main"), cwd=kernels).strip() == "OK"


@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler")
def test_two_kernels_link_into_a_cxx_program(kernels):
    cc = find_compiler()
    (kernels / "main.cpp").write_text(CXX_MAIN)
    for name in ("mm", "sm"):
        _cc(cc, *FLAGS, "-c", f"{name}.c", "-o", f"{name}.o", cwd=kernels)
    _cc("g++", *FLAGS, "main.cpp", "mm.o", "sm.o", "-o", "main_cxx", cwd=kernels)
    assert _cc(str(kernels / "main_cxx"), cwd=kernels).strip() == "OK"


def test_two_kernels_share_one_translation_unit(kernels):
    cc = find_compiler()
    (kernels / "one.c").write_text('#include "mm.c"\n#include "sm.c"\n' + C_MAIN)
    _cc(cc, *FLAGS, "one.c", "-o", "one", "-lm", cwd=kernels)
    assert _cc(str(kernels / "one"), cwd=kernels).strip() == "OK"


# Kernels of every family, compiled alone (no program calls them): bf16 matvecs in both
# orientations, an integer matmul, a chain, and AVX-512 register tiles and VNNI dots.
MORE_KERNELS = {
    "gemma": (["matmul", "1", "256", "64", "--dtypes", "f32,bf16,f32", "--rhs-layout", "cm"],
              "avx2"),
    "xw": (["matmul", "1", "64", "256", "--dtypes", "f32,bf16,f32"], "avx2"),
    "imm": (["matmul", "24", "32", "16", "--dtypes", "u8,s8,s32"], "avx2"),
    "att": (["attention", "16", "8"], "avx2"),
    "mm512": (["matmul", "12", "32", "64", "--target", "avx512"], "avx512"),
    "dot512": (["matmul", "8", "64", "32", "--dtypes", "u8,s8,s32", "--target", "avx512"],
               "avx512"),
}


@pytest.mark.parametrize("compiler", ["gcc", "clang"])
def test_kernels_build_warning_free_and_run_under_gcc_and_clang(kernels, compiler):
    """The emitted C is for any C11 compiler with GNU extensions, not just the one that
    built it here: under -Wall -Wextra -Werror with gcc and with clang (which lacks gcc's
    __builtin_roundevenf, and warns of the static helpers a kernel does not call), every
    family compiles, and the two kernels of the C program still give its answers."""
    from morello.memory import AVX512

    cc = shutil.which(compiler)
    if cc is None:
        pytest.skip(f"{compiler} is not installed")
    (kernels / "main.c").write_text(C_MAIN)
    for name in ("mm", "sm"):
        _cc(cc, *FLAGS, "-std=c11", "-c", f"{name}.c", "-o", f"{name}-{compiler}.o",
            cwd=kernels)
    _cc(cc, *FLAGS, "main.c", f"mm-{compiler}.o", f"sm-{compiler}.o", "-o",
        f"main-{compiler}", "-lm", cwd=kernels)
    assert _cc(str(kernels / f"main-{compiler}"), cwd=kernels).strip() == "OK"
    db = str(kernels / "db.sqlite")
    for name, (argv, isa) in MORE_KERNELS.items():
        code, out, err = run_cli(["emit", *argv, "--name", name, "--db", db, "-q"])
        assert code == 0, err
        (kernels / f"{name}.c").write_text(out)
        flags = [*FLAGS, *(AVX512.cflags if isa == "avx512" else ())]
        _cc(cc, *flags, "-std=c11", "-c", f"{name}.c", "-o", f"{name}-{compiler}.o",
            cwd=kernels)


@pytest.mark.parametrize("argv,message", [
    (["--name", "int"], "cannot name a kernel"),
    (["--name", "main"], "cannot name a kernel"),
    (["--name", "morello_x"], "cannot name a kernel"),
    (["--name", "9lives"], "C identifier"),
    (["--name", "a-b"], "C identifier"),
    (["--header", "x.h"], "--header needs --name"),
])
def test_bad_names_give_one_line(tmp_path, argv, message):
    code, out, err = run_cli(["emit", "matmul", "2", "2", "2", *argv, "--db",
                              str(tmp_path / "db.sqlite"), "-q"])
    assert code == 2 and message in err and err.count("\n") == 1, err


def test_extra_compiler_flags_are_passed_and_part_of_the_cache_key(monkeypatch):
    from morello.codegen import compile_c
    from morello.errors import BuildError

    src = "int kernel_probe(void) { return 7; }\n"
    plain = compile_c(src, ())
    monkeypatch.setenv("MORELLO_CFLAGS", "-funroll-loops")
    unrolled = compile_c(src, ())
    assert unrolled != plain and unrolled.exists()
    monkeypatch.setenv("MORELLO_CFLAGS", "-fno-such-flag-for-morello")
    with pytest.raises(BuildError, match="no-such-flag"):
        compile_c(src, ())


def test_a_kernel_built_as_c99_is_refused_in_one_line(kernels):
    """The kernels need C11 (aligned_alloc, _Thread_local): under -std=c99 aligned_alloc
    would be undeclared, its pointer truncated to int, so the build stops, saying why."""
    proc = subprocess.run([find_compiler(), *FLAGS, "-std=c99", "-c", "mm.c", "-o", "mm99.o"],
                          cwd=kernels, capture_output=True, text=True)
    assert proc.returncode != 0
    assert "compile with -std=c11 or later" in proc.stderr
