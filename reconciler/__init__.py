"""runai-reconcile: Terraform-style plan/apply for NVIDIA Run:ai workloads.

Layers (inputs on the left, pure logic in the middle, effects on the right):

    desired/  (spec files)  ┐
    state/    (state file)  ├─> diff, planner ─> plans.Plan ─> render/ (text, json)
    api/      (live GETs)   ┘                         └──────> executor (api writes, state writes)

`cli` wires them together; `simulator` is the fake control plane.
"""

__version__ = "0.1.0"
