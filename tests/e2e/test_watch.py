"""`runai-reconcile watch` end to end: the CLI as a subprocess against `sim serve` over
HTTP: heal undoes drift and leaves spec changes to apply, report never writes,
sync applies and does not prune without --prune, one controller per state, SIGTERM."""

from __future__ import annotations

import signal
import textwrap
import time

import pytest

from tests.helpers.constants import CLUSTER
from tests.helpers.watchproc import Watch, detail, inference, wait_until

pytestmark = pytest.mark.http

INTERVAL = 0.25  # seconds between cycles in these tests
# A cycle here takes tens of milliseconds; this is what a loaded CI machine may add.
SLACK_S = 2.0


TRAINING = f"""
kind: DistributedTraining
name: bert-ddp
projectId: "7"
clusterId: {CLUSTER}
spec:
  image: nvcr.io/nvidia/pytorch:24.05-py3
  distributedFramework: PyTorch
  numWorkers: 2
  compute:
    gpuDevicesRequest: 1
masterSpecSameAsWorker: true
"""


def applied(ws, sim_server) -> dict[str, dict]:
    ws.write("serve.yaml", inference("llama-serve"))
    ws.write("other.yaml", inference("qwen-serve"))
    ws.write("train.yaml", TRAINING)
    res = ws.apply()
    assert res.exit_code == 0, res.output
    return {w["name"]: w for w in sim_server.live()}


def phases_moved_on(sim_server) -> None:
    """Each workload's phase moves on to Running through /_sim, as the simulator's clock
    would move it a second later: its list entry moves (`updatedAt`), as then."""
    for w in sim_server.live():
        assert sim_server.admin.post(f"/_sim/workloads/{w['id']}/phase",
                                     json={"phase": "Running"}).status_code == 200


def by_name(sim_server) -> dict[str, dict]:
    return {w["name"]: w for w in sim_server.live()}


def drift_all(sim_server, live: dict[str, dict]) -> None:
    """An out-of-band PATCH, suspend and deletion, one workload each."""
    serve, train, other = live["llama-serve"]["id"], live["bert-ddp"]["id"], live["qwen-serve"]["id"]
    assert sim_server.admin.patch(f"/_sim/workloads/{serve}",
                                  json={"spec": {"replicas": 5}}).status_code == 200
    assert sim_server.api("POST", f"/api/v1/workloads/distributed/{train}/suspend").status_code == 202
    assert sim_server.api("DELETE", f"/api/v1/workloads/distributed-inferences/{other}"
                          ).status_code in (200, 202)


def healed(sim_server, serve_id: str) -> bool:
    live = by_name(sim_server)
    if "qwen-serve" not in live or "bert-ddp" not in live:
        return False
    train = detail(sim_server, "distributed", live["bert-ddp"]["id"])
    replicas = detail(sim_server, "distributed-inferences", serve_id)["spec"]["replicas"]
    return replicas == 2 and train.get("desiredPhase") == "Running"


def test_heal_mode_undoes_patch_suspend_and_delete_within_two_intervals(ws, sim_server):
    live = applied(ws, sim_server)
    with Watch(ws, "--mode", "heal", "--interval", f"{INTERVAL}s") as w:
        w.wait_cycles(1)
        drift_all(sim_server, live)
        t0 = time.monotonic()
        wait_until(lambda: healed(sim_server, live["llama-serve"]["id"]),
                   2 * INTERVAL + SLACK_S, "the drift healed")
        took = time.monotonic() - t0
        w.wait_cycles(2)
        assert w.stop() == 0
    assert took <= 2 * INTERVAL + SLACK_S
    healed_counts = sum(c.get("healed", 0) for c in w.cycles())
    assert healed_counts == 3, w.cycles()
    # The re-created workload is the state's now, and the next plan has nothing to do.
    assert ws.plan("--detailed-exitcode").exit_code == 0


def test_heal_mode_reports_a_spec_change_out_of_sync_and_does_not_apply_it(ws, sim_server):
    live = applied(ws, sim_server)
    with Watch(ws, "--mode", "heal", "--interval", f"{INTERVAL}s") as w:
        w.wait_cycles(1)
        sim_server.clear_requests()
        ws.write("serve.yaml", inference("llama-serve", replicas=4))
        got = w.wait_for(lambda: [e for e in w.events("workload")
                                  if e["address"] == "DistributedInference/7/llama-serve"
                                  and e["sync"] == "OutOfSync"], 10, "OutOfSync")
        w.wait_cycles(3)
        assert w.stop() == 0
    assert "spec_changed" in got[0]["reason"]
    assert sim_server.writes() == []
    assert detail(sim_server, "distributed-inferences",
                  live["llama-serve"]["id"])["spec"]["replicas"] == 2


def test_report_mode_makes_no_write(ws, sim_server):
    live = applied(ws, sim_server)
    drift_all(sim_server, live)
    sim_server.clear_requests()
    with Watch(ws, "--interval", f"{INTERVAL}s") as w:
        cycles = w.wait_cycles(4)
        assert w.stop() == 0
    assert all(c["result"] == "ok" for c in cycles), cycles
    assert max(c["drift"] for c in cycles) == 3
    assert [r for r in sim_server.requests() if r["method"] != "GET"] == []
    drifted = {e["address"] for e in w.events("workload")}
    assert sim_server.writes() == [] and not drifted - {
        "DistributedInference/7/llama-serve", "DistributedInference/7/qwen-serve",
        "DistributedTraining/7/bert-ddp"}


def test_sync_mode_applies_a_spec_change_and_does_not_prune_without_prune(ws, sim_server):
    live = applied(ws, sim_server)
    with Watch(ws, "--mode", "sync", "--interval", f"{INTERVAL}s") as w:
        w.wait_cycles(1)
        ws.write("serve.yaml", inference("llama-serve", replicas=4))
        (ws.specs / "other.yaml").unlink()
        wait_until(lambda: detail(sim_server, "distributed-inferences",
                                  live["llama-serve"]["id"])["spec"]["replicas"] == 4,
                   2 * INTERVAL + SLACK_S, "the spec change applied")
        w.wait_cycles(2)
        assert w.stop() == 0
    assert "qwen-serve" in by_name(sim_server)  # not pruned
    assert not [r for r in sim_server.writes() if r["method"] == "DELETE"]
    skipped = [e for e in w.events("workload") if e["address"].endswith("qwen-serve")]
    assert skipped and skipped[-1]["sync"] == "OutOfSync"


def test_sync_mode_with_prune_deletes_what_no_spec_names(ws, sim_server):
    applied(ws, sim_server)
    (ws.specs / "other.yaml").unlink()
    with Watch(ws, "--mode", "sync", "--prune", "--interval", f"{INTERVAL}s") as w:
        w.wait_for(lambda: w.events("start"), 30, "the start")  # the interpreter's start-up
        wait_until(lambda: "qwen-serve" not in by_name(sim_server), 2 * INTERVAL + SLACK_S,
                   "the deletion")
        assert w.stop() == 0


def test_max_actions_caps_a_cycle(ws, sim_server):
    live = applied(ws, sim_server)
    drift_all(sim_server, live)
    with Watch(ws, "--mode", "heal", "--max-actions", "1", "--interval", f"{INTERVAL}s") as w:
        first = w.wait_cycles(1)[0]
        w.wait_for(lambda: sum(c.get("healed", 0) for c in w.cycles()) >= 3, 10, "3 healed")
        assert w.stop() == 0
    assert sum(n for k, n in first["actions"].items() if k.endswith("/ok")) == 1
    assert sum(n for k, n in first["actions"].items() if k.endswith("/deferred")) == 2
    assert first["deferred"] == 2


def test_a_deny_rule_skips_the_action_and_says_so(ws, sim_server):
    live = applied(ws, sim_server)
    policy = ws.root / "policy.yaml"
    policy.write_text("rules:\n  - name: small\n    maxGpusPerWorkload: 1\n")
    serve = live["llama-serve"]["id"]
    sim_server.admin.patch(f"/_sim/workloads/{serve}", json={"spec": {"replicas": 5}})
    sim_server.clear_requests()
    with Watch(ws, "--mode", "heal", "--policy", str(policy), "--interval",
               f"{INTERVAL}s") as w:
        denied = w.wait_for(lambda: w.events("denied"), 10, "a denial")
        w.wait_cycles(2)
        assert w.stop() == 0
    assert denied[0]["address"] == "DistributedInference/7/llama-serve"
    assert "small" in denied[0]["reason"]
    assert sim_server.writes() == []


def test_two_watches_on_one_state_file_one_acts_and_the_other_takes_over(ws, sim_server):
    live = applied(ws, sim_server)
    args = ("--mode", "heal", "--interval", f"{INTERVAL}s")
    with Watch(ws, *args, name="a") as a, Watch(ws, *args, name="b") as b:
        a.wait_cycles(2), b.wait_cycles(2)
        roles = {"a": a.events("role")[-1]["role"], "b": b.events("role")[-1]["role"]
                 if b.events("role") else "standby"}
        assert sorted(roles.values()) == ["active", "standby"], roles
        active, standby = (a, b) if roles["a"] == "active" else (b, a)
        assert all(c["result"] == "standby" for c in standby.cycles())
        active.kill()  # kill -9
        serve = live["llama-serve"]["id"]
        sim_server.admin.patch(f"/_sim/workloads/{serve}", json={"spec": {"replicas": 5}})
        wait_until(lambda: detail(sim_server, "distributed-inferences", serve)["spec"]
                   ["replicas"] == 2, 3 * INTERVAL + SLACK_S, "the standby healed")
        assert standby.events("role")[-1]["role"] == "active"
        assert standby.stop() == 0


def test_sigterm_mid_heal_finishes_the_action_exits_0_and_duplicates_nothing(ws, sim_server):
    live = applied(ws, sim_server)
    other = live["qwen-serve"]["id"]
    sim_server.api("DELETE", f"/api/v1/workloads/distributed-inferences/{other}")
    wait_until(lambda: "qwen-serve" not in by_name(sim_server), 5, "the deletion")
    sim_server.clear_requests()
    sim_server.admin.put("/_sim/faults", json={"latencyMs": 1500, "tokenFaults": False})
    with Watch(ws, "--mode", "heal", "--interval", "30s") as w:
        wait_until(lambda: [r for r in sim_server.requests() if r["method"] == "POST"], 30,
                   "the create sent")
        code = w.stop(signal.SIGTERM)
    sim_server.admin.delete("/_sim/faults")
    assert code == 0, w.log_path.read_text()
    posts = [r for r in sim_server.requests() if r["method"] == "POST"]
    assert len(posts) == 1
    assert sum(1 for x in sim_server.live() if x["name"] == "qwen-serve") == 1
    journal = ws.state_path.with_name(ws.state_path.name + ".journal")
    assert not journal.exists() or journal.read_text().strip() == ""
    state = ws.state()
    assert state["resources"]["DistributedInference/7/qwen-serve"]["workload_id"] == \
        by_name(sim_server)["qwen-serve"]["id"]
    stopping = w.events("stopping")
    assert stopping and stopping[0]["signal"] == "SIGTERM"


@pytest.fixture
def pg_state():
    """A fresh state name in the PostgreSQL of $RUNAI_RECONCILE_TEST_PG, as a --state URL."""
    import os
    import uuid

    from tests.helpers.postgres import PG_ENV, missing

    url = os.environ.get(PG_ENV)
    if not url:
        missing(f'{PG_ENV} is not set: start a server with eval "$(.ci/postgres.sh start)"')
    return url, f"watch-{uuid.uuid4().hex[:10]}"


@pytest.mark.postgres
def test_two_watches_on_one_postgres_state_exactly_one_writes_and_the_other_takes_over(
        ws, sim_server, pg_state):
    url, name = pg_state
    ws.state_path = url  # the workspace's CLI and the watches share the PostgreSQL state
    ws.write("serve.yaml", inference("llama-serve"))
    ws.write("train.yaml", TRAINING)
    res = ws.cli("--state-name", name, "apply", str(ws.specs), "--auto-approve")
    assert res.exit_code == 0, res.output
    from reconciler.state import open_store

    def delete_serve() -> str:
        """Delete llama-serve out of band; its id (the heal re-creates it under another)."""
        wid = by_name(sim_server)["llama-serve"]["id"]
        assert sim_server.api("DELETE", f"/api/v1/workloads/distributed-inferences/{wid}"
                              ).status_code in (200, 202)
        return wid

    def recreated(old: str) -> bool:
        live = by_name(sim_server).get("llama-serve")
        return live is not None and live["id"] != old

    serial = max(v.serial for v in open_store(url, name=name).history())
    args = ("--mode", "heal", "--interval", f"{INTERVAL}s")
    with Watch(ws, *args, state=url, name="a", state_name=name) as a, \
            Watch(ws, *args, state=url, name="b", state_name=name) as b:
        a.wait_cycles(2), b.wait_cycles(2)
        roles = {w: w.events("role")[-1]["role"] for w in (a, b)}
        assert sorted(roles.values()) == ["active", "standby"], roles
        active = a if roles[a] == "active" else b
        standby = b if active is a else a
        old = delete_serve()
        wait_until(lambda: recreated(old), 2 * INTERVAL + SLACK_S, "the holder healed")
        wait_until(lambda: writers(url, name, since=serial), 10, "the heal recorded")
        standby.wait_cycles(1)
        assert active.events("action") and not standby.events("action")
        assert all(c["result"] == "standby" for c in standby.cycles())
        first_writers = writers(url, name, since=serial)
        serial = max(v.serial for v in open_store(url, name=name).history())
        active.kill()  # kill -9: its database sessions end, and the lock with them
        old = delete_serve()
        t0 = time.monotonic()
        wait_until(lambda: recreated(old), 2 * INTERVAL + SLACK_S,
                   "the standby took over and healed")
        assert time.monotonic() - t0 <= 2 * INTERVAL + SLACK_S
        wait_until(lambda: writers(url, name, since=serial), 10, "the heal recorded")
        assert standby.events("role")[-1]["role"] == "active"
        assert standby.stop() == 0
    # Exactly one process wrote the state at a time: the active one, then the one that took
    # over (each version records its writer's pid).
    assert first_writers == {active.proc.pid}
    assert writers(url, name, since=serial) == {standby.proc.pid}


def writers(url: str, name: str, *, since: int) -> set[int]:
    """The pids that wrote the versions of state `name` after serial `since`."""
    import re

    from reconciler.state import open_store

    found = set()
    for v in open_store(url, name=name).history():
        if v.serial > since:
            m = re.search(r"pid (\d+)", v.written_by or "")
            assert m, v
            found.add(int(m.group(1)))
    return found


def test_an_api_outage_backs_off_and_recovers(ws, sim_server):
    applied(ws, sim_server)
    sim_server.admin.put("/_sim/faults", json={"errorRate": 1.0, "tokenFaults": False})
    with Watch(ws, "--interval", "200ms", extra_args=("--timeout", "0.5")) as w:
        failed = w.wait_for(lambda: len([c for c in w.cycles() if c["result"] == "failed"]) >= 3
                            and [c for c in w.cycles() if c["result"] == "failed"], 30,
                            "3 failed cycles")
        sim_server.admin.delete("/_sim/faults")
        w.wait_for(lambda: w.cycles()[-1]["result"] == "ok", 30, "a good cycle again")
        assert w.stop() == 0
    waits = [c["next_in_s"] for c in failed[:3]]
    assert waits == sorted(waits) and waits[2] >= 4 * waits[0] * 0.99, waits  # doubling
    assert "500" in failed[0]["error"] or "gave up" in failed[0]["error"], failed[0]


def test_pull_fast_forwards_the_specs_and_records_the_commit(ws, sim_server, tmp_path):
    import subprocess

    def git(*args, cwd):
        return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                              text=True).stdout.strip()

    origin, author = tmp_path / "origin.git", tmp_path / "author"
    git("init", "-q", "--bare", str(origin), cwd=tmp_path)
    git("clone", "-q", str(origin), str(author), cwd=tmp_path)
    for k, v in (("user.email", "a@example.com"), ("user.name", "a")):
        git("config", k, v, cwd=author)
    (author / "serve.yaml").write_text(textwrap.dedent(inference("llama-serve")))
    git("add", ".", cwd=author), git("commit", "-qm", "one", cwd=author)
    git("push", "-q", "origin", "HEAD", cwd=author)
    first = git("rev-parse", "HEAD", cwd=author)
    ws.specs.rmdir()
    git("clone", "-q", str(origin), str(ws.specs), cwd=tmp_path)
    with Watch(ws, "--pull", "--interval", f"{INTERVAL}s") as w:
        assert w.wait_cycles(1)[-1]["commit"] == first
        (author / "other.yaml").write_text(textwrap.dedent(inference("qwen-serve")))
        git("add", ".", cwd=author), git("commit", "-qm", "two", cwd=author)
        git("push", "-q", "origin", "HEAD", cwd=author)
        second = git("rev-parse", "HEAD", cwd=author)
        w.wait_for(lambda: w.cycles()[-1].get("commit") == second, 10, "the new commit")
        assert w.stop() == 0
    assert (ws.specs / "other.yaml").exists()


def test_health_of_workloads_the_list_vouches_for_comes_from_their_listed_phase(ws, sim_server):
    """With the list-first refresh a cycle GETs nothing of an unchanged fleet: the health
    the status answer gives is still each workload's listed phase, never Missing."""
    import httpx

    from tests.helpers.simserve import free_port

    applied(ws, sim_server)
    phases_moved_on(sim_server)  # Creating -> Running, moving the list entries
    assert ws.apply().exit_code == 0  # nothing to do: records what the list now says
    port = free_port()
    with Watch(ws, "--interval", f"{INTERVAL}s", "--listen", f"127.0.0.1:{port}") as w:
        w.wait_cycles(3)
        doc = httpx.get(f"http://127.0.0.1:{port}/api/status", timeout=10).json()
        assert w.stop() == 0
    assert doc["last_cycle"]["refresh"] == "auto"
    assert doc["counts"]["health"]["Missing"] == 0, doc["counts"]
    assert sum(doc["counts"]["health"].values()) == len(doc["workloads"]) > 0


def test_a_cycle_over_an_unchanged_fleet_sends_only_the_projects_list(ws, sim_server):
    """Between full refreshes a cycle lists each project once (a page per 500) and GETs
    nothing: no workload the list vouches for, no project quota read already. A list
    entry that moved on its own since the apply recorded it (Creating -> Running) is read
    once, then vouched for by the watch itself (it writes no state for that)."""
    applied(ws, sim_server)
    phases_moved_on(sim_server)  # Creating -> Running, moving the list entries
    with Watch(ws, "--interval", "200ms", "--full-refresh-every", "1000") as w:
        w.wait_cycles(3)
        sim_server.clear_requests()
        w.wait_cycles(4)
        assert w.stop() == 0
    sent = {(r["method"], r["path"]) for r in sim_server.requests()}
    assert sent == {("GET", "/api/v1/workloads")}, sent
    cycles = w.cycles()
    assert cycles[0]["refresh"] == "full" and cycles[1]["refresh"] == "auto"
    assert cycles[1]["requests"] > 1  # the entries that moved: read once
    assert [c["requests"] for c in cycles[3:7]] == [1, 1, 1, 1]
    assert [e for e in w.events() if e.get("event") == "action"] == []  # nothing written
