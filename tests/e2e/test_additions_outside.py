"""What someone adds to a live workload outside runai-reconcile (an environment variable such
as `LD_PRELOAD`, an `args`), through the API behind the reconciler's back: `drift` and
`plan` report it, `apply` removes it (in place where the kind's update can, else by a
replacement that says why), and afterwards both are clean. For every kind, against
`sim serve`, the addition made with the simulator's admin merge patch."""

from __future__ import annotations

import copy
import json

import pytest

from tests.helpers.constants import ROOT
from tests.helpers.kind_specs import INFERENCE

pytestmark = pytest.mark.http

LD_PRELOAD = {"name": "LD_PRELOAD", "value": "/tmp/hook.so"}
TOKEN_VALUE = "tok-5b1f0e9c2d"  # a secret-looking variable's value: never printed
MY_TOKEN = {"name": "MY_TOKEN", "value": TOKEN_VALUE}
MANIFEST_MASTER = ("manifest.spec.pytorchReplicaSpecs.Master.template.spec"
                   ".containers[pytorch]")


def _v1_env(*where: str):
    """A merge patch adding `items` to the environment variables at `where` under spec."""
    def patch(live: dict, items: list[dict]) -> dict:
        holder = live["spec"]
        for key in where:
            holder = holder[key]
        env = [*(holder.get("environmentVariables") or []), *items]
        out: dict = {"environmentVariables": env}
        for key in reversed(where):
            out = {key: out}
        return {"spec": out}
    return patch


def _manifest_env(live: dict, items: list[dict]) -> dict:
    raw = copy.deepcopy(live["rawManifest"])
    (container,) = raw["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"]
    container["env"] = [*container.get("env", []), *items]
    return {"rawManifest": raw}


# kind: (example spec, address, the env list's path in a plan, merge patch, in place?)
KINDS = {
    "DistributedTraining": ("training/bert-ddp.yaml", "DistributedTraining/7/bert-ddp",
                            "spec.environmentVariables", _v1_env(), False),
    "DistributedInference": ("inference/llama-70b-serve.yaml",
                             "DistributedInference/7/llama-70b-serve",
                             "spec.leader.environmentVariables", _v1_env("leader"), False),
    "Training": ("training/llama-8b-lora.yaml", "Training/7/llama-8b-lora",
                 "spec.environmentVariables", _v1_env(), False),
    "Workspace": ("workspace/jupyter-research.yaml", "Workspace/7/jupyter-research",
                  "spec.environmentVariables", _v1_env(), False),
    "Inference": ("inference/mistral-7b-chat.yaml", "Inference/7/mistral-7b-chat",
                  "spec.environmentVariables", _v1_env(), True),
    "NIMService": ("nim/llama-8b-nim.yaml", "NIMService/7/llama-8b-nim",
                   "spec.environmentVariables", _v1_env(), True),
    "Manifest": ("manifest/gpt-pytorchjob.yaml", "Manifest/7/gpt-pretrain",
                 f"{MANIFEST_MASTER}.env", _manifest_env, False),  # a frozen pod template
}


def _apply_example(ws, sim_server, example: str) -> dict:
    """Apply one example spec; its live body as the simulator's admin surface shows it."""
    ws.write(example, (ROOT / "specs" / example).read_text())
    res = ws.apply()
    assert res.exit_code == 0, res.output
    (live,) = sim_server.admin.get("/_sim/workloads").json()["workloads"]
    return live


def _id(live: dict) -> str:
    return live.get("workloadId") or live["metadata"]["id"]


def _patch_live(sim_server, live: dict, patch: dict) -> dict:
    res = sim_server.admin.patch(f"/_sim/workloads/{_id(live)}", json=patch)
    assert res.status_code == 200, res.text
    return res.json()


def _live_text(sim_server, live: dict) -> str:
    return json.dumps(sim_server.admin.get(f"/_sim/workloads/{_id(live)}").json())


def _outputs(ws) -> dict[str, object]:
    """Every form the addition is shown in: plan and drift as text, JSON and markdown."""
    return {
        "plan": ws.plan("--detailed-exitcode"),
        "plan-json": ws.plan("--detailed-exitcode", "--format", "json"),
        "plan-md": ws.plan("--detailed-exitcode", "--format", "markdown"),
        "drift": ws.cli("drift", str(ws.specs), "--detailed-exitcode"),
        "drift-json": ws.cli("drift", str(ws.specs), "--detailed-exitcode", "--format", "json"),
        "drift-md": ws.cli("drift", str(ws.specs), "--detailed-exitcode", "--format",
                           "markdown"),
    }


@pytest.mark.parametrize("kind", list(KINDS))
def test_an_environment_variable_added_outside_is_reported_then_removed(ws, sim_server, kind):
    example, address, env_path, patch, in_place = KINDS[kind]
    live = _apply_example(ws, sim_server, example)
    _patch_live(sim_server, live, patch(live, [LD_PRELOAD, MY_TOKEN]))
    assert "LD_PRELOAD" in _live_text(sim_server, live)

    out = _outputs(ws)
    for name, res in out.items():
        assert res.exit_code == 2, f"{name}: {res.output}"
        assert TOKEN_VALUE not in res.output, name  # masked in every form
    added = f"{env_path}[LD_PRELOAD]"
    plan_line = next(line for line in out["plan"].output.splitlines() if added in line)
    assert plan_line.strip().startswith(f"- {added}: "), plan_line
    assert "/tmp/hook.so" in plan_line and "added outside runai-reconcile" in plan_line
    assert ("forces replacement" in plan_line) is not in_place, plan_line
    assert f"{env_path}[MY_TOKEN]" in out["plan"].output
    assert f"+ {added}: live " in out["drift"].output
    assert "added outside runai-reconcile" in out["plan-md"].output
    (rc,) = json.loads(out["plan-json"].output)["resource_changes"]
    assert rc["action"] == ("update" if in_place else "replace")
    assert rc["action_reason"] == "drift"
    entry = next(c for c in rc["changed_paths"] if c["path"] == added)
    assert entry["added"] and entry["drift"] and entry["after"] is None
    assert entry["before"] == LD_PRELOAD
    (drifted,) = json.loads(out["drift-json"].output)["drift"]
    assert {"path": added, "state": None, "live": LD_PRELOAD, "added": True} in drifted["paths"]

    res = ws.apply()
    assert res.exit_code == 0, res.output
    assert ("1 updated" if in_place else "1 replaced") in res.output, res.output
    live_now = sim_server.admin.get("/_sim/workloads").json()["workloads"]
    assert len(live_now) == 1 and "LD_PRELOAD" not in json.dumps(live_now)
    assert TOKEN_VALUE not in json.dumps(live_now)
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 0, res.output
    res = ws.cli("drift", str(ws.specs), "--detailed-exitcode")
    assert res.exit_code == 0, res.output


NO_ARGS = INFERENCE.replace("  args: --model mistralai/Mistral-7B-Instruct-v0.3 --port 8000\n",
                            "")


def test_args_added_outside_is_reported_then_removed(ws, sim_server):
    """An Inference's `args` is updatable, but a PATCH cannot unset it (the API does not
    say that null removes a field), so taking it out replaces the workload, and says so."""
    assert "args:" not in NO_ARGS
    ws.write("serve.yaml", NO_ARGS)
    assert ws.apply().exit_code == 0
    (live,) = sim_server.admin.get("/_sim/workloads").json()["workloads"]
    _patch_live(sim_server, live, {"spec": {"args": "--enable-lora --trust-remote-code"}})

    res = ws.cli("drift", str(ws.specs), "--detailed-exitcode")
    assert res.exit_code == 2, res.output
    assert '+ spec.args: live "--enable-lora --trust-remote-code"' in res.output
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 2, res.output
    assert ('- spec.args: "--enable-lora --trust-remote-code"  # added outside '
            "runai-reconcile, forces replacement") in res.output

    res = ws.apply()
    assert res.exit_code == 0 and "1 replaced" in res.output, res.output
    (live,) = sim_server.admin.get("/_sim/workloads").json()["workloads"]
    assert "args" not in live["spec"]
    assert ws.plan("--detailed-exitcode").exit_code == 0


def test_args_added_to_a_manifest_s_container_is_reported_then_removed(ws, sim_server):
    """A PyTorchJob's pod templates cannot change in place: the replacement says why."""
    live = _apply_example(ws, sim_server, "manifest/gpt-pytorchjob.yaml")
    raw = copy.deepcopy(live["rawManifest"])
    (container,) = raw["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"]
    container["args"] = ["--resume-from", "/tmp/other"]
    _patch_live(sim_server, live, {"rawManifest": raw})

    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 2, res.output
    assert (f'- {MANIFEST_MASTER}.args: ["--resume-from", "/tmp/other"]  # added outside '
            "runai-reconcile, forces replacement") in res.output
    res = ws.apply()
    assert res.exit_code == 0 and "1 replaced" in res.output, res.output
    (live,) = sim_server.admin.get("/_sim/workloads").json()["workloads"]
    assert "--resume-from" not in _live_text(sim_server, live)
    assert ws.plan("--detailed-exitcode").exit_code == 0


def test_ignore_changes_accepts_an_addition(ws, sim_server):
    """A variable a policy injects (or a team adds on purpose) is accepted by naming its
    list, or the one item, in `lifecycle.ignoreChanges`."""
    live = _apply_example(ws, sim_server, "inference/mistral-7b-chat.yaml")
    _patch_live(sim_server, live, _v1_env()(live, [LD_PRELOAD]))
    assert ws.plan("--detailed-exitcode").exit_code == 2
    spec = (ROOT / "specs" / "inference/mistral-7b-chat.yaml").read_text()
    for accepted in ("spec.environmentVariables", "spec.environmentVariables[LD_PRELOAD]"):
        ws.write("inference/mistral-7b-chat.yaml",
                 spec + f"lifecycle:\n  ignoreChanges: [\"{accepted}\"]\n")
        res = ws.plan("--detailed-exitcode")
        assert res.exit_code == 0, res.output
        res = ws.cli("drift", str(ws.specs), "--detailed-exitcode")
        assert res.exit_code == 0, res.output


def test_the_examples_applied_plan_no_change_with_every_workload_read(ws, sim_server):
    """What the server fills in (defaults, generated URLs and claim names) is no addition:
    after an apply of every example, a plan that reads every workload is empty, and so
    is drift, for every kind."""
    ws.copy_examples()
    assert ws.apply().exit_code == 0
    kinds_live = {w["kind"] for w in sim_server.admin.get("/_sim/workloads").json()["workloads"]}
    assert len(kinds_live) == len(KINDS)
    res = ws.plan("--detailed-exitcode", "--refresh", "full")
    assert res.exit_code == 0, res.output
    res = ws.cli("drift", str(ws.specs), "--detailed-exitcode")
    assert res.exit_code == 0, res.output
