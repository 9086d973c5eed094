"""`watch` keeps its spec cache in memory between cycles: after a file changes, the next
cycle parses that file alone, and a cycle with nothing changed parses none. Seen as a
user sees it, in the watch's own `specs` log line (`parsed`)."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import specgen  # noqa: E402

N = 30

pytestmark = pytest.mark.timeout(120)


def _events(log: pathlib.Path, event: str) -> list[dict]:
    out = []
    for line in log.read_text().splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if doc.get("event") == event:
            out.append(doc)
    return out


def _wait(proc, log, event, count, timeout=60.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = _events(log, event)
        if len(got) >= count:
            return got
        assert proc.poll() is None, log.read_text()[-2000:]
        time.sleep(0.05)
    raise AssertionError(f"no {count} {event!r} events in {timeout} s: {log.read_text()[-2000:]}")


def test_a_second_cycle_parses_only_the_file_that_changed(tmp_path):
    specs = tmp_path / "specs"
    specgen.write_specs(specs, N)
    log = tmp_path / "watch.log"
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "xdg"), NO_COLOR="1")
    env.pop("RUNAI_RECONCILE_SPEC_CACHE", None)
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "reconciler.cli", "--sim", "--state",
             str(tmp_path / "state.json"), "watch", str(specs), "--log-format", "json",
             "--listen", "off", "--interval", "300ms"],
            cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=err)
    try:
        first = _wait(proc, log, "specs", 1)
        assert first[0]["loaded"] == N and first[0]["parsed"] == N
        cycles = len(_wait(proc, log, "cycle", 2))  # a cycle with nothing changed
        assert len(_events(log, "specs")) == 1
        changed = sorted(specs.rglob("*.yaml"))[5]
        changed.write_text(changed.read_text() + "# edited\n")
        second = _wait(proc, log, "specs", 2)
        assert second[1]["loaded"] == N and second[1]["parsed"] == 1
        _wait(proc, log, "cycle", cycles + 3)
        assert len(_events(log, "specs")) == 2  # nothing read again since
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    assert proc.returncode == 0, log.read_text()[-2000:]
