"""Quotas in every format a reviewer reads: a planned project's quota before and after per
node pool in the GPU impact, the quota warnings (text `Warning:` lines, JSON `warnings`,
markdown), and the markdown comment's own table of quota changes."""

from __future__ import annotations

from reconciler.plans import Action, Plan
from reconciler.render import json as json_render
from reconciler.render import markdown as markdown_render
from reconciler.render import text as text_render
from tests.helpers.constants import CLUSTER
from tests.helpers.finishing import finished
from tests.helpers.policy import dt
from tests.helpers.quotas import unit

PROJECT_AT = f"Project/{CLUSTER}/team-a"
BELOW = ("project 7 (team-a): quota lowered from 40 to 16 GPUs, below the 40 GPUs its "
         "workloads hold after apply")


def _lowered() -> Plan:
    """Team-a's quota lowered below the 40 GPUs of the training it keeps running, and a
    department whose two projects then deserve more than it does."""
    return finished(Plan([
        dt("a", Action.NOOP, before=dt("a").after),
        unit("team-a", {"default": (32, 48), "a100": (8, None)},
             {"default": (8, 48), "a100": (8, None)}, department="research"),
        unit("team-b", {"default": (4, None)}, {"default": (4, None)}, unit_id="9",
             action=Action.NOOP, department="research"),
        unit("research", {"default": (10, None)}, {"default": (10, None)}, kind="Department",
             unit_id="d1", action=Action.NOOP)]))


DEPARTMENT = ("department research: its projects' deserved GPUs in node pool default sum "
              "to 12 (team-a 8, team-b 4), past the department's 10")


def test_text_shows_the_quota_per_node_pool_and_the_warnings():
    out = text_render.render_plan(_lowered())
    assert ("  project 7 (team-a): 40 -> 40 (0), quota 40 -> 16: over quota by 24\n"
            "      node pool a100: deserved 8, limit none\n"
            "      node pool default: deserved 32 -> 8, limit 48\n") in out, out
    assert f"Warning: {DEPARTMENT}\nWarning: {BELOW}\n" in out
    assert out.index("Warning:") < out.index("Plan:")
    # Team-b's quota does not change: it is no news of this plan.
    assert "project 9" not in out


def test_json_carries_the_planned_quota_its_pools_and_the_warnings():
    doc = json_render.plan_document(_lowered())
    assert doc["warnings"] == [
        {"code": "department_quota_exceeded", "address": f"Department/{CLUSTER}/research",
         "message": DEPARTMENT},
        {"code": "quota_below_held", "address": PROJECT_AT, "message": BELOW}]
    seven = next(p for p in doc["gpu_impact"]["projects"] if p["project_id"] == "7")
    assert (seven["quota_before"], seven["quota"], seven["quota_below_held"]) == (40, 16, True)
    assert seven["planned_by"] == PROJECT_AT
    assert seven["node_pools"][1] == {"node_pool": "default",
                                      "deserved": {"before": 32, "after": 8},
                                      "limit": {"before": 48, "after": 48}}
    [changed] = doc["gpu_impact"]["quota_changes"]
    assert (changed["address"], changed["quota_of"], changed["project_id"]) == \
        (PROJECT_AT, "project", "7")
    # A plan of workloads alone has none of these members.
    doc = json_render.plan_document(finished(Plan([dt("a")])))
    assert "warnings" not in doc and "quota_changes" not in doc["gpu_impact"]
    assert "node_pools" not in doc["gpu_impact"]["projects"][0]


def test_markdown_has_a_table_of_quota_changes_and_the_warnings():
    out = markdown_render.render_plan(_lowered())
    assert ("**Quota changes** (GPUs per node pool, before → after apply):\n\n"
            "| unit | node pool | deserved | limit |\n|---|---|---:|---:|\n"
            "| Project `team-a` | a100 | 8 | none |\n"
            "| Project `team-a` | default | 32 → 8 | 48 |\n") in out, out
    assert "| 7 (team-a) | 40 | 40 | 0 | 40 → 16 | **over quota by 24** |" in out
    assert f"> **Warning:** {BELOW}" in out and f"> **Warning:** {DEPARTMENT}" in out


def test_a_read_quota_per_node_pool_is_shown_unchanged():
    plan = Plan([dt("a")])
    plan.gpu_quotas, plan.quota_pools = {"7": 64.0}, {"7": {"default": [64, None]}}
    out = text_render.render_plan(finished(plan))
    assert ("  project 7: 0 -> 40 (+40), quota 64\n"
            "      node pool default: deserved 64, limit none\n") in out, out
    [p] = json_render.plan_document(finished(plan))["gpu_impact"]["projects"]
    assert p["node_pools"] == [{"node_pool": "default", "deserved": {"before": 64, "after": 64},
                                "limit": {"before": None, "after": None}}]
    assert (p["planned_by"], p["quota_before"], p["quota_below_held"]) == (None, 64, False)


def test_a_project_the_plan_creates_is_named_new_in_the_gpu_impact_not_by_its_placeholder():
    """Its workload's project id is the placeholder `project=team-s` until apply knows
    the real one: the reviewer reads the project's name, marked new, in text and
    markdown, and no placeholder."""
    plan = finished(Plan([
        unit("team-s", None, {"default": (2, 4), "a100": (4, None)}, action=Action.CREATE,
             unit_id=None),
        dt("whisper", project="project=team-s", project_name="team-s", workers=1)]))
    text = text_render.render_plan(plan)
    assert "  project team-s (new): 0 -> 16 (+16), quota none -> 6: over quota by 10\n" in text, text
    markdown = markdown_render.render_plan(plan)
    assert "| team-s (new) | 0 | 16 | +16 | none → 6 | **over quota by 10** |" in markdown, markdown
    assert "project=team-s (" not in text + markdown
