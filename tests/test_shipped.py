"""The shipped database: layered under the user's (read when it does not answer, never
written), shown by ``db stats``, and current: it must answer its corpus with the costs of
fresh searches, or CI fails until ``python tools/ship_db.py`` regenerates it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import morello
from morello import costs, hostfit
from morello import precompute as pc
from morello.api import close_sessions
from morello.store.format import SHIPPED

SHIPPED_FILE = Path(morello.__file__).resolve().parent / "data" / SHIPPED


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    """A small shipped database (matmuls up to 8, pow2) made read-only, in use."""
    path = tmp_path / "ship" / "results.sqlite"
    path.parent.mkdir()
    pc.run(pc.plan("matmul", [8, 8, 8], "pow2"), path)
    path.chmod(0o444)
    path.parent.chmod(0o555)
    monkeypatch.setenv("MORELLO_SHIPPED_DB", str(path))
    close_sessions()
    yield path
    close_sessions()
    path.parent.chmod(0o755)


def test_the_shipped_database_answers_what_the_user_s_does_not(shipped, tmp_path):
    before = shipped.read_bytes()
    user = tmp_path / "user.sqlite"
    got = morello.synthesize(morello.matmul(8, 4, 8), db=user)
    assert got.stats.specs_solved == 0
    assert got.cost == morello.synthesize(morello.matmul(8, 4, 8), db=False).cost
    # A new Spec: its sub-Specs within the shipped bounds are read, not solved.
    fresh = morello.synthesize(morello.matmul(16, 8, 8), db=tmp_path / "alone.sqlite")
    close_sessions()
    os.environ["MORELLO_SHIPPED_DB"] = "off"
    alone = morello.synthesize(morello.matmul(16, 8, 8), db=tmp_path / "alone2.sqlite")
    os.environ["MORELLO_SHIPPED_DB"] = str(shipped)
    close_sessions()
    assert 0 < fresh.stats.specs_solved < alone.stats.specs_solved
    assert fresh.cost == alone.cost
    layered = morello.synthesize(morello.matmul(16, 8, 8), db=user)
    assert layered.stats.specs_solved == fresh.stats.specs_solved
    close_sessions()
    again = morello.synthesize(morello.matmul(16, 8, 8), db=user)  # now in the user's file
    assert again.stats.specs_solved == 0
    assert shipped.read_bytes() == before  # never written


def test_db_stats_shows_both_files(shipped, tmp_path):
    user = tmp_path / "user.sqlite"
    morello.synthesize(morello.matmul(3, 3, 3), db=user)
    close_sessions()
    r = subprocess.run([sys.executable, "-m", "morello", "db", "stats", "--db", str(user),
                        "--json"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["path"] == str(user) and out["shipped"]["path"] == str(shipped)
    assert out["shipped"]["contexts"][0]["roots"] == 64
    r = subprocess.run([sys.executable, "-m", "morello", "db", "stats", "--db", str(user)],
                       capture_output=True, text=True, cwd=tmp_path)
    assert "shipped database (read-only, under it)" in r.stdout


# What the issue asks the shipped file to answer, and what a newcomer runs first.
CURRENT = [
    ("matmul 64 64 64", lambda t: morello.matmul(64, 64, 64, target=t, serial=True)),
    ("matmul 256 256 256", lambda t: morello.matmul(256, 256, 256, target=t, serial=True)),
    ("softmax 512 1024", lambda t: morello.softmax(512, 1024, target=t, serial=True)),
    ("attention 128 64", lambda t: morello.attention(128, 64, target=t, serial=True)),
    ("matmul 1 2048 16384 bf16 cm",
     lambda t: morello.matmul(1, 2048, 16384, dtypes=("f32", "bf16", "f32"), rhs_layout="cm",
                              target=t, serial=True)),
]


def test_the_shipped_database_keeps_each_family_in_its_context():
    """No context of before contexts per family (``morello.db.migrate`` moves them), so a
    change a family cannot reach leaves its shipped results valid."""
    from morello import db as dbmod

    contexts = dbmod.stats(SHIPPED_FILE)["contexts"]
    assert contexts and all("@" in c["actions"] for c in contexts)
    assert {c["actions"].split("@")[0] for c in contexts} >= {"Matmul", "Softmax"}


@pytest.mark.parametrize("name, make", CURRENT, ids=[c[0] for c in CURRENT])
@pytest.mark.parametrize("target", ["avx2", "avx512"])
def test_the_shipped_database_is_current(name, make, target, tmp_path, monkeypatch):
    assert SHIPPED_FILE.is_file(), "no shipped database: run `python tools/ship_db.py`"
    monkeypatch.setenv("MORELLO_SHIPPED_DB", str(SHIPPED_FILE))
    close_sessions()
    got = morello.synthesize(make(target), target, db=tmp_path / "user.sqlite",
                             calibration="builtin")
    close_sessions()
    assert got.stats.specs_solved == 0, (
        f"the shipped database does not answer {name} on {target}: it is stale (the "
        "model changed?); regenerate it with `python tools/ship_db.py`")
    fresh = morello.synthesize(make(target), target, db=False, calibration="builtin")
    assert got.cost == fresh.cost


def _host_sets():
    doc = json.loads(hostfit.SETS.read_text())
    return [(row["cpu"], row["target"]) for row in doc["sets"]]


@pytest.mark.parametrize("name, make", [CURRENT[1], CURRENT[4]], ids=[CURRENT[1][0],
                                                                       CURRENT[4][0]])
@pytest.mark.parametrize("cpu, target", _host_sets(), ids=["-".join(s) for s in _host_sets()])
def test_the_shipped_database_answers_under_each_shipped_host_set(name, make, cpu, target,
                                                                   tmp_path, monkeypatch):
    """A first use on a CPU model of ``host_constants.json`` that confirms its set (the
    constants are the context, not the file they come from) is answered too."""
    assert SHIPPED_FILE.is_file(), "no shipped database: run `python tools/ship_db.py`"
    monkeypatch.setenv("MORELLO_SHIPPED_DB", str(SHIPPED_FILE))
    close_sessions()
    cal = tmp_path / "first-use.json"
    costs.save(cal, target, hostfit.shipped_set(target, cpu), {}, cpu, source=hostfit.SOURCE)
    got = morello.synthesize(make(target), target, db=tmp_path / "user.sqlite",
                             calibration=str(cal))
    close_sessions()
    assert got.stats.specs_solved == 0, (
        f"the shipped database does not answer {name} under {cpu}'s {target} set: "
        "regenerate it with `python tools/ship_db.py`")
    fresh = morello.synthesize(make(target), target, db=False, calibration=str(cal))
    assert got.cost == fresh.cost
