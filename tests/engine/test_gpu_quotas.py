"""Quotas in the GPU impact (pure): a project the plan holds as a spec gives its quota
per node pool before and after apply, and that planned quota is the one its workloads
are counted against; a quota lowered below the GPUs held and a department whose projects
deserve more than it does are warnings; the units themselves hold no project's GPUs."""

from __future__ import annotations

from reconciler import gpus, kinds
from reconciler.plans import BELOW_HELD, DEPARTMENT_OVER, Action, Plan, PoolQuota
from tests.helpers.constants import CLUSTER
from tests.helpers.policy import dt
from tests.helpers.quotas import unit


def test_the_project_entry_declares_the_quota_it_provides_and_workloads_none():
    assert kinds.get("Project").provides_quota == "project"
    assert kinds.get("Department").provides_quota == "department"
    assert kinds.get("Training").provides_quota is None
    assert kinds.get("Training").in_project and not kinds.get("Project").in_project


def test_a_planned_project_shows_its_quota_per_node_pool_before_and_after():
    plan = Plan([dt("a"), unit("team-a", {"default": (32, 48), "a100": (16, None)},
                               {"default": (24, 48), "a100": (16, None)})])
    plan.gpu_quotas = {"7": 48.0}  # the live read: what the plan replaces with its own
    found = gpus.impact_of(plan)
    [p] = found.projects  # the unit is no workload of a project named by its cluster
    assert p.project_id == "7" and p.project_name == "team-a"
    assert (p.quota_before, p.quota) == (48, 40)
    assert p.planned_by == f"Project/{CLUSTER}/team-a"
    assert p.pools == (PoolQuota("a100", 16, 16, None, None),
                       PoolQuota("default", 32, 24, 48, 48))
    assert [w.address for w in found.workloads] == ["DistributedTraining/7/a"]
    [q] = found.quotas
    assert q.unit == "project" and q.project_id == "7" and q.changes
    # 40 GPUs against the planned 40: not over; against the live 32 of default it would be.
    assert not p.over_quota and found.warnings == []


def test_lowering_a_quota_below_the_gpus_held_is_a_warning():
    held = dt("a", Action.NOOP, before=dt("a").after)  # 40 GPUs, running, left alone
    plan = Plan([held, unit("team-a", {"default": (48, None)}, {"default": (16, None)})])
    found = gpus.impact_of(plan)
    [p] = found.projects
    assert p.lowered and p.below_held and p.over_quota
    [w] = found.warnings
    assert w.code == BELOW_HELD and w.address == f"Project/{CLUSTER}/team-a"
    assert w.message == ("project 7 (team-a): quota lowered from 48 to 16 GPUs, below the "
                         "40 GPUs its workloads hold after apply")


def test_a_quota_lowered_but_still_above_held_or_raised_is_no_warning():
    held = dt("a", Action.NOOP, before=dt("a").after)
    for before, after in (((48, None), (40, None)), ((8, None), (16, None))):
        found = gpus.impact_of(Plan([held, unit("team-a", {"default": before},
                                                {"default": after})]))
        assert found.warnings == [], (before, after)


def test_a_project_whose_workloads_the_plan_does_not_know_is_listed_with_its_quota():
    found = gpus.impact_of(Plan([unit("team-b", {"default": (8, None)}, {"default": (4, None)},
                                      unit_id="12")]))
    [p] = found.projects
    assert p.project_id == "12" and (p.quota_before, p.quota) == (8, 4) and p.quota_changes
    assert not p.below_held  # it holds nothing the plan knows


def test_a_project_the_plan_creates_has_no_quota_before():
    found = gpus.impact_of(Plan([unit("team-c", None, {"default": (4, 8)},
                                      action=Action.CREATE, unit_id=None)]))
    [p] = found.projects
    assert p.project_id == "" and p.project_name == "team-c"
    assert (p.quota_before, p.quota) == (None, 4) and not p.lowered
    assert p.pools == (PoolQuota("default", None, 4, None, 8),)


def test_a_department_whose_projects_deserve_more_than_it_does_is_a_warning():
    research = {"default": (8, None), "a100": (4, None)}
    plan = Plan([
        unit("research", research, research, kind="Department", action=Action.NOOP,
             unit_id="d1"),
        unit("team-a", {"default": (4, None)}, {"default": (6, None), "a100": (2, None)},
             department="research"),
        unit("team-b", {"default": (4, None)}, {"default": (4, None)}, unit_id="9",
             action=Action.NOOP, department="research"),
        unit("team-x", {"default": (50, None)}, {"default": (50, None)}, unit_id="10",
             action=Action.NOOP, department="elsewhere")])
    [w] = gpus.impact_of(plan).warnings
    assert w.code == DEPARTMENT_OVER and w.address == f"Department/{CLUSTER}/research"
    assert w.message == ("department research: its projects' deserved GPUs in node pool "
                         "default sum to 10 (team-a 6, team-b 4), past the department's 8")


def test_a_department_sum_the_plan_does_not_touch_is_not_its_news():
    same = {"default": (8, None)}
    plan = Plan([unit("research", same, same, kind="Department", action=Action.NOOP),
                 unit("team-a", {"default": (9, None)}, {"default": (9, None)},
                      action=Action.NOOP, department="research")])
    assert gpus.impact_of(plan).warnings == []


def test_a_projects_read_gives_its_quota_per_node_pool_by_name():
    body = {"resources": [
        {"nodePool": {"id": "1", "name": "default"}, "gpu": {"deserved": 16, "limit": None}},
        {"nodePool": {"id": "2", "name": "a100"}, "gpu": {"deserved": 4, "limit": 8}},
        {"nodePool": {"id": "3", "name": "odd"}, "gpu": {"deserved": "lots"}},
        {"nodePool": {"id": "4"}, "gpu": {"deserved": 1}}]}  # no name: not shown
    assert gpus.read_pools(body) == {"default": [16, None], "a100": [4, 8],
                                     "odd": [None, None]}
    assert gpus.read_pools({"resources": "none"}) == {} and gpus.read_pools(None) == {}


def test_a_project_the_plan_does_not_hold_shows_its_read_quota_per_node_pool_unchanged():
    plan = Plan([dt("a")])
    plan.gpu_quotas, plan.quota_pools = {"7": 20.0}, {"7": {"default": [16, 24], "a100": [4, None]}}
    [p] = gpus.impact_of(plan).projects
    assert p.pools == (PoolQuota("a100", 4, 4, None, None), PoolQuota("default", 16, 16, 24, 24))
    assert not p.quota_changes and p.planned_by is None and (p.quota_before, p.quota) == (20, 20)


def test_workloads_of_a_project_the_plan_creates_count_against_its_planned_quota():
    # Until apply knows the new project's id, its workloads hold another in their address
    # and name the project: they are counted with it, and the quota rules find it by that id.
    plan = Plan([dt("a", project="new", project_name="team-c"),
                 unit("team-c", None, {"default": (16, None)}, action=Action.CREATE,
                      unit_id=None)])
    [p] = gpus.impact_of(plan).projects
    assert (p.project_id, p.project_name, p.after.high, p.quota) == ("new", "team-c", 40, 16)
    assert p.over_quota and not p.below_held  # a new quota lowers nothing


def test_a_departments_sum_counts_its_projects_live_that_the_plan_does_not_hold():
    # Lowering the department to 8: its one project of the plan deserves 4, but two more
    # live in it that are no specs (read with the plan) deserve 3 and 2 more.
    plan = Plan([unit("research", {"default": (16, None)}, {"default": (8, None)},
                      kind="Department", unit_id="d1"),
                 unit("team-a", {"default": (4, None)}, {"default": (4, None)},
                      action=Action.NOOP, department="research")])
    plan.department_projects = {f"Department/{CLUSTER}/research": {
        "team-y": {"default": 2, "a100": 8}, "team-z": {"default": 3}}}
    [w] = gpus.impact_of(plan).warnings
    assert w.message == ("department research: its projects' deserved GPUs in node pool "
                         "default sum to 9 (team-a 4, team-y 2, team-z 3), past the "
                         "department's 8")
