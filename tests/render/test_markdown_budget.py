"""The PR comment of a plan that changes only what the state records, at 2,000 workloads
(a team that sets `lifecycle.preventDestroy` in a folder's `_defaults.yaml`): one comment,
under GitHub's limit, with its counts complete."""

from __future__ import annotations

from reconciler.plans import Action, Plan, ResourceChange
from reconciler.render import markdown
from tests.helpers.finishing import finished

BODY = {"spec": {"image": "nvcr.io/nvidia/pytorch:24.05-py3", "compute": {"gpuDevicesRequest": 1}}}


def protected(n: int) -> Plan:
    names = [f"fine-tuning-job-for-the-support-team-{i:05d}" for i in range(n)]
    return Plan(changes=[ResourceChange(
        address=f"Training/7/{name}", kind="Training", name=name, project_id="7",
        action=Action.NOOP, reason="unchanged", before=BODY, after=BODY,
        state_changes=["lifecycle.preventDestroy"]) for name in names])


def test_2000_changes_to_the_state_alone_fit_one_comment_with_complete_counts():
    out = markdown.render_plan(finished(protected(2000)))
    assert len(out) <= markdown.GITHUB_LIMIT
    assert "**Plan:** 0 to create, 0 to update, 0 to replace, 0 to delete, 0 to suspend, " \
           "0 to resume, 2000 to record in the state." in out
    listed = [line for line in out.splitlines() if line.startswith("- Training/7/")]
    assert len(listed) == 100
    assert "- …and 1900 more (`runai-reconcile plan` lists them)" in out
    assert "\n\n\n" not in out


def test_a_few_are_all_listed():
    out = markdown.render_plan(finished(protected(3)))
    assert [line for line in out.splitlines() if line.startswith("- ")] == [
        f"- Training/7/fine-tuning-job-for-the-support-team-{i:05d}: lifecycle.preventDestroy"
        for i in range(3)]
