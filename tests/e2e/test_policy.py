"""Policy rules through the CLI against `sim serve`: a plan that breaks each rule exits 1
naming it and applies nothing (the simulator's request log holds no write), the same
rule with `enforcement: warn` exits as usual; saved plans record their results; bad
policy files are refused with file, line and field before anything is read."""

from __future__ import annotations

import json
import os

import pytest

from tests.helpers.constants import CLUSTER
from tests.helpers.policy import training, write_policy

pytestmark = pytest.mark.http


# (rule, what makes the plan break it, the violation's words); each plan is a first
# create of specs/a.yaml unless `applied` is first applied without the policy.
RULES = [
    ("maxGpusPerWorkload: 4", {}, "Training/7/llama-ft: rule r (maxGpusPerWorkload 4): 8 GPUs"),
    ('maxGpusPerProject: {"7": 12}', {"extra": training("second")},
     "project 7 (project-7): rule r (maxGpusPerProject 7: 12): 16 GPUs planned (now 0), "
     "limit 12"),
    ("withinProjectQuota: true", {"quota": 4},  # the simulator's project 7, quota 4
     "project 7 (team-a): rule r (withinProjectQuota): 8 GPUs planned (now 0), quota 4"),
    ('allowedImages: ["registry.example.com/*"]', {},
     'Training/7/llama-ft: rule r (allowedImages registry.example.com/*): spec.image '
     '"nvcr.io/nvidia/pytorch:24.05-py3"'),
    ("requiredLabels: [cost-center]", {},
     "Training/7/llama-ft: rule r (requiredLabels cost-center): spec.labels lacks cost-center"),
    ("forbidLatestTag: true", {"image": "nvcr.io/nvidia/pytorch"},
     'Training/7/llama-ft: rule r (forbidLatestTag): spec.image "nvcr.io/nvidia/pytorch" has '
     "no tag (latest)"),
    ("maxDestructive: 0", {"applied": True},
     "plan: rule r (maxDestructive 0): 1 deletes and replaces (Training/7/llama-ft)"),
]


def _setup(ws, sim_server, how: dict) -> None:
    if "quota" in how:
        sim_server.admin.post("/_sim/projects", json={
            "id": "7", "name": "team-a", "clusterId": CLUSTER,
            "gpuQuota": how["quota"]}).raise_for_status()
    if how.get("applied"):  # then a changed image: a replace
        ws.write("a.yaml", training())
        assert ws.apply().exit_code == 0
        ws.write("a.yaml", training(image="nvcr.io/nvidia/pytorch:24.10-py3"))
    else:
        ws.write("a.yaml", training(image=how.get("image", "nvcr.io/nvidia/pytorch:24.05-py3")))
    if "extra" in how:
        ws.write("b.yaml", how["extra"])


@pytest.mark.parametrize("rule,how,words", RULES, ids=[r[0].split(":")[0] for r in RULES])
def test_a_plan_that_breaks_a_deny_rule_exits_1_naming_it_and_applies_nothing(
        ws, sim_server, rule, how, words):
    _setup(ws, sim_server, how)
    pol = write_policy(ws, f"rules:\n  - name: r\n    {rule}\n")
    sim_server.clear_requests()
    state_before = ws.state_path.read_bytes() if ws.state_path.exists() else None

    planned = ws.plan("--policy", pol)
    assert planned.exit_code == 1, planned.output
    assert "Plan: " in planned.stdout, "the plan is printed"
    assert f"FAIL {words}" in planned.stdout
    assert "Error: the plan breaks 1 deny rule of the policy (r)" in planned.stderr

    applied = ws.apply("--policy", pol)
    assert applied.exit_code == 1, applied.output
    assert f"FAIL {words}" in applied.stdout
    assert "nothing was applied" in applied.stderr
    assert sim_server.writes() == []
    now = ws.state_path.read_bytes() if ws.state_path.exists() else None
    assert now == state_before


def test_without_a_refresh_the_quota_rule_fails_closed_unless_on_unknown_warn(ws, sim_server):
    sim_server.admin.post("/_sim/projects", json={"id": "7", "name": "team-a",
                                                  "clusterId": CLUSTER, "gpuQuota": 4})
    ws.write("a.yaml", training())
    pol = write_policy(ws, "rules:\n  - name: quota\n    withinProjectQuota: true\n")
    res = ws.plan("--policy", pol, "--no-refresh")
    assert res.exit_code == 1, res.output
    assert ("FAIL project 7: rule quota (withinProjectQuota): could not be checked: its GPU "
            "quota is unknown (not read: the plan was made with --no-refresh); 8 GPUs planned "
            "(now 0)") in res.stdout
    assert "Error: the plan breaks 1 deny rule of the policy (quota)" in res.stderr
    lax = write_policy(ws, "rules:\n  - name: quota\n    withinProjectQuota: true\n"
                           "    onUnknown: warn\n", "lax.yaml")
    res = ws.plan("--policy", lax, "--no-refresh")
    assert res.exit_code == 0, res.output
    assert "1 rule: 1 unchecked" in res.stdout
    assert ("note: rule quota: project 7: its GPU quota is unknown (not read: the plan was "
            "made with --no-refresh); 8 GPUs planned (now 0); not checked") in res.stdout


@pytest.mark.parametrize("rule,how,words", RULES, ids=[r[0].split(":")[0] for r in RULES])
def test_the_same_rule_with_warn_reports_and_exits_as_usual(ws, sim_server, rule, how, words):
    _setup(ws, sim_server, how)
    pol = write_policy(ws, f"rules:\n  - name: r\n    enforcement: warn\n    {rule}\n")
    planned = ws.plan("--policy", pol, "--detailed-exitcode")
    assert planned.exit_code == 2, planned.output
    assert f"WARN {words}" in planned.stdout
    assert "Policy passed" in planned.stdout
    sim_server.clear_requests()
    applied = ws.apply("--policy", pol)
    assert applied.exit_code == 0, applied.output
    assert f"WARN {words}" in applied.stdout
    assert sim_server.writes(), "warn only reports: the apply went ahead"


def test_apply_on_a_terminal_refuses_before_asking(ws, sim_server, monkeypatch):
    monkeypatch.setattr("reconciler.cli._stdin_is_tty", lambda: True)
    ws.write("a.yaml", training(gpus=8))
    pol = write_policy(ws, "rules:\n  - name: cap\n    maxGpusPerWorkload: 4\n")
    res = ws.cli("apply", str(ws.specs), "--policy", pol, input="yes\n")
    assert res.exit_code == 1, res.output
    assert "Do you want to perform these actions" not in res.output
    assert sim_server.writes() == []


def test_json_output_carries_the_policy_results(ws, sim_server):
    ws.write("a.yaml", training(gpus=8))
    pol = write_policy(ws, """\
        rules:
          - name: cap
            maxGpusPerWorkload: 4
          - name: labels
            requiredLabels: [team]
        """)
    res = ws.cli("plan", str(ws.specs), "--format", "json", "--policy", pol)
    assert res.exit_code == 1
    doc = json.loads(res.stdout)
    assert doc["format_version"] == "1.10"
    assert doc["policy"]["passed"] is False
    assert [(r["name"], r["status"]) for r in doc["policy"]["rules"]] == [
        ("cap", "failed"), ("labels", "passed")]
    assert doc["policy"]["rules"][0]["violations"] == [
        {"address": "Training/7/llama-ft",
         "message": "Training/7/llama-ft: rule cap (maxGpusPerWorkload 4): 8 GPUs",
         "unknown": False}]


def test_a_saved_plan_records_its_results_and_apply_refuses_one_that_failed(ws, sim_server):
    ws.write("a.yaml", training(gpus=8))
    pol = write_policy(ws, "rules:\n  - name: cap\n    maxGpusPerWorkload: 4\n")
    out = ws.root / "plan.json"
    planned = ws.plan("--policy", pol, "--out", str(out))
    assert planned.exit_code == 1 and out.exists()
    shown = ws.cli("show", str(out))
    assert shown.exit_code == 0
    assert "FAIL Training/7/llama-ft: rule cap (maxGpusPerWorkload 4): 8 GPUs" in shown.stdout
    markdown = ws.cli("show", str(out), "--format", "markdown")
    assert "#### Policy" in markdown.stdout and "| `cap` |" in markdown.stdout
    sim_server.clear_requests()
    applied = ws.cli("apply", str(out))  # no --policy: the recorded results decide
    assert applied.exit_code == 1, applied.output
    assert "breaks 1 deny rule of the policy (cap): nothing was applied" in applied.stderr
    assert sim_server.writes() == []
    assert not ws.state_path.exists()


def test_apply_of_a_saved_plan_checks_the_policy_given_then_too(ws, sim_server):
    ws.write("a.yaml", training(gpus=8))
    out = ws.root / "plan.json"
    assert ws.plan("--out", str(out)).exit_code == 0
    pol = write_policy(ws, "rules:\n  - name: cap\n    maxGpusPerWorkload: 4\n")
    sim_server.clear_requests()
    applied = ws.cli("apply", str(out), "--policy", pol)
    assert applied.exit_code == 1, applied.output
    assert "(cap): nothing was applied" in applied.stderr
    assert sim_server.writes() == []
    passing = write_policy(ws, "rules:\n  - name: cap\n    maxGpusPerWorkload: 8\n", "ok.yaml")
    assert ws.cli("apply", str(out), "--policy", passing).exit_code == 0
    assert sim_server.writes()


def test_the_environment_names_the_policy_files_separated_like_path(ws, sim_server):
    ws.write("a.yaml", training(gpus=8))
    a = write_policy(ws, "rules:\n  - name: cap\n    maxGpusPerWorkload: 16\n", "a.yaml")
    b = write_policy(ws, "rules:\n  - name: labels\n    requiredLabels: [owner]\n"
                         "    enforcement: warn\n", "b.yaml")
    ws.env["RUNAI_RECONCILE_POLICY"] = os.pathsep.join([a, b])
    res = ws.plan()
    assert res.exit_code == 0, res.output
    assert f"Policy passed ({a}, {b}): 2 rules: 1 warned, 1 passed." in res.stdout
    # --policy replaces the variable's list
    only = ws.plan("--policy", a)
    assert f"Policy passed ({a}): 1 rule: 1 passed." in only.stdout


# --- bad policy files ---------------------------------------------------------------

BAD = [  # (case, file text, what stderr says)
    ("yaml", "rules:\n  - name: cap\n    maxGpusPerWorkload: [16\n", "policy.yaml:4: invalid YAML"),
    ("unknown-rule", "rules:\n  - name: cap\n    maxGpuPerWorkload: 16\n",
     "policy.yaml:3: rules[0].maxGpuPerWorkload: unknown rule (did you mean "
     "'maxGpusPerWorkload'?)"),
    ("bad-value", "rules:\n  - name: cap\n    maxGpusPerWorkload: -1\n",
     "policy.yaml:3: rules[0].maxGpusPerWorkload: must be >= 0.0, got -1"),
    ("bad-type", "rules:\n  - name: reg\n    allowedImages: nvcr.io/*\n",
     'policy.yaml:3: rules[0].allowedImages: must be a list, got "nvcr.io/*"'),
    ("no-rule", "rules:\n  - name: x\n    enforcement: warn\n",
     "policy.yaml:2: rules[0]: a rule needs one of maxGpusPerWorkload"),
    ("two-rules", "rules:\n  - name: x\n    maxDestructive: 1\n    forbidLatestTag: true\n",
     "policy.yaml:4: rules[0].forbidLatestTag: a rule has one rule key"),
    ("enforcement", "rules:\n  - name: x\n    maxDestructive: 1\n    enforcement: block\n",
     "policy.yaml:4: rules[0].enforcement: must be one of 'deny' or 'warn', got \"block\""),
    ("match-kind", "rules:\n  - name: x\n    maxDestructive: 1\n    match: {kinds: [Trainer]}\n",
     "policy.yaml:4: rules[0].match.kinds[0]: must be one of"),
    ("match-field", "rules:\n  - name: x\n    maxDestructive: 1\n    match: {project: [a]}\n",
     "policy.yaml:4: rules[0].match.project: unknown field (did you mean 'projects'?)"),
    ("top-level", "rule:\n  - name: x\n    maxDestructive: 1\n",
     "policy.yaml:1: rule: unknown field (did you mean 'rules'?)"),
    ("duplicate-key", "rules:\n  - name: x\n    maxDestructive: 1\n    maxDestructive: 2\n",
     "policy.yaml:4: maxDestructive: duplicate key"),
    ("empty", "", "policy.yaml: must hold one document, it is empty"),
]


@pytest.mark.parametrize("case,text,words", BAD, ids=[b[0] for b in BAD])
def test_a_bad_policy_file_exits_1_with_file_line_and_field(ws, sim_server, case, text, words):
    ws.write("a.yaml", training())
    pol = write_policy(ws, text)
    for command in (("plan", str(ws.specs)), ("apply", str(ws.specs), "--auto-approve")):
        res = ws.cli(*command, "--policy", pol)
        assert res.exit_code == 1, res.output
        assert "Traceback" not in res.output
        assert f"{ws.root}/{words}" in res.stderr, res.stderr
        assert "problem" in res.stderr and "in the policy files" in res.stderr
    assert sim_server.requests(api_only=False) == []


def test_rule_names_are_unique_across_files_and_a_missing_file_is_named(ws, sim_server):
    ws.write("a.yaml", training())
    a = write_policy(ws, "rules:\n  - name: cap\n    maxGpusPerWorkload: 16\n", "a.yaml")
    b = write_policy(ws, "rules:\n  - name: other\n    maxDestructive: 1\n"
                         "  - name: cap\n    maxGpusPerWorkload: 8\n", "b.yaml")
    res = ws.plan("--policy", a, "--policy", b, "--policy", str(ws.root / "gone.yaml"))
    assert res.exit_code == 1
    assert f"{ws.root}/gone.yaml: no such file" in res.stderr
    assert f"{b}:4: duplicate rule name 'cap': already defined at {a}:2" in res.stderr
    assert "Error: 2 problems in the policy files" in res.stderr
    assert sim_server.requests(api_only=False) == []
