"""Policy results in the three renderers: failures first, the words of the text, the
markdown's "Policy" section within GitHub's budget, json's `policy` object."""

from __future__ import annotations

import re

from reconciler import policy
from reconciler.plans import Action, Plan
from reconciler.render import json as json_render
from reconciler.render import markdown
from reconciler.render import text as text_render
from tests.helpers.policy import dt, rules
from tests.helpers.finishing import finished
from tests.helpers.plans import big_plan

RULES = ({"name": "cap", "maxGpusPerWorkload": 16},
         {"name": "registries", "allowedImages": ["nvcr.io/*"], "enforcement": "warn"},
         {"name": "blast", "maxDestructive": 500})


def checked(plan: Plan, *entries: dict) -> Plan:
    return finished(plan, rules(*(entries or RULES)))


def test_text_lists_failures_then_warnings_after_the_summary():
    out = text_render.render_plan(checked(big_plan(4)))
    tail = out[out.index("Plan: "):].splitlines()
    assert tail[2] == ("Policy failed (policy.yaml): 3 rules: 1 failed, 1 warned, 1 passed; "
                       "apply refuses a plan that breaks a deny rule.")
    marks = [line.split()[0] for line in tail[3:]]
    assert marks == ["FAIL"] * 4 + ["WARN"] * 4  # the trainings become img:2
    assert tail[3] == ("  FAIL DistributedInference/7/job-0000: rule cap (maxGpusPerWorkload 16): "
                       "32 GPUs")


def test_a_plan_without_changes_shows_what_its_workloads_break_as_pre_existing():
    steady = dt("steady", Action.NOOP)
    plan = checked(Plan([steady]), {"name": "cap", "maxGpusPerWorkload": 16})
    assert plan.policy.passed
    text = text_render.render_plan(plan)
    assert "No changes." in text and "FAIL" not in text
    assert "Policy passed (policy.yaml): 1 rule: 1 passed; 1 pre-existing violation." in text
    assert ("WARN (pre-existing) DistributedTraining/7/steady: rule cap (maxGpusPerWorkload "
            "16): 40 GPUs") in text
    md = markdown.render_plan(plan)
    assert "#### Policy" in md and "| `cap` | `maxGpusPerWorkload 16` | deny | passed | 0 (+1 pre-existing) |" in md
    assert "- pre-existing `DistributedTraining/7/steady: rule cap" in md


def test_400_changed_workloads_with_policy_results_fit_one_comment_with_complete_counts():
    out = markdown.render_plan(checked(big_plan(400)))
    assert len(out) <= markdown.GITHUB_LIMIT
    assert "**Plan:** 200 to create, 0 to update, 200 to replace," in out
    assert "| **total** | **200** | **0** | **200** |" in out
    section = out[out.index("#### Policy"):out.index("> **This comment is shortened**")]
    assert "**Policy failed (policy.yaml): 3 rules: 1 failed, 1 warned, 1 passed;" in section
    rows = re.findall(r"^\| `(\S+)` \| .* \| (\w+) \| (\S+) \| (\d+) \|$", section, re.M)
    assert rows == [("cap", "deny", "**failed**", "400"),
                    ("registries", "warn", "**warned**", "400"),
                    ("blast", "deny", "passed", "0")]
    listed = re.findall(r"^- \*\*(failed|warned)\*\* ", section, re.M)
    # The 40 lines are shared: each rule broken has examples, failures first.
    assert listed == ["failed"] * 20 + ["warned"] * 20
    assert "- …and 760 more (`runai-reconcile show PLANFILE` lists them all)" in section
    assert out.count("<details>") == out.count("</details>") > 0


def test_markdown_keeps_globs_and_pipes_from_breaking_the_table():
    plan = checked(Plan([dt("a", image="docker.io/x:1")]),
                   {"name": "a|b", "allowedImages": ["nvcr.io/*_x"]})
    out = markdown.render_plan(plan)
    assert r"| `a\|b` | `allowedImages nvcr.io/*_x` | deny | **failed** | 1 |" in out
    assert ('- **failed** `DistributedTraining/7/a: rule a|b (allowedImages nvcr.io/*_x): '
            'spec.image "docker.io/x:1"`') in out


def test_json_has_the_policy_only_when_a_policy_was_given():
    assert "policy" not in json_render.plan_document(finished(big_plan(2)))
    doc = json_render.plan_document(checked(big_plan(2)))
    assert doc["format_version"] == "1.10"
    assert doc["policy"]["passed"] is False
    assert doc["policy"]["files"] == ["policy.yaml"]
    assert [r["status"] for r in doc["policy"]["rules"]] == ["failed", "warned", "passed"]
    assert doc["policy"]["rules"][0]["limit"] == 16
