"""Plans as data: the action enum, field changes, one change per address, the plan, and
what a finished plan carries beside its changes: its GPU impact and its policy results.

Produced by `planner` (the changes), `gpus` (`GpuImpact`) and `policy` (`Report`), put
together by the planning operation (`operations`' plan finishing); consumed by `render/*`,
`planfile` and `executor`. Nothing here computes a diff, GPUs or a rule, or talks to
anything: a renderer needs only this module's types to read a finished plan.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal


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
REASON_PROJECT_REPLACED = "project_replaced"  # its project is replaced: created again in the new one


@dataclass
class FieldChange:
    path: str  # dotted, keyed list items in brackets: spec.environmentVariables[HF_HOME].value
    before: Any  # None when absent
    after: Any  # None when absent (removed)
    drift: bool = False  # changed outside the reconciler (D == L, R != L)
    forces_replacement: bool = False
    # Present live only, and not the server's: added outside the reconciler (D and L
    # absent, R present; drift too). `before` is what was added, `after` None: apply
    # removes it.
    added: bool = False


@dataclass(frozen=True)
class DryRun:
    """The server's verdict on a write the plan would send, from its dry run (a Run:ai
    policy's PUT with `validateOnly=true`, `Codec.dry_run_request`): `accepted`,
    `refused` (a refusal fails the plan; `message` is the server's, naming the rule it
    rejects) or `unchecked` (`message` says why: the project the policy is on does not
    exist yet)."""
    verdict: str
    message: str = ""


DRY_RUN_REFUSED = "refused"


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
    # For a workload changed outside the reconciler (drift, a phase or a deletion outside):
    # the body as last applied (the state's), what it was before the change outside.
    applied: dict[str, Any] | None = None
    # What is known only after apply: body path -> the address of this plan's create
    # whose id it is (a workload's `projectId`, when the same plan creates its project).
    # Until then its address names the project by name (`Kind/project=<name>/<name>`).
    known_after: dict[str, str] = field(default_factory=dict)
    # For a delete or replace: what goes with it (a project's namespace, the live
    # workloads in it), as outputs list it.
    takes_with: list[str] = field(default_factory=list)
    # For a replace whose old resource another change of this plan deletes with its own
    # (a workload in a project the plan replaces): that change's address. Apply sends no
    # delete of its own: it waits for the old one to be gone, then creates.
    goes_with: str | None = None
    # The server's dry run of this change's write (None: its type has none, or the plan
    # was made without the API).
    dry_run: DryRun | None = None

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


# --- a plan's GPU impact (made by `gpus.impact`) ------------------------------------


def tidy(x: float) -> float:
    # Sums of portions such as 0.1 + 0.2 carry binary noise; GPUs are never finer than 1e-9.
    return round(x, 9)


@dataclass(frozen=True)
class Gpus:
    """GPUs held (whole devices, or fractions with portion requests) and GPU memory in
    bytes (memory-type requests), at the fewest pods (`low`) and the most (`high`): the
    two ends differ only for an autoscaled Inference. `unknown`: some GPU count or size
    of the body could not be read (a live body the API or a damaged file holds: `lots`,
    `-8`, `8.5` devices): the numbers leave it out, and the amount is not known."""
    low: float = 0
    high: float = 0
    memory_low: float = 0
    memory_high: float = 0
    unknown: bool = False

    def __add__(self, other: Gpus) -> Gpus:
        return Gpus(tidy(self.low + other.low), tidy(self.high + other.high),
                    self.memory_low + other.memory_low, self.memory_high + other.memory_high,
                    self.unknown or other.unknown)

    @property
    def is_range(self) -> bool:
        return self.low != self.high or self.memory_low != self.memory_high


NO_GPUS = Gpus()


@dataclass(frozen=True)
class WorkloadGpus:
    """One workload of the plan: the GPUs it holds before apply (live, or the state's
    body with --no-refresh) and after it (its spec; none once deleted or suspended)."""
    address: str
    kind: str
    name: str
    project_id: str
    project_name: str | None
    action: Action
    before: Gpus
    after: Gpus

    @property
    def moves(self) -> bool:
        """Apply changes what it holds."""
        return self.before != self.after


@dataclass(frozen=True)
class PoolQuota:
    """One node pool's GPU quota of an organisation unit, before and after apply (None:
    not given, or no unit then: created, deleted)."""
    pool: str
    deserved_before: float | None = None
    deserved_after: float | None = None
    limit_before: float | None = None
    limit_after: float | None = None

    @property
    def changes(self) -> bool:
        return (self.deserved_before, self.limit_before) != (self.deserved_after,
                                                             self.limit_after)


@dataclass(frozen=True)
class QuotaChange:
    """An organisation unit the plan acts on, whose GPU quota it provides (a project's, a
    department's: `unit`): its quota per node pool before and after apply, by pool name."""
    address: str
    kind: str
    name: str
    unit: str  # what the quota bounds: "project" | "department"
    action: Action
    pools: tuple[PoolQuota, ...] = ()
    # The project's id, when it has one (the id its workloads' addresses hold).
    project_id: str | None = None

    @property
    def changes(self) -> bool:
        return any(p.changes for p in self.pools)


@dataclass(frozen=True)
class QuotaWarning:
    """What the plan does to quotas that a reviewer should see, not an error: a project's
    quota lowered below the GPUs its workloads hold (`BELOW_HELD`), a department's projects'
    deserved GPUs past the department's in a node pool (`DEPARTMENT_OVER`)."""
    code: str
    address: str  # the unit's address
    message: str


BELOW_HELD = "quota_below_held"
DEPARTMENT_OVER = "department_quota_exceeded"


def project_words(project_id: str, name: str | None) -> str:
    """A project as outputs name it: `project 7 (team-a)`, `project 7`; one the plan
    creates (no id yet, or its workloads' placeholder id `project=<name>`) by its name:
    `project team-a (new)`."""
    if name and (not project_id or project_id.startswith("project=")):
        return f"project {name} (new)"
    return f"project {project_id}" + (f" ({name})" if name else "")


@dataclass(frozen=True)
class ProjectImpact:
    """One project of the plan: the total GPUs of its workloads that the specs and the
    state know (not the project's other workloads), before and after apply, and its GPU
    quota (the `gpu.deserved` of its node-pool resources; None when unknown: not read with
    --no-refresh, the project not found or not readable). `unknown`: why it is unknown
    when its read failed or gave no quota (None when known, or not read at all)."""
    project_id: str
    project_name: str | None
    before: Gpus
    after: Gpus
    quota: float | None = None
    unknown: str | None = None
    # Where the plan acts on the project itself (a `Project` spec: `planned_by` its
    # address), `quota` is the planned one (the sum of its pools' deserved after apply) and
    # `quota_before` the one before (live, or the state's with --no-refresh); elsewhere
    # both are the read one. `pools`: its quota per node pool, when the plan holds it.
    quota_before: float | None = None
    pools: tuple[PoolQuota, ...] = ()
    planned_by: str | None = None

    @property
    def moves(self) -> bool:
        return self.before != self.after

    @property
    def quota_changes(self) -> bool:
        return self.quota != self.quota_before or any(p.changes for p in self.pools)

    @property
    def lowered(self) -> bool:
        """The plan lowers its (known) quota."""
        return (self.quota is not None and self.quota_before is not None
                and self.quota < self.quota_before)

    @property
    def below_held(self) -> bool:
        """The plan lowers its quota below the GPUs its workloads hold after apply (at
        their most pods, as `over_quota`)."""
        return self.lowered and self.after.high > (self.quota or 0)

    @property
    def over_quota(self) -> bool:
        """The planned total exceeds the quota: at its most pods (an autoscaled Inference
        at maxReplicas), so a plan that may exceed it is flagged."""
        return self.quota is not None and self.after.high > self.quota


@dataclass(frozen=True)
class GpuImpact:
    """A plan's GPU impact. `workloads`: every workload of the plan, no-ops included,
    sorted by address (what each holds after apply is what per-workload rules check);
    `projects`: one per project of the plan, by project id (digits: "9" before "12").
    `quotas_read`: whether the quotas were asked of the API (not with --no-refresh);
    `quotas`: the organisation units whose quota the plan changes; `warnings`: what it does
    to quotas that is no error."""
    workloads: list[WorkloadGpus] = field(default_factory=list)
    projects: list[ProjectImpact] = field(default_factory=list)
    quotas_read: bool = False
    # The organisation units the plan acts on whose quota it changes, by address; and the
    # warnings about quotas (`QuotaWarning`), by address.
    quotas: list[QuotaChange] = field(default_factory=list)
    warnings: list[QuotaWarning] = field(default_factory=list)

    @property
    def moves(self) -> bool:
        """Some workload's GPUs change with apply."""
        return any(w.moves for w in self.workloads)

    def project(self, project_id: str) -> ProjectImpact | None:
        return next((p for p in self.projects if p.project_id == project_id), None)

    def workload(self, address: str) -> WorkloadGpus | None:
        return next((w for w in self.workloads if w.address == address), None)


# --- a plan's policy results (made by `policy.evaluate`) -----------------------------

Enforcement = Literal["deny", "warn"]


@dataclass(frozen=True)
class Violation:
    address: str  # a workload's address, `project <id>` or `plan`
    message: str  # the whole line: "<address>: rule <name> (<check> <limit>): <what>"
    # The rule could not be checked there (a quota that could not be read): the message
    # says which read failed; it counts as a violation (the rule's `onUnknown: fail`).
    unknown: bool = False


@dataclass(frozen=True)
class RuleResult:
    name: str
    check: str  # the rule key, e.g. maxGpusPerWorkload
    limit: Any  # its value as the file gave it
    enforcement: Enforcement
    source: str = ""  # the file that defines it
    violations: tuple[Violation, ...] = ()  # what the plan breaks (or could not check)
    notes: tuple[str, ...] = ()  # what it could not check, or let pass, and why
    checked: bool = True  # False: it had nothing it could check (every quota unknown)
    # Broken by workloads (or projects) the plan leaves as they are: listed, never failing
    # the plan (`scope: changed`, the default).
    preexisting: tuple[Violation, ...] = ()
    scope: str = "changed"
    on_unknown: str = "fail"
    description: str = ""  # `maxGpusPerWorkload 16`: the check and its limit in words

    @property
    def status(self) -> str:
        """passed | failed (deny, violated) | warned (warn, violated) | unchecked."""
        if not self.violations:
            return "passed" if self.checked else "unchecked"
        return "failed" if self.enforcement == "deny" else "warned"


@dataclass(frozen=True)
class Report:
    rules: tuple[RuleResult, ...] = ()
    files: tuple[str, ...] = ()  # the policy files, as given

    @property
    def passed(self) -> bool:
        """No deny rule was broken: apply may go ahead."""
        return not self.failed

    @property
    def failed(self) -> list[RuleResult]:
        return [r for r in self.rules if r.status == "failed"]

    @property
    def warned(self) -> list[RuleResult]:
        return [r for r in self.rules if r.status == "warned"]

    @property
    def preexisting(self) -> int:
        return sum(len(r.preexisting) for r in self.rules)

    def ordered(self) -> list[RuleResult]:
        """Failures first, then warnings, then the rules that passed (file order within)."""
        rank = {"failed": 0, "warned": 1, "unchecked": 2, "passed": 3}
        return sorted(self.rules, key=lambda r: rank[r.status])

    def summary(self) -> str:
        """`2 rules: 1 failed, 1 passed` (the words every renderer uses), then the
        pre-existing violations when there are any: `; 2 pre-existing violations`."""
        n = len(self.rules)
        counts = [(sum(r.status == s for r in self.rules), s)
                  for s in ("failed", "warned", "unchecked", "passed")]
        old = self.preexisting
        return (f"{n} rule{'s' if n != 1 else ''}: "
                + ", ".join(f"{k} {word}" for k, word in counts if k)
                + (f"; {old} pre-existing violation{'s' if old != 1 else ''}" if old else ""))


@dataclass
class Plan:
    changes: list[ResourceChange]  # sorted by address; every address in specs or state
    lineage: str | None = None
    serial: int | None = None
    targets: list[str] = field(default_factory=list)
    # The GPU quota of each project of the plan as `operations` read them (None: not
    # read, as with --no-refresh; a project's None: unknown); kept in a saved plan.
    gpu_quotas: dict[str, float | None] | None = None
    # Per project id whose quota is None there: why (the read that failed, or what its
    # answer lacked); what a policy rule that could not be checked says. Kept too.
    quota_unknown: dict[str, str] | None = None
    # The names of those projects as the same reads gave them (what policy rules that
    # name a project match, beside the names the specs and the state know); kept too.
    project_names: dict[str, str] | None = None
    # Their GPU quotas per node pool as the same reads gave them: project id -> pool name
    # -> [deserved, limit] (None where not given); kept too.
    quota_pools: dict[str, dict[str, list[float | None]]] | None = None
    # The projects live in the plan's departments that the plan does not hold: department
    # address -> project name -> node pool -> GPU deserved (what a department's sum counts
    # beside its projects of the plan); kept too.
    department_projects: dict[str, dict[str, dict[str, float | None]]] | None = None
    # With --target: per project id, the GPUs its workloads outside the targets hold as the
    # state has them (`gpus.held_elsewhere`: low, high, memory low, memory high), which
    # apply does not change but its totals and quota count; kept in a saved plan.
    gpu_elsewhere: dict[str, list[float]] | None = None
    # What finishing the plan (the planning operation, after the changes) puts on it, and
    # all that the renderers read of GPUs and policy: its GPU impact (`gpus.impact`), None
    # until it is finished; and the results of the rules checked on it (`policy.evaluate`,
    # `--policy`), None without any.
    gpu_impact: GpuImpact | None = field(default=None, compare=False)
    policy: Report | None = None

    def __repr__(self) -> str:
        # Short: asyncio (3.11) formats the repr of its main task's result on the way out
        # of asyncio.run; the dataclass repr would print every change.
        counts = ", ".join(f"{n} {a}" for a, n in self.counts().items() if n)
        return f"<Plan lineage={self.lineage} serial={self.serial}: {counts or 'empty'}>"

    @functools.cached_property
    def acting(self) -> list[ResourceChange]:
        """Its changes that change the state (`ResourceChange.changes_state`: an action, an
        adoption or a lifecycle flag), in plan order: all that acting on it looks at, the
        plain no-ops left out. Worked out once (a plan's changes are not changed once it
        is made): a watch reuses an unchanged fleet's plan cycle after cycle."""
        return [c for c in self.changes if c.changes_state]

    @property
    def impact(self) -> GpuImpact:
        """Its GPU impact; a plan that was never finished is a programming error."""
        if self.gpu_impact is None:
            raise ValueError("the plan was not finished: its GPU impact was never made "
                             "(operations' planning finishes every plan it makes)")
        return self.gpu_impact

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
