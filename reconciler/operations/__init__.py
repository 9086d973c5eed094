"""The operations behind the commands, one module per family: `planning` (validate,
plan, and what plan, apply and drift share), `judging` (policy rules, and the finished
plan), `reuse` (what watch keeps between plans), `applying` (apply a specs folder or a
saved plan, show), `drifting`, `importing` (import), `exporting` (export), `specfiles` (writing
spec files), `states` (the state commands) and `watching` (watch: the engine as a
controller, with `specfolder`, what it reads of the specs, and `reporting`, what each cycle
says).

Each takes plain inputs (a specs folder, a state store, a client factory, options) and
returns plain results (a `PlanResult`, an `executor.ApplyResult`, a `drift.DriftReport`,
...); it loads the specs, reads and locks the state, refreshes live, plans, recovers and
executes, in the order and with the overlap the command needs. What only a command line
can do comes in as callbacks: `on_event(message)` for progress lines and
`approve(plan) -> bool` between the plan and its execution (it shows the plan and asks).
Caller: `reconciler.cli`, which turns flags into these inputs and renders the results
(`operations.plan(...)`, `operations.apply(...)`, ...: the names below).
"""

from reconciler.operations.applying import apply, apply_saved, show
from reconciler.operations.drifting import drift
from reconciler.operations.exporting import Exported, ExportOptions, ExportResult, export
from reconciler.operations.importing import ImportResult, import_all, import_workload
from reconciler.operations.judging import finish, load_policy, policy_refusal, refuse_denied
from reconciler.operations.planning import (
    PlanOptions,
    PlanResult,
    interrupted,
    plan,
    validate,
)
from reconciler.operations.states import (
    Migrated,
    force_unlock,
    never_written,
    state_history,
    state_list,
    state_migrate,
    state_restore,
    state_rm,
    state_show,
)
from reconciler.operations.watching import WatchOptions, watch

__all__ = [
    "ExportOptions", "ExportResult", "Exported", "ImportResult", "Migrated", "PlanOptions",
    "PlanResult", "apply", "apply_saved", "drift", "export", "finish", "force_unlock",
    "import_all", "import_workload", "interrupted", "load_policy", "never_written", "plan",
    "policy_refusal", "refuse_denied", "show", "state_history",
    "state_list", "state_migrate", "state_restore", "state_rm", "state_show", "validate",
    "WatchOptions", "watch",
]
