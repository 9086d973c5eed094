"""The apply result document (`apply --format json`): one outcome per change that changes
anything, the counts, and every field documented in docs/plan-format.md."""

from __future__ import annotations

import re

from reconciler import executor
from reconciler.plans import Action
from reconciler.render import json as json_render
from tests.helpers.finishing import finished
from tests.helpers import examples
from tests.helpers.constants import ROOT

DOC = ROOT / "docs" / "plan-format.md"


def _result() -> executor.ApplyResult:
    """The mixed plan, interrupted by a second signal: some done, one failed, one unknown,
    one not started."""
    plan = finished(examples.PLANS["mixed"]())
    todo = [c for c in plan.changes if c.changes_state]
    done, failed, unknown, waiting = todo[0], todo[1], todo[2], todo[3:]
    return executor.ApplyResult(
        plan=plan, interrupted=True, signal=15,
        outcomes=[executor.Outcome(done.address, done.action, True, workload_id="w-1"),
                  executor.Outcome(failed.address, failed.action, False, "409 conflict")],
        unknown=[executor.Outcome(unknown.address, unknown.action, False,
                                  "delete done; create sent, no answer",
                                  status=executor.UNKNOWN)],
        not_started=[c.address for c in waiting])


def test_each_change_has_its_outcome_and_the_summary_counts_them():
    result = _result()
    doc = json_render.apply_document(result)
    outcomes = {o["address"]: o for o in doc["outcomes"]}
    assert list(outcomes) == sorted(c.address for c in result.plan.changes if c.changes_state)
    (failed,) = [o for o in doc["outcomes"] if o["outcome"] == "failed"]
    assert failed["error"] == "409 conflict" and failed["detail"] is None
    (unknown,) = [o for o in doc["outcomes"] if o["outcome"] == "unknown"]
    assert unknown["detail"] == "delete done; create sent, no answer"
    assert unknown["error"] is None
    assert doc["summary"]["done"] == 1 and doc["summary"]["failed"] == 1
    assert doc["summary"]["unknown"] == 1
    assert doc["summary"]["not_started"] == len(result.not_started)
    done = result.outcomes[0]
    assert doc["summary"][done.action.value] == 1
    assert doc["signal"] == "SIGTERM" and doc["interrupted"] is True
    assert doc["plan"] == json_render.plan_document(result.plan)


def test_every_field_of_the_apply_result_is_documented():
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Apply result"):text.index("## Saved plans")]
    documented = set(re.findall(r"`([a-z_\[\].-]+)`", section))
    doc = json_render.apply_document(_result())
    keys = set(doc) | {f"outcomes[].{k}" for k in doc["outcomes"][0]}
    keys |= set(doc["summary"])
    missing = sorted(k for k in keys if k not in documented
                     and k.split(".")[-1] not in documented)
    assert not missing, f"fields missing from the Apply result section: {missing}"
    assert {a.value for a in Action} - {"no-op"} <= documented
