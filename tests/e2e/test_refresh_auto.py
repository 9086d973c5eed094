"""`--refresh=auto` against `sim serve`: every change made behind the reconciler's back,
through the API (PATCH, suspend, resume, delete, delete and create again) or the
simulator's /_sim drift patch and forced phase, is found by the list-first refresh, and
its plan is the one `--refresh=full` makes."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from reconciler import kinds

from tests.helpers.workspace import changes_by_address

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import specgen  # noqa: E402

pytestmark = pytest.mark.http

MOVING = {"Creating", "Initializing", "Pending", "Resuming", "Stopping", "Deleting"}


def _settle(sim_server, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while any(w.get("phase") in MOVING for w in sim_server.live()):
        assert time.monotonic() < deadline, "the simulator's phases did not settle"
        time.sleep(0.05)


def _actions(doc: dict) -> dict[str, tuple]:
    """Per address what a user reads of the plan: action, reason, id, live phase; and for
    a change, everything (what changes, from what to what, the PATCH body)."""
    return {a: (c["action"], c["action_reason"], c["workload_id"], c["live_phase"])
            + ((c,) if c["action"] != "no-op" else ())
            for a, c in changes_by_address(doc).items()}


def _fleet(ws, sim_server, n: int = 24) -> dict:
    specgen.write_specs(ws.specs, n)
    assert ws.apply().exit_code == 0
    _settle(sim_server)
    assert ws.apply().exit_code == 0  # records what the list shows once phases settled
    return ws.state()["resources"]


def _gets(sim_server) -> int:
    return sum(1 for r in sim_server.requests()
               if r["method"] == "GET" and r["route"].startswith("/api/v1/workloads/"))


def test_auto_finds_every_change_made_outside_and_plans_as_full(ws, sim_server):
    resources = _fleet(ws, sim_server)
    by_kind: dict[str, list[tuple[str, dict]]] = {}
    for addr, r in sorted(resources.items()):
        by_kind.setdefault(r["kind"], []).append((addr, r))
    touched: dict[str, str] = {}  # address -> what was done to it

    def pick(pred, what: str) -> tuple[str, dict]:
        for addr, r in sorted(resources.items()):
            if addr not in touched and pred(r):
                touched[addr] = what
                return addr, r
        pytest.skip(f"specgen's fleet has no workload for {what}")

    def path(r: dict) -> str:
        return f"{kinds.get(r['kind']).api_path}/{r['workload_id']}"

    has_image = lambda r: isinstance(r["applied"].get("spec", {}).get("image"), str)  # noqa: E731
    # /_sim drift patch (no API write)
    _, r = pick(has_image, "drift patch")
    sim_server.admin.patch(f"/_sim/workloads/{r['workload_id']}",
                           json={"spec": {"image": "drifted/by-sim:1"}}).raise_for_status()
    # suspend through the API
    _, r = pick(lambda r: kinds.get(r["kind"]).can_suspend
                and r.get("desired_phase", "Running") == "Running", "suspend")
    assert sim_server.api("POST", path(r) + "/suspend").status_code < 300
    # PATCH through the API (an update of the image, as apply's own update sends it)
    _, r = pick(lambda r: has_image(r) and kinds.get(r["kind"]).is_updatable("spec.image"),
                "API patch")
    patched = sim_server.api("PATCH", path(r), json={"spec": {"image": "patched/by-api:2"}})
    assert patched.status_code < 300, patched.text
    # resume through the API, of one the spec keeps suspended
    stopped = [a for a, r in resources.items() if r.get("desired_phase") == "Stopped"
               and a not in touched]
    if stopped:
        touched[stopped[0]] = "resume"
        assert sim_server.api("POST", path(resources[stopped[0]]) + "/resume").status_code < 300
    # delete through the API
    _, r = pick(lambda r: True, "delete")
    assert sim_server.api("DELETE", path(r)).status_code < 300
    # forced phase through /_sim
    _, r = pick(lambda r: kinds.get(r["kind"]).can_suspend
                and r.get("desired_phase", "Running") == "Running", "forced phase")
    sim_server.admin.post(f"/_sim/workloads/{r['workload_id']}/phase",
                          json={"phase": "Stopped"}).raise_for_status()
    _settle(sim_server)

    sim_server.clear_requests()
    auto = ws.plan_json("--refresh=auto")
    auto_gets = _gets(sim_server)
    full = ws.plan_json("--refresh=full")
    assert _actions(auto) == _actions(full)
    for addr, what in touched.items():
        assert _actions(auto)[addr][0] != "no-op", (what, _actions(auto)[addr])
    # Only what moved was read: the deleted one is gone from the list, not read.
    assert auto_gets <= len(touched) - 1 + 2, auto_gets
    assert "resume" in touched.values() or not any(
        r.get("desired_phase") == "Stopped" for r in resources.values())


def test_auto_finds_a_workload_deleted_and_created_again_outside(ws, sim_server):
    resources = _fleet(ws, sim_server, 8)
    addr, r = sorted(resources.items())[0]
    path = f"{kinds.get(r['kind']).api_path}/{r['workload_id']}"
    assert sim_server.api("DELETE", path).status_code < 300
    _settle(sim_server)
    body = dict(r["applied"])
    made = sim_server.api("POST", kinds.get(r["kind"]).api_path, json=body)
    assert made.status_code < 300, made.text
    _settle(sim_server)
    auto, full = ws.plan_json("--refresh=auto"), ws.plan_json("--refresh=full")
    assert _actions(auto) == _actions(full)
    assert _actions(auto)[addr][0] != "no-op"


def test_auto_reads_nothing_when_nothing_changed_and_the_old_state_is_read(ws, sim_server):
    resources = _fleet(ws, sim_server, 8)
    sim_server.clear_requests()
    assert ws.plan("--detailed-exitcode").exit_code == 0
    assert _gets(sim_server) == 0
    # A state written before fingerprints (no `listed`): every workload is read, once.
    doc = json.loads(ws.state_path.read_text())
    for rec in doc["resources"].values():
        rec.pop("listed", None)
    ws.state_path.write_text(json.dumps(doc))
    sim_server.clear_requests()
    assert ws.plan("--detailed-exitcode").exit_code == 0
    assert _gets(sim_server) == len(resources)


def _string_leaf(spec: dict, path: tuple = ()) -> tuple[tuple, str] | None:
    """The first string value of `spec` outside lists (depth first), with its path."""
    for key, value in sorted(spec.items()):
        if isinstance(value, str) and key not in ("name", "kind"):
            return path + (key,), value
        if isinstance(value, dict):
            found = _string_leaf(value, path + (key,))
            if found:
                return found
    return None


def test_auto_finds_a_drift_patch_of_every_kind(ws, sim_server):
    resources = _fleet(ws, sim_server, 24)
    one_of_each = {}
    for addr, r in sorted(resources.items()):
        one_of_each.setdefault(r["kind"], (addr, r))
    assert len(one_of_each) >= 4, sorted(one_of_each)  # specgen's fleet holds most kinds
    patched = []
    for kind, (addr, r) in sorted(one_of_each.items()):
        leaf = _string_leaf(r["applied"].get("spec", {}))
        if leaf is None:
            continue
        path, value = leaf
        patch: dict = {}
        node = patch.setdefault("spec", {})
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value + "-drift"
        sim_server.admin.patch(f"/_sim/workloads/{r['workload_id']}",
                               json=patch).raise_for_status()
        patched.append(addr)
    assert len(patched) == len(one_of_each)
    auto, full = ws.plan_json("--refresh=auto"), ws.plan_json("--refresh=full")
    assert _actions(auto) == _actions(full)
    for addr in patched:
        assert _actions(auto)[addr][0] != "no-op", (addr, _actions(auto)[addr])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_changes_outside_are_planned_alike_by_auto_and_full(ws, sim_server, seed):
    import random

    rng = random.Random(seed)
    resources = _fleet(ws, sim_server, 20)
    chosen = rng.sample(sorted(resources), 8)
    for addr in chosen:
        r = resources[addr]
        kind = kinds.get(r["kind"])
        path = f"{kind.api_path}/{r['workload_id']}"
        ops = ["delete", "phase"]
        if kind.can_suspend:
            ops += ["suspend", "resume"]
        leaf = _string_leaf(r["applied"].get("spec", {}))
        if leaf:
            ops.append("drift")
        op = rng.choice(ops)
        if op == "delete":
            sim_server.api("DELETE", path)
        elif op == "phase":
            sim_server.admin.post(f"/_sim/workloads/{r['workload_id']}/phase",
                                  json={"phase": rng.choice(["Running", "Failed", "Stopped"])})
        elif op in ("suspend", "resume"):
            sim_server.api("POST", f"{path}/{op}")
        else:
            keys, value = leaf
            patch: dict = {}
            node = patch.setdefault("spec", {})
            for key in keys[:-1]:
                node = node.setdefault(key, {})
            node[keys[-1]] = value + f"-{seed}"
            sim_server.admin.patch(f"/_sim/workloads/{r['workload_id']}", json=patch)
    _settle(sim_server)
    auto, full = ws.plan_json("--refresh=auto"), ws.plan_json("--refresh=full")
    assert _actions(auto) == _actions(full)


NIM_ELSEWHERE = """
kind: NIMService
name: chat-nim
project: project-7
clusterId: 00000000-0000-4000-8000-0000000000c2
spec:
  image: nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3
  compute:
    gpuDevicesRequest: 1
"""


def test_a_nim_service_whose_spec_names_another_cluster_is_read_from_the_list(ws, sim_server):
    """A NIM service runs in its project's cluster whatever its spec's `clusterId` says,
    and its list is its project's: the sweep after an apply finds it there as the plan's
    refresh does, so the plans after it read it from the list, not by GET."""
    ws.write("nim.yaml", NIM_ELSEWHERE)
    assert ws.apply().exit_code == 0
    _settle(sim_server)
    address = "NIMService/7/chat-nim"
    [item] = [w for w in sim_server.live() if w["name"] == "chat-nim"]
    assert item["clusterId"] != "00000000-0000-4000-8000-0000000000c2"
    ws.write("nim.yaml", NIM_ELSEWHERE.replace("gpuDevicesRequest: 1", "gpuDevicesRequest: 2"))
    res = ws.apply()  # an in-place update: the sweep after it records the list's fingerprint
    assert res.exit_code == 0 and "1 to update" in res.output, res.output
    _settle(sim_server)
    sim_server.clear_requests()
    for _ in range(2):
        assert ws.plan("--detailed-exitcode").exit_code == 0
    assert [r["path"] for r in sim_server.requests() if r["method"] == "GET"
            and r["path"].startswith("/api/v2/workloads/nim-services/")] == []


EDITS = ("string", "drop field", "add default", "add env", "drop env", "stop")


def _edit_specs(specs: Path, rng) -> dict[str, str]:
    """Edits a user makes in git, each of `EDITS` to two spec files of specgen's fleet
    chosen at random (the rest left as written): a string changed, a field dropped, a
    field added at the value the server fills in by itself, an environment variable added
    or dropped, a workspace stopped. file name -> the edit made."""
    import yaml

    files = sorted(specs.rglob("*.yaml"))
    rng.shuffle(files)
    docs = {path: yaml.safe_load(path.read_text()) for path in files}

    def fits(edit: str, doc: dict) -> bool:
        spec = doc.get("spec", {})
        return {"string": _string_leaf(spec) is not None,
                "drop field": any(not isinstance(v, dict) for k, v in spec.items()
                                  if k != "image"),
                "add default": "image" in spec and "imagePullPolicy" not in spec,
                "add env": isinstance(spec.get("environmentVariables"), list),
                "drop env": bool(spec.get("environmentVariables")),
                "stop": doc.get("desiredPhase") == "Running"}[edit]

    made: dict[str, str] = {}
    for edit in EDITS * 2:
        path = next(p for p in files if p.name not in made and fits(edit, docs[p]))
        doc = docs[path]
        spec = doc.get("spec", {})
        if edit == "string":
            keys, value = _string_leaf(spec)
            node = spec
            for key in keys[:-1]:
                node = node[key]
            node[keys[-1]] = value + "-edited"
        elif edit == "drop field":
            spec.pop(rng.choice(sorted(k for k, v in spec.items()
                                       if not isinstance(v, dict) and k != "image")))
        elif edit == "add default":  # the simulator's default for a tagged image, as Run:ai's
            spec["imagePullPolicy"] = "IfNotPresent"
        elif edit == "add env":
            spec["environmentVariables"].append({"name": "ADDED_IN_GIT", "value": "yes"})
        elif edit == "drop env":
            envs = spec["environmentVariables"]
            envs.pop(rng.randrange(len(envs)))
        else:
            doc["desiredPhase"] = "Stopped"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        made[path.name] = edit
    return made


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_spec_changes_are_planned_from_the_state_alike_with_no_get(ws, sim_server, seed):
    """Specs edited in git, live untouched: the list vouches for each workload, so auto
    plans its change from the state, with no GET, and what the plan does is what `full`
    plans from live: the same actions, field changes and PATCH bodies."""
    import random

    _fleet(ws, sim_server, 40)
    made = _edit_specs(ws.specs, random.Random(seed))
    sim_server.clear_requests()
    auto = ws.plan_json("--refresh=auto")
    assert _gets(sim_server) == 0
    full = ws.plan_json("--refresh=full")
    acted = {a.rsplit("/", 1)[1] for a, c in changes_by_address(full).items()
             if c["action"] != "no-op"}
    # A field added at the server's own value changes nothing; every other edit acts.
    assert acted == {f.removesuffix(".yaml") for f, e in made.items() if e != "add default"}

    assert _what_is_done(auto) == _what_is_done(full)
    for fmt in ("text", "markdown"):
        assert ws.plan("--refresh=auto", "--format", fmt).output == \
            ws.plan("--refresh=full", "--format", fmt).output
    # A saved plan reads what it acts on: `apply FILE` checks live is still what it read.
    sim_server.clear_requests()
    assert ws.plan("--out", str(ws.root / "saved.plan")).exit_code == 0
    assert _gets(sim_server) == len(acted)

    # Applied as planned: a full plan then finds live as the specs say.
    sim_server.clear_requests()
    assert ws.apply().exit_code == 0
    _settle(sim_server)
    assert ws.plan("--refresh=full", "--detailed-exitcode").exit_code == 0


def _what_is_done(doc: dict) -> dict[str, dict]:
    """Per address what the plan does and shows of each change: the action and its reason,
    the id, the phases, each field's change (before and after) and the PATCH body; not the
    whole body before and after (`change`), which for a workload the list vouches for is
    the state's: the body last applied, without the values the server filled in."""
    return {a: {k: v for k, v in c.items() if k != "change"}
            for a, c in changes_by_address(doc).items()}
