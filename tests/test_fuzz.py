"""Fuzzing the command line and the API with random arguments, for every command and kind.

The rules: no traceback, no hang (each call is stopped after ``HANG_SECONDS``), exit
status 0 or 2 (1 means a built kernel did not match numpy: a wrong result), one line per
error; through the API, a documented exception with a one-line message or a result that
matches numpy.

``MORELLO_FUZZ_EXAMPLES`` sets the examples per test (default 150; the closing notes' runs
use 10,000: ``MORELLO_FUZZ_EXAMPLES=5000 pytest tests/test_fuzz.py``).
"""
from __future__ import annotations

import os
import string

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st
from probes import ALLOWED, TRIES, cases, check_outcome, deadline, run_cli

import morello
from morello.api import OPERATIONS

EXAMPLES = int(os.environ.get("MORELLO_FUZZ_EXAMPLES", "150"))
HANG_SECONDS = 120
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])

pytestmark = pytest.mark.isa("avx2")


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A private cache and config home for the module (the default database, builds)."""
    d = tmp_path_factory.mktemp("fuzzhome")
    (d / "ro").mkdir()
    (d / "adir").mkdir()
    saved = {k: os.environ.get(k) for k in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME")}
    os.environ["XDG_CACHE_HOME"] = str(d / "cache")
    os.environ["XDG_CONFIG_HOME"] = str(d / "config")
    yield d
    morello.api.close_sessions()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


# Numbers: mostly small valid sizes, and every kind of surprise.
SURPRISES = ["0", "-1", "-3", str(2**50), str(2**50 + 1), str(2**63), str(2**64),
             "1e3", "3.0", "٣", "１２", "1_0", " 3", "0x10", "", "-", "+4", "inf", "nan",
             "abc", "3" * 30, "--", "-0"]
number_st = st.one_of(st.integers(1, 24).map(str), st.integers(1, 6).map(str),
                      st.sampled_from(SURPRISES))
text_st = st.text(string.printable + "é٣∞", max_size=12)
OPS = list(OPERATIONS) + ["conv", "MATMUL", ""]


@st.composite
def spec_args_st(draw, run: bool):
    plausible = draw(st.integers(0, 9)) < 7  # a valid operation of the right rank
    op = draw(st.sampled_from(list(OPERATIONS)) if plausible else st.sampled_from(OPS)
              | text_st)
    if plausible:
        rank = 3 if op == "matmul" else draw(st.integers(1, 4))
    else:
        rank = draw(st.integers(0, 5))
    if run or plausible and draw(st.booleans()):  # small: building and running stay quick
        sizes = [str(draw(st.integers(1, 12 if rank < 3 else 6))) for _ in range(rank)]
    else:
        sizes = [draw(number_st) for _ in range(rank)]
    args = [op, *sizes]
    if plausible and op in ("max", "sum", "broadcast"):
        args += ["--dim", str(draw(st.integers(-rank, rank - 1)))]
    if plausible:
        args += ["--db", "DB", "-q"]
    flags = draw(st.lists(st.sampled_from([
        "--batch", "--dim", "--value", "--dtype", "--target", "--threads", "--db", "-q",
        "--calibration", "--json", "--repeats", "--bogus"]), max_size=1 if plausible else 4,
        unique=True))
    if plausible:
        flags = [f for f in flags if f not in args]
    for f in flags:
        if f in ("-q", "--json", "--bogus"):
            args.append(f)
        elif f == "--value":
            args.append("--value=" + draw(st.sampled_from(["0", "-inf", "inf", "1", "nan",
                                                           "x", "-0", "1e400", "٣"])))
        elif f == "--dtype":
            args += [f, draw(st.sampled_from(["f32", "float32", "bf16", "u8", "f64", "x",
                                              ""]))]
        elif f == "--target":
            args += [f, draw(st.sampled_from(["avx2", "avx512", "x", ""]))]
        elif f == "--threads":
            args += [f, draw(st.sampled_from(["1", "2", "0", "-1", "257", "100000", "x"]))]
        elif f == "--db":
            args += [f, draw(st.sampled_from(["DB", "ADIR", "/dev/null", "/nonexistent/x.db",
                                              "x" * 300, "RO/x.db", ""]))]
        elif f == "--calibration":
            args += [f, draw(st.sampled_from(["builtin", "/nonexistent.json", "ADIR", ""]))]
        elif f == "--repeats":
            args += [f, draw(st.sampled_from(["1", "2", "0", "-5", "10000000", "x"]))]
        else:
            args += [f, draw(number_st)]
    return args


@st.composite
def argv_st(draw):
    command = draw(st.sampled_from(["synth", "emit", "synth", "emit", "run", "bench", "db",
                                    "calibrate", "", "--version", "--help", "nope"]))
    if command in ("synth", "emit", "run", "bench"):
        return [command, *draw(spec_args_st(run=command in ("run", "bench")))]
    if command == "db":
        action = draw(st.sampled_from(["stats", "check", "merge", "", "drop"]))
        rest = draw(st.lists(st.sampled_from(["--db", "DB", "ADIR", "/dev/null", "--json",
                                              "-o", "OUT", "x" * 300, "/nonexistent"]),
                             max_size=4))
        return ["db", action, *rest] if action else ["db", *rest]
    if command == "calibrate":  # only refusals: a real calibration takes 15 s
        return ["calibrate", *draw(st.sampled_from([
            ["--runs", "0"], ["--runs", "101"], ["--target", "x"], ["--runs", "٣"],
            ["--bogus"], ["--out", "ADIR", "--runs", "0"]]))]
    return [command] if command else []


def _resolve(argv: list[str], home) -> list[str]:
    names = {"DB": str(home / "fuzz.sqlite"), "ADIR": str(home / "adir"),
             "RO/x.db": str(home / "ro" / "x.db"), "OUT": str(home / "out.sqlite")}
    return [names.get(a, a) for a in argv]


@FUZZ
@given(argv_st())
def test_cli_never_tracebacks_hangs_or_verifies_wrong(home, argv):
    (home / "ro").chmod(0o500)
    argv = _resolve(argv, home)
    note(repr(argv))
    TRIES["fuzzed CLI calls"] += 1
    code, out, err = run_cli(argv, HANG_SECONDS)
    event(f"{argv[0] if argv else '(none)'} exit {code}")
    assert code in (0, 2), (code, err[-2000:])
    assert "Traceback" not in err
    errors = [l for l in err.splitlines() if "error:" in l]
    assert len(errors) <= 1, err
    if code == 2 and "--help" not in argv:
        assert errors, err  # a refusal says why
    if code == 0 and argv and argv[0] == "run":
        assert "matches numpy" in out


# The API: constructors with arguments of any type, synthesize with any options, then
# the callable with any misuse case.
value_st = st.one_of(
    st.integers(1, 9), st.integers(-2, 0), st.sampled_from([2**50 + 1, 2**63, 2**70]),
    st.booleans(), st.floats(allow_nan=True), st.none(), st.text(max_size=4),
    st.just(np.int64(3)), st.just(np.uint8(2)), st.just([2, 3]), st.just((4,)))
dtype_st = st.sampled_from(["f32", np.float32, np.dtype("float32"), "float32", "f64",
                            np.float64, "bf16", None, 3, object])


@st.composite
def api_call_st(draw):
    op = draw(st.sampled_from(sorted(OPERATIONS)))
    n = 3 if op == "matmul" and draw(st.integers(0, 3)) else draw(st.integers(0, 5))
    small = draw(st.integers(0, 3)) > 0
    if small:
        sizes = [draw(st.integers(1, 7)) for _ in range(n)]
    else:
        sizes = [draw(value_st) for _ in range(n)]
    kw = {}
    for name, strat in (("dim", st.one_of(st.integers(-5, 5), value_st)),
                        ("value", st.sampled_from([0.0, -np.inf, 1.0, np.nan, "0", None])),
                        ("batch", st.one_of(st.integers(1, 3), value_st)),
                        ("dtype", dtype_st), ("serial", st.sampled_from([True, False, 0])),
                        ("target", st.sampled_from(["avx2", "x", None, 3]))):
        if draw(st.integers(0, 9)) == 0:
            kw[name] = draw(strat)
    if op in ("max", "sum", "broadcast") and "dim" not in kw and draw(st.booleans()):
        kw["dim"] = 0
    threads = draw(st.sampled_from([1, 1, 1, 1, 2, 2, 0, -1, 257, 1.5, True, "2"]))
    options = {}
    for name, choices in (("db", ["DB", 3, "", True, None, b"x.db", "ADIR"]),
                          ("calibration", ["builtin", 3, "/nonexistent.json", ""]),
                          ("progress", [3, "x", lambda *a: None])):
        if draw(st.integers(0, 9)) == 0:
            options[name] = draw(st.sampled_from(choices))
    return op, sizes, kw, threads, options, draw(st.integers(0, 2**16))


@FUZZ
@given(api_call_st())
def test_api_gives_a_documented_error_or_a_right_result(home, call):
    op, sizes, kw, threads, options, seed = call
    note(repr(call))
    TRIES["fuzzed API calls"] += 1
    make = OPERATIONS[op][1]
    db = options.pop("db", False)
    db = {"DB": str(home / "api.sqlite"), "ADIR": str(home / "adir")}.get(db, db) \
        if isinstance(db, str) else db
    try:
        with deadline(HANG_SECONDS):
            spec = make(*sizes, **kw)
            prog = morello.synthesize(spec, db=db, threads=threads, **options)
    except ALLOWED as e:
        msg = str(e)
        assert msg and "\n" not in msg and len(msg) < 400, repr(msg)
        event(f"refused: {type(e).__name__}")
        return
    if spec.volume > 4096 or spec.kind.name == "MATMUL" and spec.volume > 512:
        return  # searched; too large to build for every example
    fn = prog.compile()
    all_cases = cases(prog, fn, seed)
    name, thunk = all_cases[seed % len(all_cases)]
    note(name)
    event(f"called: {check_outcome(prog, thunk)}")
