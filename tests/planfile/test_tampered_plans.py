"""A saved plan edited by hand after `plan --out` (a failed policy result turned into a
pass, a quota raised, a body changed, the digest removed) is refused by `apply FILE` and
`show FILE` with exit 1, before anything is sent: the file's `digest` covers every field.
And a plan that passed its recorded policy is checked again by the rules given to apply."""

from __future__ import annotations

import json

import pytest

from tests.helpers.plans import saved_plan
from tests.helpers.policy import training, write_policy

pytestmark = pytest.mark.http


def _passing(doc: dict) -> None:
    for rule in doc["policy"]["rules"]:
        rule.update(status="passed", violations=[])
    doc["policy"].update(passed=True, summary="1 rule: 1 passed")


def _warn(doc: dict) -> None:
    doc["policy"]["rules"][0]["enforcement"] = "warn"


def _quota(doc: dict) -> None:
    doc["gpu_quotas"] = {"7": 1000}


def _image(doc: dict) -> None:
    doc["changes"][0]["after"]["spec"]["image"] = "evil.example.com/x:1"


def _no_digest(doc: dict) -> None:
    doc.pop("digest")
    _passing(doc)


def _no_policy(doc: dict) -> None:
    doc.pop("policy")


TAMPER = [_passing, _warn, _quota, _image, _no_digest, _no_policy]


@pytest.mark.parametrize("tamper", TAMPER, ids=[t.__name__.lstrip("_") for t in TAMPER])
def test_a_hand_edited_saved_plan_is_refused_and_nothing_is_applied(ws, sim_server, tamper):  # noqa: F811
    sim_server.admin.post("/_sim/projects", json={
        "id": "7", "name": "team-a", "clusterId": "71f69d83-ba66-4822-adf5-55ce55efd210",
        "gpuQuota": 4}).raise_for_status()
    ws.write("a.yaml", training(gpus=8))
    pol = write_policy(ws, "rules:\n  - name: cap\n    maxGpusPerWorkload: 4\n")
    out = ws.root / "plan.json"
    assert ws.plan("--policy", pol, "--out", str(out)).exit_code == 1
    doc = json.loads(out.read_text())
    assert doc["digest"].startswith("sha256:")
    tamper(doc)
    out.write_text(json.dumps(doc, indent=2))
    sim_server.clear_requests()
    for args in (["apply", str(out)], ["show", str(out)]):
        res = ws.cli(*args)
        assert res.exit_code == 1, (args, res.output)
        assert "Traceback" not in res.output
        [error] = [line for line in res.stderr.splitlines() if line.startswith("Error:")]
        assert str(out) in error and "changed since it was written" in error, error
    assert sim_server.writes() == []
    assert not ws.state_path.exists()


def test_a_saved_plan_that_passed_is_checked_again_by_the_rules_given_to_apply(ws, sim_server):  # noqa: F811
    ws.write("a.yaml", training(gpus=8))
    lax = write_policy(ws, "rules:\n  - name: cap\n    maxGpusPerWorkload: 16\n", "lax.yaml")
    out = ws.root / "plan.json"
    assert ws.plan("--policy", lax, "--out", str(out)).exit_code == 0
    strict = write_policy(ws, "rules:\n  - name: cap\n    maxGpusPerWorkload: 4\n", "strict.yaml")
    sim_server.clear_requests()
    res = ws.cli("apply", str(out), "--policy", strict)
    assert res.exit_code == 1 and "breaks 1 deny rule of the policy (cap)" in res.stderr
    assert sim_server.writes() == []


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_a_quota_that_is_not_a_finite_number_is_a_damaged_file(value):
    from reconciler import planfile

    doc = json.loads(planfile.encode(saved_plan()))
    text = json.dumps({**doc, "gpu_quotas": {"7": float(value)}})
    with pytest.raises(planfile.PlanFileError, match=r"damaged or incomplete \(gpu_quotas: 7: "):
        planfile.decode(text, "plan.json")


def _paths(value, at=()):
    """Every (path) into a JSON document: keys of objects, indexes of lists."""
    yield at
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*at, i))


def _set(doc, path, value):
    for step in path[:-1]:
        doc = doc[step]
    doc[path[-1]] = value


JUNK = [None, 5, -1, 1.5, "x", "", [], {}, [None], {"x": None}, True, float("nan")]


def test_any_field_of_the_policy_and_quotas_of_a_saved_plan_damaged_is_one_clear_error():
    """Every field under `policy` and `gpu_quotas`, set to junk of every JSON type: the
    file is refused as a PlanFileError (damaged, or changed since written), never another
    exception."""
    from reconciler import planfile
    from reconciler.plans import Report, RuleResult, Violation

    saved = saved_plan()
    saved.plan.gpu_quotas = {"7": 8, "9": None}
    saved.plan.policy = Report(files=("p.yaml",), rules=(
        RuleResult("cap", "maxGpusPerWorkload", 4, "deny", "p.yaml",
                   (Violation("Training/7/x", "Training/7/x: rule cap: 8 GPUs"),), ("n",)),
        RuleResult("img", "allowedImages", ["nvcr.io/*"], "warn", "p.yaml")))
    text = planfile.encode(saved)
    base = json.loads(text)
    assert planfile.decode(text).plan.policy.failed
    paths = [p for top in ("policy", "gpu_quotas") for p in _paths(base[top], (top,))]
    assert len(paths) > 30
    for path in paths:
        for junk in JUNK:
            doc = json.loads(json.dumps(base))
            _set(doc, path, junk)
            if doc == base:
                continue
            with pytest.raises(planfile.PlanFileError, match="plan.json"):
                planfile.decode(json.dumps(doc), "plan.json")
