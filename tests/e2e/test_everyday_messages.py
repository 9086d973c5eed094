"""The small things a user hits, through the CLI (in this process, and as a subprocess where
the process shows them: stderr on a terminal, a port in use, a refused connection's timing,
the spec loaders' child processes): the
wait for --lock-timeout, -v's request log, a refused connection, `sim serve` on a port
in use, validate's last line, `state list` without a state, and the progress line on a
terminal (a pty) and nowhere else."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
import time

import pytest

from reconciler.state import LocalFileStore
from tests.helpers.simserve import free_port

from tests.helpers.constants import CLIENT_SECRET, CLUSTER
from tests.helpers.cli import PROGRESS, env_of, invoke, run, run_on_a_terminal

pytestmark = pytest.mark.http


def cli(ws, *args: str, **extra: str):
    """The CLI on the workspace in this process (`invoke`: its stderr holds the warnings and
    -v's log, as a process's does)."""
    return invoke(ws.root, "--state", str(ws.state_path), *args, **{**ws.env, **extra})


def fleet(ws, n: int) -> None:
    (ws.specs / "fleet.yaml").write_text("---\n".join(
        f"kind: DistributedTraining\nname: job-{i:03d}\nprojectId: \"7\"\nclusterId: {CLUSTER}\n"
        "spec:\n  image: nvcr.io/nvidia/pytorch:24.05-py3\n  distributedFramework: PyTorch\n"
        "  numWorkers: 2\n" for i in range(n)))


def error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("Error:")]


# --- --lock-timeout -----------------------------------------------------------------

def test_a_wait_for_the_lock_says_once_for_whom_and_then_either_proceeds_or_names_the_holder(ws):
    fleet(ws, 2)
    held = LocalFileStore(ws.state_path).lock("state rm")
    info = held.__enter__()
    # In this process (a flock taken on another open file conflicts as another process's
    # would): the wait starts a few tenths of a second after the call, not a second or two.
    state = ("--state", str(ws.state_path))
    refused = invoke(ws.root, *state, "--lock-timeout", "0.5", "apply", str(ws.specs),
                     "--auto-approve", **ws.env)
    # Let go 1.5 s from now, while the next apply waits for it.
    timer = threading.Timer(1.5, lambda: held.__exit__(None, None, None))
    timer.start()
    waited = invoke(ws.root, *state, "--lock-timeout", "30", "apply", str(ws.specs),
                    "--auto-approve", **ws.env)
    timer.join()
    for res, timeout in ((refused, "0.5"), (waited, "30")):
        said = [line for line in res.stderr.splitlines() if "waiting up to" in line]
        assert said == [f"WARNING: state {ws.state_path}.lock is locked by {info.who} (operation "
                        f"state rm since {info.created}); waiting up to {timeout} s for it "
                        "(--lock-timeout)"], res.stderr
    assert refused.returncode == 1
    [line] = error_lines(refused.stderr)
    assert line.startswith(f"Error: state is locked by {info.who} (operation state rm since ")
    assert waited.returncode == 0, waited.stderr
    assert "job-001: created" in waited.stderr


# --- -v -----------------------------------------------------------------------------

def test_verbose_logs_every_request_over_http_without_token_or_secret(ws, sim_server):
    fleet(ws, 2)
    quiet = cli(ws, "apply", str(ws.specs), "--auto-approve")
    assert quiet.returncode == 0 and " -> 20" not in quiet.stderr  # without -v: no request log
    sim_server.clear_requests()
    res = cli(ws, "-v", "plan", str(ws.specs), "--refresh=full")
    assert res.returncode == 0, res.stderr
    logged = [m.groups() for m in re.finditer(r"^INFO: (\w+) (\S+) -> (\d+) in \d+ ms$",
                                              res.stderr, re.M)]
    served = [(r["method"], r["path"], str(r["status"]))
              for r in sim_server.requests(api_only=False)]
    assert sorted((m, p.split("?")[0], s) for m, p, s in logged) == sorted(served)
    assert ("POST", "/api/v1/token", "200") in served and len(served) == 4  # token, 2 GETs, a project quota
    assert CLIENT_SECRET not in res.stderr and "Bearer" not in res.stderr
    assert sim_server.token()[:20] not in res.stderr
    assert "HTTP Request:" not in res.stderr  # httpx's own line would say each one twice


# --- a refused connection, a port out of range ----------------------------------------

def test_a_refused_connection_is_said_in_words_within_seconds(ws):
    fleet(ws, 2)
    port = free_port()  # nothing listens there
    start = time.monotonic()
    res = run(ws, "plan", str(ws.specs), RUNAI_URL=f"http://127.0.0.1:{port}")
    took = time.monotonic() - start
    assert res.returncode == 1 and "Traceback" not in res.stderr
    [line] = error_lines(res.stderr)
    assert f"cannot connect to 127.0.0.1:{port}: connection refused (nothing listens there" in line
    assert "gave up after 3 attempts" in line
    assert "retrying for up to" not in res.stderr
    assert took < 10  # the retry budget (60 s) would take about 30 s on average


def test_a_port_out_of_range_is_one_error_line(ws):
    fleet(ws, 1)
    res = cli(ws, "plan", str(ws.specs), RUNAI_URL="http://127.0.0.1:99999")
    assert res.returncode == 1
    assert error_lines(res.stderr) == [
        "Error: the Run:ai URL 'http://127.0.0.1:99999' is malformed: Port out of range 0-65535"]


# --- sim serve ----------------------------------------------------------------------

def test_sim_serve_on_a_port_in_use_says_so_in_one_line_and_exits_1(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = subprocess.run([sys.executable, "-m", "reconciler.cli", "sim", "serve", "--port",
                              str(port)], capture_output=True, text=True, timeout=60,
                             cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert res.returncode == 1
    assert res.stderr.splitlines() == [f"Error: port {port} on 127.0.0.1 is in use (another "
                                       "`sim serve`?): pick another with --port"]
    assert res.stdout == ""


# --- validate -----------------------------------------------------------------------

@pytest.mark.parametrize("good", [2, 120])  # 120: the big folder's loaders in child processes
def test_validate_with_a_bad_spec_says_how_many_are_valid_and_claims_no_write(ws, good):
    for i in range(good):
        (ws.specs / f"ok-{i:03d}.yaml").write_text(
            f"kind: Training\nname: ok-{i:03d}\nprojectId: \"7\"\nclusterId: {CLUSTER}\n"
            "spec:\n  image: busybox\n")
    (ws.specs / "bad.yaml").write_text(
        f"kind: Training\nname: bad\nprojectId: \"7\"\nclusterId: {CLUSTER}\n"
        "spec:\n  image: busybox\n  imagePullPolcy: Always\n")
    res = run(ws, "validate", str(ws.specs))
    assert res.returncode == 1
    assert res.stderr.splitlines()[-1] == f"Error: 1 problem in the specs; {good} specs valid."
    assert "written" not in res.stderr
    planned = run(ws, "--sim", "plan", str(ws.specs))  # plan does guard the API and the state
    assert planned.stderr.splitlines()[-1] == ("Error: 1 problem in the specs; nothing was "
                                               "written to the API and the state was not touched.")


# --- state list ---------------------------------------------------------------------

def test_state_list_without_a_state_says_there_is_none_and_exits_0(ws):
    res = cli(ws, "state", "list")
    assert (res.returncode, res.stdout) == (0, "")
    assert res.stderr == f"No state at {ws.state_path}: nothing has been applied with it yet.\n"
    assert not ws.state_path.exists()


def test_state_list_of_a_state_emptied_by_state_rm_says_so(ws):
    fleet(ws, 1)
    assert cli(ws, "apply", str(ws.specs), "--auto-approve").returncode == 0
    assert cli(ws, "state", "rm", "DistributedTraining/7/job-000").returncode == 0
    res = cli(ws, "state", "list")
    assert (res.returncode, res.stdout) == (0, "")
    assert res.stderr == f"The state at {ws.state_path} tracks no workloads.\n"


# --- the progress line --------------------------------------------------------------


def test_a_long_refresh_and_apply_show_a_progress_line_on_a_terminal_only(ws, sim_server):
    fleet(ws, 12)
    # 150 ms a request, 2 at a time: 12 creates, then 12 reads, take about a second each.
    sim_server.admin.put("/_sim/faults", json={"latencyMs": 150}).raise_for_status()
    slow = ("--parallelism", "2")
    code, out, terminal = run_on_a_terminal(ws, *slow, "apply", str(ws.specs), "--auto-approve")
    assert code == 0, terminal
    applying = [m.groups() for m in PROGRESS.finditer(terminal) if m[1] == "Applying"]
    assert applying and all(total == "12" and failed == "0" for _, _, total, _, failed in applying)
    done = [int(d) for _, d, _, _, _ in applying]
    assert done == sorted(done) and done[-1] <= 12
    assert len(applying) <= 4 * float(applying[-1][3]) + 1  # at most 4 redraws a second
    # Each event line starts on a line of its own: the progress line is erased before it.
    before = re.findall(r"(.{0,3})DistributedTraining/7/job-\d+: created", terminal, re.S)
    assert len(before) == 12 and all(b == "" or b.endswith(("\n", "\x1b[K"))
                                     for b in before), before
    assert "job-011: created" in terminal and "Apply complete!" in out

    # --refresh=full: one GET per workload (auto would list them, and read none).
    code, out, terminal = run_on_a_terminal(ws, *slow, "plan", str(ws.specs), "--refresh=full")
    assert code == 0 and "No changes" in out
    refreshing = [m.groups() for m in PROGRESS.finditer(terminal)]
    assert refreshing and {g[0] for g in refreshing} == {"Refreshing"}
    assert all(total == "12" for _, _, total, _, _ in refreshing)
    assert terminal.endswith("\r\x1b[K")  # erased once the refresh is over
    assert "\x1b" not in out

    # stderr not a terminal (here, click's runner in this process): not a trace of it.
    piped = invoke(ws.root, "--state", str(ws.state_path), *slow, "plan", str(ws.specs),
                   "--refresh=full", **ws.env)
    assert piped.returncode == 0
    assert "Refreshing" not in piped.stderr and "\x1b" not in piped.stderr + piped.stdout


def test_an_apply_s_plan_comes_before_its_lines_when_both_streams_go_to_one_log(ws, sim_server):
    # A CI log: stdout and stderr one pipe. The plan (long to write: 100 variables a
    # workload) is written while the creates start (one at a time: the first is answered
    # well before the plan is written), yet every line of it comes before the
    # first "created", and the summary comes last.
    env = "".join(f"    - name: VAR_{v}\n      value: v{v}\n" for v in range(100))
    (ws.specs / "fleet.yaml").write_text("---\n".join(
        f"kind: Training\nname: job-{i:03d}\nprojectId: \"7\"\nclusterId: {CLUSTER}\n"
        f"spec:\n  image: nvcr.io/nvidia/pytorch:24.05-py3\n  environmentVariables:\n{env}"
        for i in range(200)))
    merged = subprocess.run([sys.executable, "-m", "reconciler.cli", "--state",
                             str(ws.state_path), "--parallelism", "1", "apply",
                             str(ws.specs), "--auto-approve"],
                            env={**env_of(ws), "NO_COLOR": "1"}, cwd=ws.root, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, timeout=120)
    assert merged.returncode == 0, merged.stdout
    lines = merged.stdout.splitlines()
    created = [i for i, line in enumerate(lines) if line.endswith(": created")]
    plan_end = next(i for i, line in enumerate(lines) if line.startswith("Plan: 200 to create,"))
    planned = [i for i, line in enumerate(lines) if line.endswith(" will be created")]
    assert len(created) == 200 and len(planned) == 200
    assert max(planned) < plan_end < min(created)
    assert lines[-1].startswith("Apply complete! Resources: 200 created")


def test_an_apply_s_plan_is_written_once_its_first_action_ended_or_it_ends():
    # The plan written beside the actions waits until the first of them has ended (so
    # that the first requests go out without the renderer), then comes before the lines
    # said meanwhile; an apply that says nothing until it ends (every action failed, or
    # took longer than the wait) still has its plan written, first.
    from reconciler import cli as cli_module

    for first in ("a: created", None):
        out: list[str] = []
        beside = cli_module._ShownBeside(out.append)
        beside.FIRST_WAVE_S = 60.0
        beside.start(lambda: out.append("the plan"))
        time.sleep(0.2)
        assert out == []
        if first is not None:
            beside.say(first)
        beside.join()
        assert out == ["the plan"] + ([first] if first else [])
        beside.say("Apply complete!")
        assert out[-1] == "Apply complete!"

    # Without any line, the plan is written after FIRST_WAVE_S all the same.
    out = []
    beside = cli_module._ShownBeside(out.append)
    beside.FIRST_WAVE_S = 0.05
    beside.start(lambda: out.append("the plan"))
    deadline = time.monotonic() + 10
    while not out and time.monotonic() < deadline:
        time.sleep(0.01)
    assert out == ["the plan"]
    beside.join()
