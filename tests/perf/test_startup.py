"""A plan's start-up against `sim serve`: the token is asked for while the state is read
(not after it), and `RUNAI_RECONCILE_TIMELINE` writes each phase's start and end to
stderr, which `benchmarks/bench.py` reads (docs/performance.md)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import cli

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import specgen  # noqa: E402

pytestmark = pytest.mark.http

PHASES = ("import end", "specs start", "specs end", "state start", "state end",
          "first request", "last answer", "plan start", "plan end", "render start",
          "render end")


def _token_asked(sim_server) -> bool:
    return any(r["path"] == "/api/v1/token" for r in sim_server.requests(api_only=False))


def test_the_token_is_asked_for_while_the_state_is_read(ws, sim_server):
    """The state comes through a pipe that stays empty until the token request reached
    the simulator: a plan that reads the state before it sends anything waits for ever."""
    specgen.write_specs(ws.specs, 3)
    assert ws.apply().exit_code == 0
    state = ws.state_path.read_bytes()
    ws.state_path.unlink()
    os.mkfifo(ws.state_path)
    sim_server.clear_requests()
    proc = subprocess.Popen([sys.executable, "-m", "reconciler.cli", "--state",
                             str(ws.state_path), "plan", str(ws.specs), "--detailed-exitcode"],
                            env=cli.env_of(ws), cwd=ws.root, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not _token_asked(sim_server) and proc.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        asked = _token_asked(sim_server)
        with open(ws.state_path, "wb") as pipe:  # the read ends either way
            pipe.write(state)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert asked, f"no token request while the state was being read; stderr: {err}"
    assert proc.returncode == 0, err  # no changes: the state came whole through the pipe
    assert "No changes" in out, out


def _timeline(stderr: str) -> dict[str, float]:
    return {m[1]: float(m[2]) for m in re.finditer(r"^timeline: (.+) (\d+\.\d+)$", stderr,
                                                    re.MULTILINE)}


def test_the_timeline_gives_each_phase_in_order_and_only_when_asked(ws, sim_server):
    specgen.write_specs(ws.specs, 3)

    asked = cli.run(ws, "plan", str(ws.specs), RUNAI_RECONCILE_TIMELINE="1")
    assert asked.returncode == 0, asked.stderr
    times = _timeline(asked.stderr)
    assert sorted(times) == sorted(PHASES), asked.stderr
    assert 0 < times["import end"] <= times["specs start"] <= times["specs end"]
    assert times["state start"] <= times["state end"]
    assert times["first request"] <= times["last answer"]
    assert times["specs end"] <= times["plan start"] <= times["plan end"]
    assert times["plan end"] <= times["render start"] <= times["render end"]
    assert "Plan: 3 to create" in asked.stdout  # the plan itself, on stdout as always

    quiet = cli.run(ws, "plan", str(ws.specs))
    assert quiet.returncode == 0, quiet.stderr
    assert "timeline" not in quiet.stderr
