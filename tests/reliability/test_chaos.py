"""The chaos suite: applies against `sim serve` with faults injected, killed with -9 at
random moments, interrupted with Ctrl-C, run twice at once, outliving their token. Each
ends with live equal to desired, the state equal to live, and no duplicates."""

from __future__ import annotations

import random
import signal
import time

import pytest

from tests.helpers.reliability import (backends, convergence, interrupt_after_posts, journal_left,
                                       live_names, spawn, stored_state, wait_for_posts, write_fleet)

pytestmark = [pytest.mark.chaos, pytest.mark.http]


def faults(sim, **settings) -> None:
    sim.admin.put("/_sim/faults", json=settings).raise_for_status()


def test_a_hundred_workloads_converge_in_one_run_under_errors_and_commit_failures(ws, sim_server, figures):
    fig = figures("faults: apply, replace, delete", "20% 503/429 (Retry-After 1 s) + 10% commit-then-fail")
    start = time.monotonic()
    faults(sim_server, errorRate=0.2, commitFailRate=0.1, retryAfterSeconds=1)
    names = write_fleet(ws, 100)
    res = ws.apply()
    assert res.exit_code == 0, res.output
    assert convergence(ws, sim_server, names).ok, convergence(ws, sim_server, names)

    # A second run under the same faults: replace 20 (new image), delete 10, keep 70.
    kept = names[10:]
    specs = (ws.specs / "fleet.yaml").read_text().split("---\n")
    specs = specs[10:]
    specs[:20] = [d.replace("24.05-py3", "24.10-py3") for d in specs[:20]]
    (ws.specs / "fleet.yaml").write_text("---\n".join(specs))
    res = ws.apply()
    assert res.exit_code == 0, res.output
    assert "20 replaced, 10 deleted" in res.output
    conv = convergence(ws, sim_server, kept)
    assert conv.ok, conv
    faults(sim_server, errorRate=0.0, commitFailRate=0.0)
    assert ws.plan("--detailed-exitcode").exit_code == 0
    fig.runs, fig.workloads, fig.duplicates, fig.lost = 2, 100, conv.duplicates, conv.lost
    fig.seconds = time.monotonic() - start


# Trials 0 and 2 draw a late and an early moment of the apply to kill it at; trials 1 and
# 3 drew almost the same moments again, so each store is given those two.
@pytest.mark.parametrize(("ws", "trial"), [*(("file", t) for t in (0, 2)), *(
    pytest.param("postgres", t, marks=pytest.mark.postgres) for t in (0, 2))],
    indirect=["ws"])
def test_kill_9_at_a_random_moment_then_plan_and_apply_converge(ws, sim_server, figures, trial):
    rng = random.Random(1000 + trial)
    fig = figures("kill -9 mid-apply, then plan + apply", "kill -9 at a random moment; 60 ms latency")
    faults(sim_server, latencyMs=60, jitterMs=40)
    names = write_fleet(ws, 40)
    start = time.monotonic()
    proc = spawn(ws, "--parallelism", "4", "apply", str(ws.specs), "--auto-approve")
    # The CLI takes about a second to start; the apply itself about two more.
    time.sleep(rng.uniform(1.0, 3.0))
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    time.sleep(0.3)  # requests the dead process had sent still land (latency <= 100 ms)
    faults(sim_server, latencyMs=0, jitterMs=0)

    stored_state(ws)  # the state always parses
    created = live_names(sim_server)
    doc = ws.plan_json()
    proposed = {rc["address"].rsplit("/", 1)[1] for rc in doc["resource_changes"]
                if rc["change"]["actions"] == ["create"]}
    assert not proposed & set(created), "plan proposes creating workloads that exist"
    assert proposed == set(names) - set(created)

    res = ws.apply()
    assert res.exit_code == 0, res.output
    conv = convergence(ws, sim_server, names)
    assert conv.ok, conv
    assert not journal_left(ws)
    fig.runs, fig.workloads, fig.duplicates, fig.lost = 2, len(names), conv.duplicates, conv.lost
    fig.recoveries = res.stderr.count("created by an interrupted run")
    fig.notes.append(f"{len(created)} created before the kill")
    fig.seconds = time.monotonic() - start


def test_ctrl_c_finishes_what_is_in_flight_records_it_and_exits_130(ws, sim_server, figures):
    fig = figures("Ctrl-C mid-apply, then apply", "SIGINT after 3 creates; 150 ms latency")
    names = write_fleet(ws, 30)
    start = time.monotonic()
    interrupt_after_posts(ws, sim_server, 3,
                          "--parallelism", "2", "apply", str(ws.specs), "--auto-approve")
    created = live_names(sim_server)
    assert 3 <= len(created) < len(names)
    conv = convergence(ws, sim_server, sorted(created))
    assert conv.ok, conv  # every workload that exists is in the state, with its id
    assert not ws.state_path.with_name("state.json.journal").exists()

    res = ws.apply()
    assert res.exit_code == 0, res.output
    conv = convergence(ws, sim_server, names)
    assert conv.ok, conv
    fig.runs, fig.workloads, fig.duplicates, fig.lost = 2, len(names), conv.duplicates, conv.lost
    fig.seconds = time.monotonic() - start


@backends
def test_of_two_concurrent_applies_one_proceeds_and_the_other_names_the_holder(ws, sim_server, figures):
    fig = figures("two concurrent applies", "second apply while the first holds the lock")
    # 20 creates, 2 at a time, 400 ms each: the first apply would hold the lock ~4 s, long
    # enough for the second process to start and find it held even on a loaded machine.
    # The token comes at once; once the second has been refused, so does every answer,
    # and the first finishes without waiting out the rest.
    faults(sim_server, latencyMs=400, tokenFaults=False)
    names = write_fleet(ws, 20)
    start = time.monotonic()
    first = spawn(ws, "--parallelism", "2", "apply", str(ws.specs), "--auto-approve")
    wait_for_posts(sim_server, first, 1)
    second = spawn(ws, "apply", str(ws.specs), "--auto-approve")
    waiter = spawn(ws, "--lock-timeout", "60", "apply", str(ws.specs), "--auto-approve")
    out2, err2 = second.communicate(timeout=60)
    faults(sim_server, latencyMs=0)
    out1, err1 = first.communicate(timeout=60)
    out3, err3 = waiter.communicate(timeout=60)
    assert first.returncode == 0, err1
    assert second.returncode == 1
    assert "state is locked by" in err2 and "operation apply since" in err2
    assert f"pid {first.pid} " in err2 or f"pid {waiter.pid} " in err2  # the holder, by name
    assert waiter.returncode == 0, err3  # waited for the lock, then found nothing to do
    assert "created" not in err3
    conv = convergence(ws, sim_server, names)
    assert conv.ok, conv
    fig.runs, fig.workloads, fig.duplicates, fig.lost = 3, len(names), conv.duplicates, conv.lost
    fig.seconds = time.monotonic() - start


def test_an_apply_outlives_its_token(ws, sim_server, figures):
    fig = figures("token lifetime shorter than the apply", "1 s tokens; 100 ms latency")
    faults(sim_server, tokenTtl=1, latencyMs=100)
    names = write_fleet(ws, 40)
    start = time.monotonic()
    res = ws.cli("--parallelism", "4", "apply", str(ws.specs), "--auto-approve")
    elapsed = time.monotonic() - start
    assert res.exit_code == 0, res.output
    assert elapsed > 1.2  # longer than one token lives
    tokens = [r for r in sim_server.requests(api_only=False) if r["path"] == "/api/v1/token"]
    assert len(tokens) >= 2  # renewed during the run (ahead of expiry, or after a 401) ...
    unauthorized = [r for r in sim_server.requests() if r["status"] == 401]
    # ... one renewal at a time: requests refused together share it, no stampede
    assert len(tokens) <= 2 + elapsed / 0.5
    assert len(unauthorized) <= 4 * len(tokens)  # at most the requests in flight (parallelism 4)
    conv = convergence(ws, sim_server, names)
    assert conv.ok, conv
    fig.runs, fig.workloads, fig.duplicates, fig.lost = 1, len(names), conv.duplicates, conv.lost
    fig.notes.append(f"{len(tokens)} tokens, {len(unauthorized)} 401s over {elapsed:.1f} s")
    fig.seconds = elapsed
