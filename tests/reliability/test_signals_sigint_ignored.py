"""SIGTERM when the process started with SIGINT ignored (a background job of a
non-interactive shell, many containers and CI runners start processes so), through real
processes against `sim serve`: the same clean interruption as with SIGINT at its
default, for plan, apply, export, import and watch: the same exit code and message, no
traceback, and nothing half-written (the state as it was, no journal, no spec file).

asyncio stops its coroutine on Ctrl-C only where SIGINT's handler is Python's own; with
SIGINT ignored, SIGTERM used to raise KeyboardInterrupt inside whatever task was
running, and asyncio printed "Task exception was never retrieved" and a traceback."""

from __future__ import annotations

import signal
import textwrap

import pytest

from tests.helpers.reliability import faults, journal, spawn, wait_until, write_fleet
from tests.helpers.watchproc import Watch

pytestmark = [pytest.mark.chaos, pytest.mark.http]

NOISE = ("Traceback", "Task exception was never retrieved", "KeyboardInterrupt")


def _files(folder) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


def _sigterm_once_reading(ws, sim, args, *, sigint_ignored):
    """(exit code, stdout, stderr) of the CLI sent SIGTERM once it reads workloads, at
    0.5 s per API request (the token at once)."""
    faults(sim, latencyMs=500, tokenFaults=False)
    sim.clear_requests()
    proc = spawn(ws, *args, sigint_ignored=sigint_ignored)
    wait_until(lambda: any(r["method"] == "GET" and "/api/v1/workloads" in r["path"]
                           for r in sim.requests()), proc)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    faults(sim, latencyMs=0, tokenFaults=True)
    return proc.returncode, out, err


COMMANDS = {
    "plan": lambda ws: ["plan", str(ws.specs)],
    "apply": lambda ws: ["apply", str(ws.specs), "--auto-approve"],
    "export": lambda ws: ["export", "--out", str(ws.root / "exported")],
    "import": lambda ws: ["import", "--all", str(ws.specs)],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_sigterm_with_sigint_ignored_is_the_same_clean_interruption(ws, sim_server, command):
    names = write_fleet(ws, 3)
    assert ws.apply().exit_code == 0
    write_fleet(ws, 3, image="nvcr.io/nvidia/pytorch:24.10-py3")  # something to apply
    if command == "import":
        assert ws.cli("state", "rm", f"DistributedTraining/7/{names[0]}").exit_code == 0
    before = ws.state_path.read_bytes()
    state_files = _files(ws.state_path.parent)
    seen = {}
    for ignored in (False, True):
        code, out, err = _sigterm_once_reading(ws, sim_server, COMMANDS[command](ws),
                                               sigint_ignored=ignored)
        assert not any(noise in out + err for noise in NOISE), err
        seen[ignored] = (code, err)
        assert ws.state_path.read_bytes() == before
        assert _files(ws.state_path.parent) == state_files  # no journal, lock, temporary
        assert _files(ws.root / "exported") == []
    assert seen[True] == seen[False]
    assert seen[True][0] == 143
    assert [r for r in sim_server.requests() if r["method"] not in ("GET",)] == []


def test_sigterm_to_watch_with_sigint_ignored_stops_it_as_with_sigint_default(ws, sim_server):
    write_fleet(ws, 2)
    codes = []
    for ignored in (False, True):
        faults(sim_server, latencyMs=500, tokenFaults=False)
        sim_server.clear_requests()
        shell = ("sh", "-c", 'trap "" INT; exec "$0" "$@"') if ignored else ()
        with Watch(ws, "--mode", "heal", "--interval", "30s", name=f"watch-{ignored}",
                   launcher=shell) as w:
            wait_until(lambda: any(r["method"] == "GET" for r in sim_server.requests()),
                       w.proc)
            codes.append(w.stop(signal.SIGTERM))
        faults(sim_server, latencyMs=0, tokenFaults=True)
        log = w.log_path.read_text()
        assert not any(noise in log for noise in NOISE), log
        assert [e["signal"] for e in w.events("stopping")] == ["SIGTERM"]
    assert codes == [0, 0]
    assert not journal(ws).exists()


# A signal can hardly be timed to land while a task of the event loop runs (rather than
# while the loop waits on the network); here the process sends it to itself from inside
# the task that reads one workload (one of the reads run side by side), the moment at
# which it broke.
SIGNAL_IN_A_TASK = textwrap.dedent("""
    import os, re, signal, sys
    from reconciler.api.client import RunaiClient
    from reconciler.cli import entry

    real = RunaiClient._send

    async def _send(self, method, path, **kwargs):
        if re.search(r"/workloads/.*[0-9a-f]{8}-", path) and not getattr(
                RunaiClient, "signalled", False):
            RunaiClient.signalled = True
            os.kill(os.getpid(), signal.SIGTERM)
        return await real(self, method, path, **kwargs)

    RunaiClient._send = _send
    sys.argv[0] = "runai-reconcile"
    entry()
""")


@pytest.mark.parametrize("command", COMMANDS)
def test_sigterm_inside_a_running_task_with_sigint_ignored_prints_no_traceback(
        ws, sim_server, command):
    names = write_fleet(ws, 3)
    assert ws.apply().exit_code == 0
    write_fleet(ws, 3, image="nvcr.io/nvidia/pytorch:24.10-py3")
    if command == "import":
        assert ws.cli("state", "rm", f"DistributedTraining/7/{names[0]}").exit_code == 0
    before = ws.state_path.read_bytes()
    state_files = _files(ws.state_path.parent)
    sim_server.clear_requests()
    proc = spawn(ws, *COMMANDS[command](ws), sigint_ignored=True,
                 python=("-c", SIGNAL_IN_A_TASK))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert not any(noise in out + err for noise in NOISE), err
    expected = ("Interrupted before any action started: nothing was applied."
                if command == "apply" else "Interrupted.")
    assert err.strip().splitlines()[-1] == expected, err
    assert ws.state_path.read_bytes() == before
    assert _files(ws.state_path.parent) == state_files
    assert _files(ws.root / "exported") == []
    assert [r for r in sim_server.requests() if r["method"] != "GET"] == []
