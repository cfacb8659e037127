"""First-use calibration: constants fitted to the host without the user asking."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading

import pytest
from test_calibrate import NS

from morello import calibrate, costs, hostfit
from morello.calibrate import Calibration, fit
from morello.memory import AVX2, TARGETS, calibration_choice, parse_target


@pytest.fixture
def fresh_host(tmp_path, monkeypatch):
    """No calibration on this 'host' yet, no opt-out, and a counted fake measurement."""
    monkeypatch.delenv("MORELLO_CALIBRATION", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setattr(hostfit, "host_key", lambda: "TestCPU-25-97")
    monkeypatch.setattr(hostfit, "cannot_fit", lambda target: None)
    calls = []

    def fake_run(target, progress=None):
        calls.append(target.name)
        return Calibration(fit(NS), NS, "test host")

    monkeypatch.setattr(calibrate, "run_first_use", fake_run)
    return calls


def test_snapping_puts_costs_on_a_grid_and_keeps_small_ones(fresh_host):
    for v in (16, 100, 125, 154, 1000, 24_000):
        s = hostfit.snap_value(v)
        assert abs(s / v - 1) <= 2 ** (1 / (2 * hostfit.GRID)) - 1 + 0.01
        assert hostfit.snap_value(s) == s
    assert [hostfit.snap_value(v) for v in range(1, 16)] == list(range(1, 16))
    # Run-to-run noise of a few per cent lands on one grid point (154 and 159: measured).
    assert hostfit.snap_value(153) == hostfit.snap_value(159)
    c = hostfit.snap(fit(NS), AVX2.costs)
    assert c.gl_ramp == AVX2.costs.gl_ramp  # one run cannot measure it: the built-in's
    assert c.fma == fit(NS).fma and c.gl_prefetch == fit(NS).gl_prefetch


def test_first_use_measures_once_per_target_and_reuses_the_file(fresh_host, capsys):
    assert calibration_choice("avx2") == "host"
    tgt = parse_target("avx2")
    assert fresh_host == ["avx2"]
    err = capsys.readouterr().err
    assert "first use of avx2" in err and "MORELLO_CALIBRATION=builtin" in err
    assert tgt.costs == hostfit.snap(fit(NS), AVX2.costs) != AVX2.costs
    path = hostfit.auto_path("avx2")
    doc = json.loads(path.read_text())
    assert doc["source"] == "first-use" and doc["target"] == "avx2"
    assert parse_target("avx2").costs == tgt.costs and parse_target("avx2", 2).processors == 2
    assert fresh_host == ["avx2"] and capsys.readouterr().err == ""
    # Another target is fitted on its own first use; "builtin" never measures.
    assert parse_target("avx512", calibration="builtin").costs == TARGETS["avx512"].costs
    assert fresh_host == ["avx2"]


def test_opt_outs_and_an_explicit_calibration_win(fresh_host, monkeypatch, tmp_path):
    assert parse_target("avx2", calibration="builtin").costs == AVX2.costs
    monkeypatch.setenv("MORELLO_CALIBRATION", "builtin")
    assert parse_target("avx2").costs == AVX2.costs
    monkeypatch.delenv("MORELLO_CALIBRATION")
    manual = costs.default_path("avx2")  # what `morello calibrate` writes
    costs.save(manual, "avx2", fit(NS), NS, "test host")
    assert parse_target("avx2").costs == fit(NS)
    assert fresh_host == []


def test_a_host_that_cannot_measure_keeps_the_built_in_constants(fresh_host, monkeypatch):
    monkeypatch.setattr(hostfit, "cannot_fit", lambda target: "no C compiler")
    assert parse_target("avx2").costs == AVX2.costs and fresh_host == []
    from morello.memory import calibration_source

    assert calibration_source("avx2") == ("built-in cost constants (not fitted to this "
                                          "host: no C compiler)")


def test_concurrent_first_uses_measure_once(fresh_host):
    got = []
    threads = [threading.Thread(target=lambda: got.append(parse_target("avx2").costs))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4 and len(set(got)) == 1 and fresh_host == ["avx2"]


def test_the_host_key_names_a_cpu_model():
    key = hostfit.host_key()
    assert key and "/" not in key and " " not in key


@pytest.mark.isa("avx2")
def test_a_new_user_s_first_bench_fits_the_host_and_says_so(tmp_path):
    """End to end, as a new user meets it: no calibration, no opt-out; the first bench
    measures (one progress line), reports the fitted constants, and the second reuses
    them."""
    env = {k: v for k, v in os.environ.items() if k != "MORELLO_CALIBRATION"}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_CACHE_HOME=str(tmp_path / "c"))
    cmd = [sys.executable, "-m", "morello", "bench", "matmul", "16", "16", "16", "--json",
           "--repeats", "1", "--quiet"]
    runs = [subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
            for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr[-1500:]
    assert "first use of avx2" in runs[0].stderr and "first use" not in runs[1].stderr
    first, second = (json.loads(r.stdout) for r in runs)
    assert first["constants"].startswith("cost constants fitted to this host on first use")
    assert second["constants"] == first["constants"] and second["specs_solved"] == 0
    files = list((tmp_path / "config" / "morello" / "host").glob("calibration-avx2-*.json"))
    assert len(files) == 1
    assert costs.load(files[0], "avx2") == parse_target("avx2", 1, str(files[0])).costs


def test_a_shipped_set_for_the_cpu_model_is_kept_where_the_measurement_confirms_it():
    shipped = fit(NS)
    near = dataclasses.replace(shipped, gl_line=round(shipped.gl_line * 1.2),
                               parallel_setup=round(shipped.parallel_setup / 1.25))
    got = hostfit.snap(near, AVX2.costs, shipped)
    assert got == shipped  # noise within the band: the shipped constants, exactly
    far = dataclasses.replace(near, gl_line=shipped.gl_line * 3)
    got = hostfit.snap(far, AVX2.costs, shipped)
    assert got.gl_line == hostfit.snap_value(shipped.gl_line * 3)  # corrected, on the grid
    assert dataclasses.replace(got, gl_line=shipped.gl_line) == shipped


def test_the_shipped_sets_load_and_name_known_targets_with_their_provenance():
    doc = json.loads(hostfit.SETS.read_text())
    assert doc["format"] == hostfit.SETS_FORMAT and doc["version"] == 1 and doc["sets"]
    for row in doc["sets"]:
        assert row["target"] in TARGETS
        assert hostfit.shipped_set(row["target"], row["cpu"]) == costs.CostConstants.from_json(
            dict(row["constants"]))
        assert {"host", "date", "command"} <= set(row["provenance"])
    assert hostfit.shipped_set("avx2", "NoSuchCPU-0-0") is None
