"""Processes that search into one database file, and what the file holds: shared by the
concurrency and kill -9 tests (tests/test_db_concurrency.py) and their full-size run
(benchmarks/db_robustness.py)."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import morello

# A long-lived process: waits for the gate file, then synthesizes its shapes one after
# the other in one session, printing one JSON line per shape.
LOOP_SCRIPT = r"""
import json, os, sys, time
import morello
db, gate, shapes = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
deadline = time.time() + 120
while not os.path.exists(gate) and time.time() < deadline:
    time.sleep(0.002)
for s in shapes:
    p = morello.synthesize(morello.matmul(*s), db=db)
    print(json.dumps({"shape": s, "cost": p.cost, "solved": p.stats.specs_solved}),
          flush=True)
"""


# Children run outside the source tree, so that they import the installed (built) morello.
RUN_DIR = tempfile.gettempdir()


def run_outside(*args, **kw) -> subprocess.CompletedProcess:
    """``subprocess.run`` in RUN_DIR."""
    return subprocess.run(*args, cwd=RUN_DIR, **kw)


def popen_outside(*args, **kw) -> subprocess.Popen:
    """``subprocess.Popen`` in RUN_DIR."""
    return subprocess.Popen(*args, cwd=RUN_DIR, **kw)


def morello_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "morello", *args]


def spec_text(shape) -> str:
    return str(morello.matmul(*shape).canonical())


def roots_in(path: Path) -> set[str]:
    """The Spec texts of the roots committed to ``path``, read by a read-only connection
    (raises if it cannot read them)."""
    if not path.exists() or path.stat().st_size == 0:
        return set()
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=60)
    try:
        if not conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'roots'"
                            ).fetchone()[0]:
            return set()
        return {row[0] for row in conn.execute("SELECT spec FROM roots")}
    finally:
        conn.close()


def stray_files(path: Path) -> list[str]:
    """Files beside the database other than its write-ahead log and shared memory."""
    allowed = {path.name, f"{path.name}-wal", f"{path.name}-shm"}
    return sorted(p.name for p in path.parent.iterdir() if p.name not in allowed)


class Watched:
    """A ``morello synth`` (with progress on stderr) and the time its save began."""

    def __init__(self, path: Path, shape, timeout: float) -> None:
        self.t0 = time.monotonic()
        self.timeout = timeout
        self.ended: float | None = None
        self.proc = popen_outside(
            morello_cmd("synth", "matmul", *map(str, shape), "--db", str(path)),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.saving = threading.Event()
        self.saving_at: float | None = None
        self.err = b""
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def wait_for_save(self, timeout: float) -> None:
        """Until the save is announced or the process ends (a search that solved
        nothing, every answer found in the file, announces no save)."""
        end = time.monotonic() + timeout
        while (not self.saving.wait(0.005) and self.proc.poll() is None
               and time.monotonic() < end):
            pass

    def _read(self) -> None:
        assert self.proc.stderr is not None
        while True:
            chunk = self.proc.stderr.read1(4096)
            if not chunk:
                return
            self.err += chunk
            if self.saving_at is None and b"saving results to" in self.err:
                self.saving_at = time.monotonic() - self.t0
                self.saving.set()

    def finish(self) -> int:
        """Its exit status (killed, and TimeoutExpired raised, past the timeout)."""
        try:
            rc = self.proc.wait(self.timeout)
            self.ended = time.monotonic()
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        finally:
            self.reader.join(10)
            assert self.proc.stderr is not None
            self.proc.stderr.close()
        return rc


def run_concurrent_writers(path: Path, plan: list[list[tuple]], cli_procs: set[int],
                           timeout: float) -> tuple[dict[tuple, int], list[str]]:
    """Run ``plan[p]`` (shapes, in order) in process p, all into ``path`` at once: a
    long-lived Python process, or for p in ``cli_procs`` one ``morello synth`` command
    per shape (run in sequence by a thread here). Returns ({shape: cost found}, errors)."""
    gate = path.parent / "go"
    found: dict[tuple, int] = {}
    errors: list[str] = []
    lock = threading.Lock()

    def cli_sequence(shapes):
        while not gate.exists():
            time.sleep(0.002)
        for s in shapes:
            r = run_outside(morello_cmd("synth", "matmul", *map(str, s), "-q", "--db",
                                           str(path)),
                               capture_output=True, text=True, timeout=timeout)
            with lock:
                if r.returncode != 0:
                    errors.append(f"morello synth {s} exited {r.returncode}: {r.stderr}")
                else:
                    found[tuple(s)] = int(r.stdout.split("cost=")[1].split()[0])

    procs, threads = [], []
    for p, shapes in enumerate(plan):
        if p in cli_procs:
            t = threading.Thread(target=cli_sequence, args=(shapes,))
            t.start()
            threads.append(t)
        else:
            procs.append(popen_outside(
                [sys.executable, "-c", LOOP_SCRIPT, str(path), str(gate),
                 json.dumps([list(s) for s in shapes])],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    time.sleep(0.5)  # let the interpreters import morello, then release them together
    gate.touch()
    try:
        for proc in procs:
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
                errors.append("a long-lived worker hung")
            if proc.returncode != 0:
                errors.append(f"worker exited {proc.returncode}:\n{err}")
            for line in out.splitlines():
                rec = json.loads(line)
                found[tuple(rec["shape"])] = rec["cost"]
        for t in threads:
            t.join(timeout)
            if t.is_alive():
                errors.append("a morello synth sequence hung")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        gate.unlink(missing_ok=True)
    return found, errors
