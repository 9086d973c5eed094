"""Plans built from tests/helpers/examples.py's for more than one area: `big_plan(n)`, n
changed workloads (the markdown comment's size limit, the policy rendering), and
`saved_plan()`, a saved plan with every field set (the plan-file encoding, tampering)."""

from __future__ import annotations

from reconciler import planfile
from reconciler.desired.types import DesiredWorkload, Lifecycle
from reconciler.plans import Action, FieldChange, Plan
from tests.helpers.examples import PLANS, inference, inference_body, training, training_body


def big_plan(n: int) -> Plan:
    changes = []
    for i in range(n):
        name = f"job-{i:04d}"
        if i % 2:
            changes.append(training(name, Action.REPLACE, "spec_changed",
                                    before=training_body(name), after=training_body(name, "img:2"),
                                    changes=[FieldChange("spec.image", "img:1", "img:2",
                                                         forces_replacement=True)]))
        else:
            changes.append(inference(name, Action.CREATE, "new", after=inference_body(name, 2)))
    return Plan(changes=sorted(changes, key=lambda rc: rc.address))


def saved_plan() -> planfile.SavedPlan:
    plan = PLANS["mixed"]()
    plan.changes[0].sensitive = ("spec.args",)
    desired = [DesiredWorkload("DistributedInference", "llama-70b-serve", "7", "c1",
                               inference_body("llama-70b-serve", 4),
                               lifecycle=Lifecycle(True, ("spec.replicas",), ("spec.args",)),
                               source="specs/serve.yaml", line=1)]
    return planfile.SavedPlan(plan=plan, desired=desired,
                              live={plan.changes[0].address: "sha256:ab", "x": planfile.ABSENT},
                              replace=["DistributedTraining/7/llama-ft-ddp"])
