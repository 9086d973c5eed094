"""The quota rules on built plans (pure): `withinProjectQuota` judges a project the plan
holds against its planned quota, not the live one, and `quotaNotBelowHeld` denies a
quota lowered below the GPUs its workloads hold."""

from __future__ import annotations

import pytest

from reconciler import policy
from reconciler.plans import Action, Plan
from tests.helpers.constants import CLUSTER
from tests.helpers.finishing import finished
from tests.helpers.policy import dt, rules
from tests.helpers.quotas import unit

PROJECT_AT = f"Project/{CLUSTER}/team-a"


def check(plan: Plan, *entries: dict) -> policy.Report:
    return finished(plan, rules(*entries)).policy


def messages(report: policy.Report) -> list[str]:
    return [v.message for r in report.rules for v in r.violations]


def _held() -> Plan:
    """Project 7 (team-a) with one training of 40 GPUs the plan leaves running."""
    return Plan([dt("a", Action.NOOP, before=dt("a").after)])


def test_within_project_quota_judges_the_planned_quota_not_the_live_one():
    # Live 64 would pass the new 40-GPU training; the plan lowers it to 32.
    plan = Plan([dt("a"), unit("team-a", {"default": (64, None)}, {"default": (32, None)})])
    plan.gpu_quotas = {"7": 64.0}
    assert messages(check(plan, {"name": "quota", "withinProjectQuota": True})) == [
        "project 7 (team-a): rule quota (withinProjectQuota): 40 GPUs planned (now 0), quota "
        "32 as planned (lowered by this plan)"]
    # Live 32 would fail it; the plan raises it to 48.
    plan = Plan([dt("a"), unit("team-a", {"default": (32, None)}, {"default": (48, None)})])
    plan.gpu_quotas = {"7": 32.0}
    report = check(plan, {"name": "quota", "withinProjectQuota": True})
    assert report.passed and messages(report) == []


def test_a_quota_lowered_below_what_a_project_holds_breaks_within_project_quota():
    # The plan raises no GPUs: the lowered quota is its doing all the same.
    plan = _held()
    plan.changes.append(unit("team-a", {"default": (48, None)}, {"default": (16, None)}))
    report = check(plan, {"name": "quota", "withinProjectQuota": True})
    assert not report.passed and len(messages(report)) == 1


def test_the_planned_quota_needs_no_read_with_no_refresh():
    # gpu_quotas None: not read (--no-refresh); the spec says the quota all the same.
    plan = Plan([dt("a"), unit("team-a", {"default": (64, None)}, {"default": (64, None)},
                               action=Action.NOOP)])
    report = check(plan, {"name": "quota", "withinProjectQuota": True})
    assert report.passed and report.rules[0].status == "passed"


def test_quota_not_below_held_denies_a_quota_lowered_below_the_gpus_held():
    plan = _held()
    plan.changes.append(unit("team-a", {"default": (48, 64)}, {"default": (16, 64)}))
    report = check(plan, {"name": "keep", "quotaNotBelowHeld": True})
    assert not report.passed
    assert [(v.address, v.message) for v in report.rules[0].violations] == [(
        PROJECT_AT, "project 7 (team-a): rule keep (quotaNotBelowHeld): quota lowered from 48 "
                    "to 16 GPUs, below the 40 GPUs its workloads hold")]
    warned = check(plan, {"name": "keep", "quotaNotBelowHeld": True, "enforcement": "warn"})
    assert warned.passed and warned.rules[0].status == "warned"


@pytest.mark.parametrize("before, after", [(48, 40), (8, 16), (48, 48)])
def test_quota_not_below_held_lets_a_quota_at_or_above_held_or_not_lowered_pass(before, after):
    plan = _held()
    plan.changes.append(unit("team-a", {"default": (before, None)}, {"default": (after, None)}))
    report = check(plan, {"name": "keep", "quotaNotBelowHeld": True})
    assert report.passed and messages(report) == []


def test_quota_not_below_held_follows_match_projects():
    plan = _held()
    plan.changes.append(unit("team-a", {"default": (48, None)}, {"default": (16, None)}))
    other = check(plan, {"name": "keep", "quotaNotBelowHeld": True,
                         "match": {"projects": ["team-b"]}})
    assert other.passed
    named = check(plan, {"name": "keep", "quotaNotBelowHeld": True,
                         "match": {"projects": ["team-a"]}})
    assert not named.passed


def test_quota_not_below_held_is_a_rule_of_the_policy_file_taking_true_or_false():
    [source] = rules({"name": "keep", "quotaNotBelowHeld": True})
    assert source.rule.check == "quotaNotBelowHeld"
    for value in ("yes", 1.5):
        with pytest.raises(ValueError, match="quotaNotBelowHeld"):
            rules({"name": "keep", "quotaNotBelowHeld": value})
    with pytest.raises(ValueError, match="one rule key"):
        rules({"name": "keep", "quotaNotBelowHeld": True, "withinProjectQuota": True})


def test_within_project_quota_judges_a_project_the_plan_creates_by_its_planned_quota():
    plan = Plan([dt("a", project="new", project_name="team-c"),
                 unit("team-c", None, {"default": (16, None)}, action=Action.CREATE,
                      unit_id=None)])
    assert messages(check(plan, {"name": "quota", "withinProjectQuota": True})) == [
        "project new (team-c): rule quota (withinProjectQuota): 40 GPUs planned (now 0), "
        "quota 16"]
