"""The command line: every subcommand, and one clear line for every kind of bad input."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import pytest


def morello(*args, env=None, tmp_db=None):
    cmd = [sys.executable, "-m", "morello", *args]
    if tmp_db is not None:
        cmd += ["--db", str(tmp_db)]
    # Run outside the source tree, so the installed (built) package is the one imported.
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600,
                          cwd=tempfile.gettempdir())


@pytest.fixture
def db(tmp_path):
    return tmp_path / "test.db"


def assert_one_line_error(proc, *words):
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.strip() and not l.startswith("search:")]
    assert len(lines) == 1, proc.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_synth_prints_impl_tree_with_costs(db):
    p = morello("synth", "matmul", "2", "3", "4", "-q", tmp_db=db)
    assert p.returncode == 0, p.stderr
    first = p.stdout.splitlines()[0]
    assert "Matmul((1×2×3, f32, GL)" in first and "cost=" in first
    assert any(l.startswith("  ") for l in p.stdout.splitlines())


def test_emit_prints_c_with_kernel_and_harness(db):
    p = morello("emit", "matmul", "3", "5", "2", "--batch", "2", "-q", tmp_db=db)
    assert p.returncode == 0, p.stderr
    assert "int kernel(const float *restrict lhs" in p.stdout
    assert "double bench(" in p.stdout
    assert "#include <immintrin.h>" in p.stdout


@pytest.mark.isa("avx2")
def test_run_matches_numpy(db):
    p = morello("run", "matmul", "7", "13", "9", "-q", tmp_db=db)
    assert p.returncode == 0, p.stderr
    assert "matches numpy" in p.stdout


@pytest.mark.isa("avx2")
def test_bench_json_prints_exactly_one_object(db):
    p = morello("bench", "matmul", "4", "4", "4", "--json", "--repeats", "2", tmp_db=db)
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert p.stdout.strip().count("\n") == 0
    assert result["verified"] is True
    assert isinstance(result["spec"], str) and isinstance(result["cost"], int)
    for key in ("gflops", "seconds_per_call", "synthesis_seconds"):
        assert isinstance(result[key], float) and result[key] > 0
    # numpy ran on as many threads as the program (1), and says which BLAS kernels
    assert result["numpy_threads"] == 1 and result["threads"] == 1
    assert result["numpy_blas"] != "unknown" and isinstance(result["numpy_blas_kernel"], str)
    assert p.stderr == ""  # --json is quiet


def test_db_stats_reports_what_a_search_stored(db):
    assert morello("synth", "matmul", "2", "2", "2", "-q", tmp_db=db).returncode == 0
    p = morello("db", "stats", "--json", tmp_db=db)
    assert p.returncode == 0, p.stderr
    stats = json.loads(p.stdout)
    assert stats["boxes"] > 0 and stats["pages"] > 0 and stats["bytes"] == db.stat().st_size
    assert stats["specs_covered"] >= stats["boxes"]
    assert stats["last_search"]["specs_solved"] > 0
    assert morello("db", "check", tmp_db=db).returncode == 0


def test_second_search_reuses_the_database(db):
    assert morello("synth", "matmul", "4", "4", "4", "-q", tmp_db=db).returncode == 0
    p = morello("bench", "matmul", "4", "4", "4", "--json", "--repeats", "1", tmp_db=db)
    assert json.loads(p.stdout)["specs_solved"] == 0


@pytest.mark.parametrize("sizes", [("0", "4", "4"), ("4", "-3", "4"), ("4", "4", "0")])
def test_nonpositive_sizes_are_refused(db, sizes):
    assert_one_line_error(morello("synth", "matmul", *sizes, tmp_db=db), ">= 1")


def test_unknown_dtype_is_refused(db):
    assert_one_line_error(morello("synth", "matmul", "2", "2", "2", "--dtype", "f64",
                                  tmp_db=db), "unknown dtype")


def test_unsupported_dtype_is_refused(db):
    assert_one_line_error(morello("synth", "matmul", "2", "2", "2", "--dtype", "bf16",
                                  tmp_db=db), "computes in f32/s32", "--dtypes")
    assert_one_line_error(morello("synth", "matmul", "2", "2", "2", "--dtypes", "f32,s8,s32",
                                  tmp_db=db), "does not widen")
    assert_one_line_error(morello("synth", "add", "2", "--dtypes", "f32,f32,f32",
                                  tmp_db=db), "for matmul only")


def test_unknown_target_is_refused(db):
    assert_one_line_error(morello("synth", "matmul", "2", "2", "2", "--target", "avx9",
                                  tmp_db=db), "unknown target", "native")


def test_the_native_target_is_the_widest_the_host_runs(db, monkeypatch):
    """``--target native``: avx512 where /proc/cpuinfo lists its flags, else avx2 (also
    where it cannot be read); the program says which it is for."""
    from morello import memory, targets

    avx2 = ["fpu", "avx2", "fma"]
    for flags, want in ((avx2, "avx2"), (avx2 + ["avx512f", "avx512bw", "avx512vl",
                                                 "avx512_vnni"], "avx512"), (None, "avx2")):
        monkeypatch.setattr(targets, "host_flags", lambda f=flags: f)
        assert targets.native_name() == want
        assert memory.parse_target("native").name == want
    monkeypatch.undo()
    native, named = (morello("emit", "matmul", "8", "8", "32", "--target", t, tmp_db=db)
                     for t in ("native", targets.native_name()))
    assert native.returncode == 0, native.stderr
    assert native.stdout == named.stdout


def test_unwritable_db_is_refused(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o500)
    try:
        target = ro / "sub" / "x.db"
        if os.access(ro, os.W_OK):  # root ignores permissions: use a path under a file
            (tmp_path / "file").write_text("")
            target = tmp_path / "file" / "x.db"
        assert_one_line_error(morello("synth", "matmul", "2", "2", "2", "--db", str(target)),
                              "database")
    finally:
        os.chmod(ro, 0o700)


def test_db_of_the_old_format_is_refused(db):
    db.write_text('{"format": "morello-db", "version": 10, "target": "avx2"}\n')
    assert_one_line_error(morello("synth", "matmul", "2", "2", "2", tmp_db=db),
                          "old single-file format")


def test_db_of_another_version_is_refused(db):
    import sqlite3

    assert morello("synth", "matmul", "2", "2", "2", "-q", tmp_db=db).returncode == 0
    with sqlite3.connect(db) as c:
        c.execute("UPDATE meta SET value = '99' WHERE name = 'version'")
    c.close()
    from morello.db import VERSION

    assert_one_line_error(morello("synth", "matmul", "2", "2", "2", tmp_db=db),
                          f"version {VERSION}")


def test_db_that_is_a_directory_is_refused(tmp_path):
    assert_one_line_error(morello("synth", "matmul", "2", "2", "2", "--db", str(tmp_path)),
                          "directory")


def test_corrupt_db_is_refused(db):
    db.write_bytes(b"\x00garbage\n\x01\x02")
    assert_one_line_error(morello("synth", "matmul", "2", "2", "2", tmp_db=db), "corrupt")


def test_one_db_keeps_the_results_of_several_thread_counts_apart(db):
    assert morello("synth", "matmul", "16", "16", "16", "-q", tmp_db=db).returncode == 0
    p = morello("bench", "matmul", "16", "16", "16", "--json", "--repeats", "1",
                "--threads", "2", tmp_db=db)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["specs_solved"] > 0  # other threads: other results
    stats = json.loads(morello("db", "stats", "--json", tmp_db=db).stdout)
    assert sorted({c["target"].split("@")[0] for c in stats["contexts"]}) == \
        ["avx2-2t-llc", "avx2-llc"]  # within the last-level cache: Target.in_llc


def test_bench_says_what_the_target_variant_means(db):
    p = morello("bench", "matmul", "16", "16", "16", "--repeats", "1", tmp_db=db)
    assert p.returncode == 0, p.stderr
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("target "))
    assert "avx2-llc (the operands fit the last-level cache" in line, p.stdout


def test_missing_c_compiler_is_reported(db):
    env = dict(os.environ, CC="/nonexistent/cc")
    assert_one_line_error(morello("run", "matmul", "2", "2", "2", env=env, tmp_db=db),
                          "C compiler")


def test_help_teaches_commands_and_examples():
    p = morello("--help")
    assert p.returncode == 0
    for word in ("synth", "emit", "run", "bench", "examples:", "--db"):
        assert word in p.stdout
    p = morello("bench", "--help")
    assert p.returncode == 0 and "--json" in p.stdout and "--batch" in p.stdout


def test_zero_threads_is_refused(db):
    assert_one_line_error(morello("synth", "matmul", "2", "2", "2", "--threads", "0",
                                  tmp_db=db), "threads")


def test_cli_operations_are_the_api_operations():
    from morello.api import OPERATIONS
    from morello.cli import OPS

    assert set(OPS) == set(OPERATIONS) | {"attention", "chain"}


@pytest.mark.isa("avx2")
@pytest.mark.parametrize("args", [["add", "5", "33"], ["max", "7", "19", "--dim", "1"],
                                  ["sum", "7", "19", "--dim", "0"], ["relu", "70"],
                                  ["broadcast", "3", "9", "--dim", "0"],
                                  ["fill", "4", "4", "--value=-inf"]])
def test_run_every_operation_matches_numpy(db, args):
    p = morello("run", *args, "-q", tmp_db=db)
    assert p.returncode == 0, p.stderr
    assert "matches numpy" in p.stdout


@pytest.mark.parametrize("args,message", [
    (["max", "4", "4"], "needs --dim"), (["add", "4", "--dim", "0"], "--dim is not"),
    (["max", "4", "4", "--dim", "2"], "out of range"), (["fill", "4", "--value", "3"],
                                                       "value must be one of"),
    (["add", "1", "2", "3", "4", "5"], "1 to 4 sizes"), (["relu", "4", "--batch", "2"],
                                                        "--batch is for matmul and transpose only"),
])
def test_bad_operation_arguments_get_one_line(db, args, message):
    assert_one_line_error(morello("synth", *args, tmp_db=db), message)
