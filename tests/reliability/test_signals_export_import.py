"""SIGINT and SIGTERM during `export` and `import` (the rules every command keeps on an
interrupt), through real processes against `sim serve`: exit 130 or 143, no
traceback, and nothing half-written: no spec file and no temporary file of one, the state
file as it was, no journal, no lock left behind. And an export interrupted while it writes
its files leaves none of them: each is written to a temporary file first, and the files
take their names only once every one is whole."""

from __future__ import annotations

import os
import signal

import pytest

from reconciler import errors
from reconciler.operations import specfiles
from tests.helpers.reliability import spawn, write_fleet
from tests.helpers.reliability import faults, journal, wait_until

pytestmark = [pytest.mark.chaos, pytest.mark.http]

SIGNALS = [(signal.SIGINT, 130), (signal.SIGTERM, 143)]


def _reads(sim, route: str) -> bool:
    return any(r["method"] == "GET" and route in r["path"] for r in sim.requests())


def _interrupt(ws, sim, signum, code, *args: str) -> None:
    """Run the CLI at 1.5 s per API request (the token at once), send `signum` once it
    reads workloads, and check it exits `code` saying so, with no traceback; latency back
    to 0."""
    faults(sim, latencyMs=1500, tokenFaults=False)
    sim.clear_requests()
    proc = spawn(ws, *args)
    wait_until(lambda: _reads(sim, "/api/v1/workloads"), proc)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=30)
    faults(sim, latencyMs=0, tokenFaults=True)
    assert proc.returncode == code, err
    assert "Interrupted." in err and "Traceback" not in err + out


def _files(folder) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


@pytest.mark.parametrize("signum, code", SIGNALS)
def test_a_signal_during_export_writes_no_file(ws, sim_server, signum, code):  # noqa: F811
    write_fleet(ws, 4)
    assert ws.apply().exit_code == 0
    out_dir = ws.root / "exported"
    _interrupt(ws, sim_server, signum, code, "export", "--out", str(out_dir))
    assert _files(out_dir) == []


@pytest.mark.parametrize("signum, code", SIGNALS)
@pytest.mark.parametrize("how", ["one", "all"])
def test_a_signal_during_import_leaves_the_state_as_it_was(ws, sim_server, signum, code, how):  # noqa: F811
    names = write_fleet(ws, 2)
    assert ws.apply().exit_code == 0
    [wid] = [w["id"] for w in sim_server.live() if w["name"] == names[0]]
    address = f"DistributedTraining/7/{names[0]}"
    assert ws.cli("state", "rm", address).exit_code == 0
    before = ws.state_path.read_bytes()
    files = _files(ws.state_path.parent)
    args = ["import", address, wid] if how == "one" else ["import", "--all", str(ws.specs)]
    _interrupt(ws, sim_server, signum, code, *args)
    assert ws.state_path.read_bytes() == before
    assert _files(ws.state_path.parent) == files  # no journal, lock or temporary file
    assert not journal(ws).exists()
    assert ws.cli("import", address, wid).exit_code == 0  # the lock was let go


def test_an_export_interrupted_while_writing_leaves_no_file(tmp_path, monkeypatch):
    """The interrupt arrives after two of three files are written out (forced here at
    that point: a real signal can hardly be timed so)."""
    files = {str(tmp_path / "out" / f"p/Training/t{i}.yaml"): f"name: t{i}\n" for i in range(3)}
    real = os.fdopen
    opened = []

    def fdopen(fd, *args, **kwargs):
        opened.append(fd)
        if len(opened) == 3:
            raise KeyboardInterrupt
        return real(fd, *args, **kwargs)

    monkeypatch.setattr(os, "fdopen", fdopen)
    with pytest.raises(KeyboardInterrupt):
        specfiles.write_all(files, force=False, mode=0o644)
    monkeypatch.undo()
    assert _files(tmp_path / "out") in ([], ["p", "p/Training"])
    specfiles.write_all(files, force=False, mode=0o644)  # nothing is taken: it writes
    assert [p.read_text() for p in sorted((tmp_path / "out").rglob("*.yaml"))] == [
        f"name: t{i}\n" for i in range(3)]
    with pytest.raises(errors.ReconcileError, match="exist already"):
        specfiles.write_all(files, force=False, mode=0o644)
