"""User-facing errors of the reconciler.

    ReconcileError                 anything the CLI reports as one clear message and exit 1
    ├── SpecError                  spec files are invalid (holds every problem at once)
    ├── StateError                 the state file is unreadable, locked, of another lineage ...
    ├── PlanError                  a plan cannot be made (preventDestroy, bad --target ...)
    ├── PolicyFileError            policy files are invalid (holds every problem at once)
    └── PolicyDenied               the plan breaks a deny rule of the policy: not applied

API errors live in `reconciler.api.errors` and are translated at the CLI boundary.
"""

from __future__ import annotations


class ReconcileError(Exception):
    """An error the CLI prints as is (no traceback) before exiting 1."""


class SpecError(ReconcileError):
    """One or more problems in the spec files; `problems` holds each one's message, and
    `valid` (when the loader counted them) how many workload specs had none of their own."""

    def __init__(self, problems: list[str], *, valid: int | None = None):
        self.problems = list(problems)
        self.valid = valid
        super().__init__("\n".join(self.problems))


class StateError(ReconcileError):
    pass


class PlanError(ReconcileError):
    pass


class PolicyFileError(ReconcileError):
    """One or more problems in the policy files (`--policy`); `problems` holds each one."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class PolicyDenied(ReconcileError):
    """The plan breaks a deny rule: apply refuses it before any write. `plan` is the plan
    refused (its `policy` report names the violations), for the CLI to show."""

    def __init__(self, message: str, plan):
        self.plan = plan
        super().__init__(message)
