"""Input limits and newcomer papercuts: what cannot work is refused up front, in one
line, before any search or allocation (``morello.limits``)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import probes
import pytest

import morello
from morello import cli, limits
from morello.errors import SpecError
from morello.search import Engine


def run_cli(*argv: str) -> tuple[int, str, str]:
    return probes.run_cli(list(argv))


def one_error_line(err: str) -> str:
    lines = [l for l in err.splitlines() if "error:" in l]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def no_search(monkeypatch):
    """Fail the test if a search starts."""
    def solve(self, spec):
        raise AssertionError(f"a search started for {spec}")
    monkeypatch.setattr(Engine, "solve", solve)


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "r.sqlite")


@pytest.mark.parametrize("text", ["٣", "１２", "1_0", " 3", "3.0", "0x10", "1e3", "", "+-3"])
def test_numbers_are_ascii_decimal_integers(text, db):
    code, _, err = run_cli("synth", "add", text, "4", "--db", db, "-q")
    assert code == 2
    assert "ASCII decimal integer" in one_error_line(err)


def test_parse_int_accepts_signs():
    assert limits.parse_int("+7") == 7 and limits.parse_int("-3") == -3
    with pytest.raises(ValueError):
        limits.parse_int("٣")


@pytest.mark.parametrize("argv", [
    ("synth", "matmul", str(2**63), "1", "1"),
    ("synth", "matmul", "1", "1", "1", "--batch", str(2**62)),
    ("synth", "add", str(2**64)),
    ("synth", "matmul", "1000000", "1000000", "1000000"),
    ("run", "matmul", "1000000", "1000000", "1000000"),
    ("synth", "add", "1048576", "1048576", "1048576"),
])
def test_sizes_beyond_the_limits_are_refused_before_searching(argv, db, no_search):
    code, _, err = run_cli(*argv, "--db", db, "-q")
    assert code == 2
    assert "2^50" in one_error_line(err)


def test_the_api_refuses_the_same_sizes(no_search):
    for make in (lambda: morello.matmul(2**63, 1, 1), lambda: morello.add(2**51),
                 lambda: morello.matmul(10**6, 10**6, 10**6),
                 lambda: morello.matmul(1, 1, 1, batch=2**62)):
        with pytest.raises(SpecError, match="2.50"):
            make()


def test_run_refuses_what_does_not_fit_in_memory_before_searching(db, no_search):
    code, _, err = run_cli("run", "matmul", "100000", "100000", "100000", "--db", db, "-q")
    assert code == 2
    assert "GiB of memory" in one_error_line(err)


def test_synth_of_a_program_too_large_to_run_says_so(db, monkeypatch):
    monkeypatch.setattr(limits, "available_memory", lambda: 1000)
    code, out, err = run_cli("synth", "add", "64", "64", "--db", db, "-q")
    assert code == 0 and "Add(" in out
    assert "note: the program needs" in err and "not run here" in err
    code, _, err = run_cli("bench", "add", "64", "64", "--db", db, "-q")
    assert code == 2 and "GiB of memory" in one_error_line(err)
    prog = morello.synthesize(morello.add(64, 64), db=db)
    with pytest.raises(SpecError, match="not run here"):
        prog.random_inputs()


def test_the_largest_accepted_spec_is_stored_and_read_back(db):
    """A Spec at the limit (2^50 points) is searched, saved, and answered by the
    database (the store's coordinate bounds once refused it as corrupt)."""
    first = morello.synthesize(morello.add(2**50), db=db)
    morello.api.close_sessions()
    again = morello.synthesize(morello.add(2**50), db=db)
    assert again.cost == first.cost
    code, out, _ = run_cli("db", "check", "--db", db)
    assert code == 0


@pytest.mark.parametrize("flag,value,message", [
    ("--threads", "0", "threads"), ("--threads", "257", "threads"),
    ("--threads", "-1", "threads"), ("--repeats", "0", "--repeats"),
    ("--repeats", "10000000", "--repeats"),
])
def test_absurd_options_are_refused(flag, value, message, db, no_search):
    cmd = "bench" if flag == "--repeats" else "synth"
    code, _, err = run_cli(cmd, "matmul", "4", "4", "4", flag, value, "--db", db, "-q")
    assert code == 2
    assert message in one_error_line(err)


def test_api_threads_and_iters_are_checked():
    with pytest.raises(SpecError, match="threads"):
        morello.synthesize(morello.add(4), db=False, threads=1000)
    with pytest.raises(SpecError, match="threads"):
        morello.synthesize(morello.add(4), db=False, threads=0)


def test_a_long_database_name_is_one_line(tmp_path):
    code, _, err = run_cli("synth", "add", "4", "--db", str(tmp_path / ("x" * 300)), "-q")
    assert code == 2
    assert "File name too long" in one_error_line(err)


def test_version():
    code, out, _ = run_cli("--version")
    assert code == 0 and out.strip() == f"morello {morello.__version__}"


def test_no_command_and_no_db_action_say_what_to_give():
    code, _, err = run_cli()
    assert code == 2 and "give a command" in one_error_line(err)
    code, _, err = run_cli("db")
    assert code == 2 and "stats, check or merge" in one_error_line(err)


def test_help_names_the_database_file_and_the_limits():
    from morello.db import default_path

    text = cli.build_parser().format_help()
    assert default_path().name in text
    assert "2^50" in text and "ASCII" in text


def test_repr_of_a_program_is_short():
    prog = morello.synthesize(morello.matmul(64, 64, 64), db=False)
    r = repr(prog)
    assert len(r) < 300 and "Matmul" in r and str(prog.cost) in r


def test_numpy_dtypes_are_accepted():
    want = morello.matmul(4, 4, 4)
    for dt in (np.float32, np.dtype("float32"), "float32", "f32"):
        assert morello.matmul(4, 4, 4, dtype=dt) == want
    with pytest.raises(SpecError, match="float64 is not one of morello's"):
        morello.matmul(4, 4, 4, dtype=np.float64)


def test_importing_an_unbuilt_source_tree_says_what_to_do(tmp_path):
    """From a clone's root, the uncompiled morello/ shadows the installed package."""
    src = Path(morello.__file__).parent
    shutil.copytree(src, tmp_path / "morello",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__", "*.c"))
    # An editable install's finder takes precedence over the working directory: drop it
    # so that this runs as in a clean clone with a normal install.
    code = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path "
            "if 'editable' not in repr(f)]; import morello")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=""))
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert "compiled core is not built" in last and "pip install -e ." in last


def test_the_c_of_a_shape_beyond_32_bit_indices_compiles(tmp_path):
    """Too large to run here, but emitted: 64-bit loop counters and index arithmetic,
    and the C compiler finds no overflow."""
    from morello.codegen.build import find_compiler

    for spec in (morello.add(2**33 + 3), morello.matmul(3, 2, 2**31 + 5)):
        prog = morello.synthesize(spec, db=False)
        src = prog.c_source
        assert "for (int" not in src
        c = tmp_path / "k.c"
        c.write_text(src)
        proc = subprocess.run([find_compiler(), "-O1", "-std=gnu11", "-c", "-Wall",
                               "-Werror=overflow", "-Werror=shift-count-overflow",
                               *prog.target.cflags, "-o", str(tmp_path / "k.o"), str(c)],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "warning" not in proc.stderr, proc.stderr[-2000:]
