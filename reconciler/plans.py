"""Plans as data: the action enum, field changes, one change per address, the plan.

Produced by `planner`, consumed by `render/*` and `executor`. Nothing here computes a
diff or talks to anything.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


class Action(str, enum.Enum):
    CREATE = "create"
    UPDATE = "update"
    REPLACE = "replace"
    DELETE = "delete"
    SUSPEND = "suspend"
    RESUME = "resume"
    NOOP = "no-op"


# action_reason values
REASON_NEW = "new"                            # in specs, never created
REASON_SPEC_CHANGED = "spec_changed"          # D != L
REASON_DRIFT = "drift"                        # D == L, R != L
REASON_DELETED_OUTSIDE = "deleted_outside"    # in state, gone from live, not completed
REASON_REMOVED = "removed_from_specs"         # in state, not in specs
REASON_PHASE = "phase_changed"                # desiredPhase changed in specs
REASON_PHASE_DRIFT = "phase_drift"            # suspended/resumed outside
REASON_REPLACE_REQUESTED = "replace_by_request"
REASON_COMPLETED = "completed"                # training completed: left alone
REASON_UNCHANGED = "unchanged"
REASON_GONE = "already_gone"                  # not in specs and already gone from live
REASON_DESTROY = "destroy_requested"          # plan --destroy
REASON_INTERRUPTED = "interrupted_apply"      # gone while a killed apply's delete/create was open


@dataclass
class FieldChange:
    path: str  # dotted, keyed list items in brackets: spec.environmentVariables[HF_HOME].value
    before: Any  # None when absent
    after: Any  # None when absent (removed)
    drift: bool = False  # changed outside the reconciler (D == L, R != L)
    forces_replacement: bool = False


@dataclass
class ResourceChange:
    address: str
    kind: str
    name: str
    project_id: str
    action: Action
    reason: str
    changes: list[FieldChange] = field(default_factory=list)
    workload_id: str | None = None  # live id when one exists
    before: dict[str, Any] | None = None  # live create-body fields (or state's when not refreshed)
    after: dict[str, Any] | None = None  # desired create body (None for delete)
    desired_phase: str | None = None  # None when not in specs
    live_phase: str | None = None
    # For UPDATE: the PATCH body, only the changed updatable fields with full values.
    patch: dict[str, Any] | None = None
    # Addresses of this plan's deletions that free the name this change creates (another
    # kind with the same project and name): run them, and wait until gone, first.
    waits_for: list[str] = field(default_factory=list)
    # Found live under the spec's name but not in the state (first run against existing
    # workloads, or a lost state): apply records it in the state instead of creating it.
    adopted: bool = False
    # The spec's lifecycle.sensitive paths (renderers mask values at or under them) and
    # lifecycle.ignoreChanges paths (the diff already left them out); empty without a spec.
    sensitive: tuple[str, ...] = ()
    ignore_changes: tuple[str, ...] = ()
    project_name: str | None = None  # the project's name when known (spec or state)
    # For a no-op: the lifecycle flags that only the state records and that the spec
    # changed (`lifecycle.preventDestroy`, `lifecycle.sensitive`); apply records them.
    state_changes: list[str] = field(default_factory=list)

    @property
    def changes_state(self) -> bool:
        """Apply changes the state for it: an action, an adoption or a lifecycle flag."""
        return self.action is not Action.NOOP or self.adopted or bool(self.state_changes)

    @property
    def replace_paths(self) -> list[str]:
        return [c.path for c in self.changes if c.forces_replacement]

    @property
    def is_drift(self) -> bool:
        return self.reason in (REASON_DRIFT, REASON_PHASE_DRIFT, REASON_DELETED_OUTSIDE)


@dataclass
class Plan:
    changes: list[ResourceChange]  # sorted by address; every address in specs or state
    lineage: str | None = None
    serial: int | None = None
    targets: list[str] = field(default_factory=list)
    # The GPU quota of each project of the plan as `operations` read them (None: not
    # read, as with --no-refresh; a project's None: unknown); kept in a saved plan.
    gpu_quotas: dict[str, float | None] | None = None
    # The names of those projects as the same reads gave them (what policy rules that
    # name a project match, beside the names the specs and the state know); kept too.
    project_names: dict[str, str] | None = None
    # With --target: per project id, the GPUs its workloads outside the targets hold as the
    # state has them (`gpus.held_elsewhere`: low, high, memory low, memory high), which
    # apply does not change but its totals and quota count; kept in a saved plan.
    gpu_elsewhere: dict[str, list[float]] | None = None
    # Its `gpus.GpuImpact` (plans sits below gpus: not typed here), made from the changes
    # and `gpu_quotas` on first use by `gpus.impact_of`, which keeps it here.
    gpu_impact: Any = field(default=None, compare=False)
    # The `policy.Report` of the rules checked on this plan (`--policy`), None without any.
    policy: Any = None

    def __repr__(self) -> str:
        # Short: asyncio (3.11) formats the repr of its main task's result on the way out
        # of asyncio.run; the dataclass repr would print every change.
        counts = ", ".join(f"{n} {a}" for a, n in self.counts().items() if n)
        return f"<Plan lineage={self.lineage} serial={self.serial}: {counts or 'empty'}>"

    def actionable(self) -> list[ResourceChange]:
        return [c for c in self.changes if c.action is not Action.NOOP]

    def state_only(self) -> list[ResourceChange]:
        """No-ops that still change the state: adoptions and lifecycle flags."""
        return [c for c in self.changes if c.action is Action.NOOP and c.changes_state]

    @property
    def has_changes(self) -> bool:
        """Anything to apply: an API action, or a change to the state alone (Terraform
        counts imports as changes too)."""
        return any(c.changes_state for c in self.changes)

    def counts(self) -> dict[str, int]:
        return counts(self.changes)


def counts(changes: Iterable[ResourceChange]) -> dict[str, int]:
    """Workloads per action, plus `adopt` (found live, taken into the state; an adoption
    may also have an action) and `state_only` (no-ops whose lifecycle flags only the state
    records change). For a plan, and for what an apply did (`executor.ApplyResult`)."""
    out = {a.value: 0 for a in Action}
    out[ADOPT] = out[STATE_ONLY] = 0
    for c in changes:
        out[c.action.value] += 1
        if c.adopted:
            out[ADOPT] += 1
        elif c.action is Action.NOOP and c.state_changes:
            out[STATE_ONLY] += 1
    return out


# The two counts of changes to the state alone, beside the actions' counts.
ADOPT = "adopt"
STATE_ONLY = "state_only"
