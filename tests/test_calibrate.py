"""Cost constants: fitting, calibration files, and their effect on targets and databases."""
from __future__ import annotations

import json

import pytest
from test_cli import assert_one_line_error, morello

from morello import costs
from morello.calibrate import fit
from morello.costs import CostConstants
from morello.errors import MorelloError
from morello.memory import AVX2, parse_target

NS = {"fma": 0.2, "l1_line": 0.4, "l2_line": 1.0, "gl_line": 6.0, "gl_line_parallel": 4.0,
      "gl_line_streams": 3.6, "gl_line_strided": 24.0, "run_restart": 78.0,
      "vector_move": 0.35, "broadcast": 0.4, "tile_4x16_step": 2.4, "tile_6x16_step": 3.0,
      "scalar_madd": 1.6, "hsum": 8.0, "parallel_setup": 2000.0, "parallel_iter": 0.6}


def test_fit_converts_nanoseconds_to_fma_units():
    c = fit(NS)
    # One unit is a quarter of the 0.2 ns FMA: 0.05 ns.
    assert c == CostConstants(
        l1_line=8, l2_line=20, gl_line=120,
        gl_line_parallel=round(80 - (360 + (78 - 18) * 20) * 64 / 4096), gl_line_streams=72,
        gl_run=360,
        gl_ramp=(78 - 18) * 20, strided_factor=4, fma=4,
        broadcast=8, vector_move=14,  # a load and a store: 2 x 0.35 ns
        scalar_op=32 - 3 * 8, hsum=160, parallel_setup=40_000, parallel_iter=12,
        llc_run=360)  # not measured in NS: as gl_run


def test_llc_run_is_a_strided_line_in_the_last_level_cache_beyond_a_streamed_one():
    assert fit(NS | {"llc_line": 1.0, "llc_line_strided": 5.0}).llc_run == 80
    assert fit(NS | {"llc_line": 1.0, "llc_line_strided": 0.9}).llc_run == 0


def test_calibration_without_the_llc_run_prices_runs_in_cache_as_in_main_memory():
    d = fit(NS).to_json()
    del d["llc_run"]
    assert CostConstants.from_json(d).llc_run == d["gl_run"] == 360


def test_calibration_file_round_trips_and_renames_the_target(tmp_path):
    path = tmp_path / "cal.json"
    c = fit(NS)
    costs.save(path, "avx2", c, NS, "test host")
    assert costs.load(path, "avx2") == c
    tgt = parse_target("avx2", 1, str(path))
    assert tgt.costs == c and tgt.db_key == f"avx2@{c.fingerprint()}"
    assert parse_target("avx2", 2, str(path)).db_key == f"avx2-2t@{c.fingerprint()}"
    assert parse_target("avx2", 1, "builtin") is AVX2


@pytest.mark.parametrize("doc, words", [
    ("not json", "not JSON"),
    ('{"format": "x"}', "not a morello calibration"),
    ('{"format": "morello-calibration", "version": 1, "target": "avx512", "constants": {}}',
     "calibrates target"),
    ('{"format": "morello-calibration", "version": 1, "target": "avx2", '
     '"constants": {"l1_line": -1}}', "lacks constants"),
])
def test_bad_calibration_files_are_refused(tmp_path, doc, words):
    path = tmp_path / "cal.json"
    path.write_text(doc)
    with pytest.raises(MorelloError, match=words):
        costs.load(path, "avx2")


def test_calibration_without_the_stream_term_prices_every_line_alike():
    d = fit(NS).to_json()
    del d["gl_line_parallel"]
    c = CostConstants.from_json(d)
    assert c.gl_line_parallel == c.gl_line == 120
    # Side by side may be slower than one stream (pages of weight rows on a Zen 4 host).
    assert CostConstants.from_json(d | {"gl_line_parallel": 160}).gl_line_parallel == 160


def test_calibration_without_long_runs_prices_them_as_page_runs():
    d = fit(NS).to_json()
    del d["gl_line_streams"]
    c = CostConstants.from_json(d)
    assert c.gl_line_streams == c.gl_line_parallel == fit(NS).gl_line_parallel


def test_calibration_without_software_prefetch_reads_without_it():
    d = fit(NS).to_json()
    del d["gl_prefetch"]
    assert CostConstants.from_json(d).gl_prefetch == 0


@pytest.mark.parametrize("times, want", [
    ({0: 2.0, 64: 1.9, 128: 1.7, 256: 1.8, 512: 2.1}, 128),  # the fastest distance
    ({0: 2.0, 64: 1.99, 128: 1.98, 256: 2.3, 512: 2.0}, 0),  # none 3 % faster than none
    ({0: 2.5, 64: 2.179, 128: 2.174, 256: 2.172, 512: 2.174}, 64),  # alike: the shortest
    ({}, 0),                                                # not measured (older runs)
])
def test_prefetch_distance_is_the_fastest_that_beats_none(times, want):
    ns = NS | {f"stripes_ahead_{n}": t for n, t in times.items()}
    assert fit(ns).gl_prefetch == want


def test_negative_constant_is_refused(tmp_path):
    d = fit(NS).to_json() | {"gl_line": -3}
    with pytest.raises(MorelloError, match="gl_line"):
        CostConstants.from_json(d)


@pytest.mark.isa("avx2")
def test_calibrate_command_writes_constants_that_synth_uses(tmp_path):
    cal = tmp_path / "cal.json"
    p = morello("calibrate", "--quick", "--runs", "1", "--json", "--out", str(cal))
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["path"] == str(cal)
    assert out["measured_ns"]["fma"] > 0 and out["constants"]["fma"] == 4
    db = tmp_path / "x.db"
    p = morello("synth", "matmul", "8", "8", "8", "-q", "--calibration", str(cal), tmp_db=db)
    assert p.returncode == 0, p.stderr
    from morello.db import stats

    fp = CostConstants.from_json(out["constants"]).fingerprint()
    # One target (in_llc), with a context per table family it reached.
    assert {c["target"] for c in stats(db)["contexts"]} == {f"avx2-llc@{fp}"}


def test_missing_calibration_file_is_one_line_error(tmp_path):
    p = morello("synth", "matmul", "2", "2", "2", "--calibration", str(tmp_path / "no.json"))
    assert_one_line_error(p, "cannot read calibration")


def test_calibrate_keeps_each_constants_median_over_runs(monkeypatch):
    from morello import calibrate

    slow = dict(NS, gl_line=12.0)  # one disturbed run: main memory twice as slow
    runs = iter([NS, slow, NS])
    monkeypatch.setattr(calibrate, "measure", lambda *a, **k: next(runs))
    assert calibrate.run(AVX2, runs=3).constants == fit(NS)


def test_calibrate_runs_below_one_is_one_line_error():
    assert_one_line_error(morello("calibrate", "--runs", "0", "--dry-run"), "--runs")


def test_the_benchmarks_can_say_which_constants_they_used(tmp_path, monkeypatch):
    from morello.memory import calibration_source

    monkeypatch.delenv("MORELLO_CALIBRATION", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setattr("morello.hostfit.host_key", lambda: "TestCPU-1-2")
    assert calibration_source("avx2", "builtin").startswith("built-in")
    auto = tmp_path / "morello" / "host" / "calibration-avx2-TestCPU-1-2.json"
    costs.save(auto, "avx2", fit(NS), NS, "test host", source="first-use")
    assert calibration_source("avx2") == f"cost constants fitted to this host on first use ({auto})"
    monkeypatch.setenv("MORELLO_CALIBRATION", "/some/file.json")
    assert calibration_source("avx2") == "cost constants of /some/file.json"
    assert calibration_source("avx2", "builtin").startswith("built-in")
