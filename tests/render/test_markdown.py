"""Markdown for PR comments: goldens, the 65,535-character limit with complete counts."""

from __future__ import annotations

import pathlib
import re

import pytest

from tests.helpers.golden import assert_golden

from reconciler import drift, gpus
from reconciler.plans import Action, FieldChange, Plan, ResourceChange
from reconciler.render import markdown
from tests.helpers.examples import PLANS, inference, inference_body, training, training_body
from tests.helpers.finishing import finished
from tests.helpers.plans import big_plan

GOLDEN = pathlib.Path(__file__).parent / "golden_markdown"


def _drift_report() -> drift.DriftReport:
    pending = Plan(changes=[
        inference("llama-70b-serve", Action.UPDATE, "spec_changed",
                  changes=[FieldChange("spec.replicas", 2, 4)]),
        training("new-job", Action.CREATE, "new", after=training_body("new-job")),
    ])
    return drift.DriftReport(drifted=[
        drift.DriftedWorkload("DistributedInference/7/llama-70b-serve", "DistributedInference",
                              "llama-70b-serve", "7", "5d9e", "drift",
                              [drift.DriftedPath("spec.replicas", 2, 5)],
                              gpus_state=gpus.Gpus(32, 32), gpus_live=gpus.Gpus(80, 80)),
        drift.DriftedWorkload("DistributedTraining/7/bert-ddp", "DistributedTraining", "bert-ddp",
                              "7", "0b6f", "drift",
                              [drift.DriftedPath("spec.environmentVariables[HF_TOKEN].value",
                                                 "hf_old", "hf_new"),
                               drift.DriftedPath("spec.args", "--a", "--b")],
                              sensitive=("spec.args",)),
        drift.DriftedWorkload("DistributedTraining/7/resnet-mpi", "DistributedTraining",
                              "resnet-mpi", "7", "3c2b", "phase_drift",
                              [drift.DriftedPath("desiredPhase", "Running", "Stopped")]),
        drift.DriftedWorkload("DistributedTraining/7/old-sweep", "DistributedTraining",
                              "old-sweep", "7", "7e6d", "deleted_outside",
                              gpus_state=gpus.Gpus(40, 40)),
    ], pending=pending, lineage="6b0c", serial=3)


CASES = {f"plan_{name}": (lambda n=name: markdown.render_plan(finished(PLANS[n]()))) for name in PLANS}
CASES["drift"] = lambda: markdown.render_drift(_drift_report())
CASES["no_drift"] = lambda: markdown.render_drift(drift.DriftReport(drifted=[], pending=Plan([])))


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_golden(name):
    assert_golden(GOLDEN / f"{name}.md", CASES[name]())


def test_every_golden_has_a_case():
    stale = {p.name for p in GOLDEN.iterdir()} - {f"{n}.md" for n in CASES}
    assert not stale, f"golden files without a case: {sorted(stale)}"


def test_400_changed_workloads_fit_one_comment_with_complete_counts():
    out = markdown.render_plan(finished(big_plan(400)))
    assert len(out) <= markdown.GITHUB_LIMIT
    assert "**Plan:** 200 to create, 0 to update, 200 to replace," in out
    assert "| DistributedInference | 200 | 0 | 0 | 0 | 0 | 0 |" in out
    assert "| DistributedTraining | 0 | 0 | 200 | 0 | 0 | 0 |" in out
    assert "| **total** | **200** | **0** | **200** |" in out
    assert "This comment is shortened" in out
    m = re.search(r"(\d+) of 400 changed workloads are shown in detail", out)
    assert m and 0 < int(m.group(1)) < 400
    assert out.count("<details>") == int(m.group(1))
    assert out.count("<details>") == out.count("</details>")
    assert out.count("```") % 2 == 0, "no code block is cut in half"


def test_huge_plans_only_count_what_does_not_fit():
    out = markdown.render_plan(finished(big_plan(5000)))
    assert len(out) <= markdown.GITHUB_LIMIT
    assert "**Plan:** 2500 to create, 0 to update, 2500 to replace," in out
    assert re.search(r"…and \d+ more changed workloads, not listed\.", out)


def test_small_plans_are_not_shortened():
    out = markdown.render_plan(finished(big_plan(10)))
    assert "shortened" not in out and out.count("<details>") == 10


def test_backticks_in_values_do_not_break_the_code_block():
    rc = training("x", Action.CREATE, "new", after={"name": "x", "spec": {"command": "echo ```"}})
    out = markdown.render_plan(finished(Plan([rc])))
    assert "````diff" in out and out.count("````") == 2


def _gpu_plan(n: int, projects: int) -> Plan:
    """`n` inferences of 2 x (8 + 8) GPUs created across `projects` projects (ids 100...),
    the even ones with a quota of 16 (over it), the odd ones of 10,000."""
    changes = []
    for i in range(n):
        pid = str(100 + i % projects)
        body = inference_body(f"serve-{i:04d}", 2) | {"projectId": pid}
        changes.append(ResourceChange(
            address=f"DistributedInference/{pid}/serve-{i:04d}", kind="DistributedInference",
            name=f"serve-{i:04d}", project_id=pid, action=Action.CREATE, reason="new",
            after=body, desired_phase="Running"))
    plan = Plan(changes=sorted(changes, key=lambda rc: rc.address))
    plan.gpu_quotas = {str(100 + p): 16 if p % 2 == 0 else 10_000 for p in range(projects)}
    return plan


@pytest.mark.parametrize("projects", [1, 400])
def test_400_changed_workloads_with_gpu_impact_fit_one_comment_with_complete_counts(projects):
    out = markdown.render_plan(finished(_gpu_plan(400, projects)))
    assert len(out) <= markdown.GITHUB_LIMIT
    assert "**Plan:** 400 to create," in out
    assert "| **total** | **400** |" in out
    # Every project's GPUs are in the total, however many rows are listed.
    assert "| **total** | **0** | **12800** | **+12800** | | |" in out
    rows = re.findall(r"^\| (\d+) \| 0 \| (\d+) \| \+\d+ \| (\d+) \| (.*) \|$", out, re.M)
    if projects == 1:
        assert rows == [("100", "12800", "16", "**over quota by 12784**")]
    else:
        # 50 rows: the 200 projects over quota come first when not all fit.
        assert len(rows) == 50 and all(r[3] == "**over quota by 16**" for r in rows)
        assert "…and 350 more projects whose GPUs change (the total counts them)." in out
    assert "shortened" in out
    shown = out.count("<details>")
    assert out.count("· GPUs 0 → 32 (+32)</summary>") == shown > 0
