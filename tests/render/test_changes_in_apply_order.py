"""A plan lists its changes in the order apply takes them, in text and markdown: an
organisation's creates from the department down to the workloads, whatever their
addresses' alphabetical order, and deletes in reverse; a plan of workloads alone by
address."""

from __future__ import annotations

import re

from reconciler.plans import Action, Plan, ResourceChange
from reconciler.render import markdown as markdown_render
from reconciler.render import text as text_render
from tests.helpers.constants import CLUSTER
from tests.helpers.finishing import finished
from tests.helpers.policy import dt
from tests.helpers.quotas import unit


def _other(kind: str, name: str, action: Action = Action.CREATE) -> ResourceChange:
    after = None if action is Action.DELETE else {"name": name, "clusterId": CLUSTER}
    return ResourceChange(address=f"{kind}/{CLUSTER}/{name}", kind=kind, name=name,
                          project_id=CLUSTER, action=action, reason="new", after=after,
                          before=None if after else {"name": name},
                          desired_phase=None if after is None else "Running")


def _listed(plan: Plan) -> tuple[list[str], list[str]]:
    """The addresses in the text plan's headers and in the markdown's details, in order."""
    text = re.findall(r"^  # (\S+) ", text_render.render_plan(plan), re.M)
    markdown = re.findall(r"<b>(\S+)</b>", markdown_render.render_plan(plan))
    return text, markdown


def test_an_onboarding_lists_the_department_the_project_its_rule_and_policy_then_the_workload():
    plan = finished(Plan([
        _other("AccessRule", "a-team-rule"),
        dt("a-first-training"),
        _other("Policy", "training"),
        unit("team-s", None, {"default": (2, None)}, action=Action.CREATE, unit_id=None),
        unit("research", None, {"default": (8, None)}, kind="Department",
             action=Action.CREATE, unit_id=None)]))
    order = [f"Department/{CLUSTER}/research", f"Project/{CLUSTER}/team-s",
             f"AccessRule/{CLUSTER}/a-team-rule", f"Policy/{CLUSTER}/training",
             "DistributedTraining/7/a-first-training"]
    assert _listed(plan) == (order, order)


def test_deletes_go_in_reverse_the_workloads_then_the_rule_the_project_and_its_department():
    plan = finished(Plan([
        _other("AccessRule", "a-team-rule", Action.DELETE),
        unit("research", {"default": (8, None)}, None, kind="Department", unit_id="3",
             action=Action.DELETE),
        dt("a", Action.DELETE, before=dt("a").after),
        unit("team-s", {"default": (2, None)}, None, action=Action.DELETE),
        dt("z")]))
    order = ["DistributedTraining/7/a", "DistributedTraining/7/z",
             f"AccessRule/{CLUSTER}/a-team-rule", f"Project/{CLUSTER}/team-s",
             f"Department/{CLUSTER}/research"]
    assert _listed(plan) == (order, order)
