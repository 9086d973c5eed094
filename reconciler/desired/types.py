"""The loaded, validated form of one spec document (what the planner consumes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Lifecycle:
    prevent_destroy: bool = False
    ignore_changes: tuple[str, ...] = ()  # dotted paths, e.g. "spec.numWorkers"
    sensitive: tuple[str, ...] = ()  # dotted paths whose values are masked in output


@dataclass(frozen=True)
class DesiredWorkload:
    kind: str  # a key of reconciler.kinds.KINDS
    name: str
    project_id: str
    cluster_id: str
    # Exactly the API's create body: name, projectId, clusterId and the kind's body keys
    # (spec, masterSpec, masterSpecSameAsWorker), with None/absent fields dropped.
    # Never holds kind, desiredPhase or lifecycle.
    body: dict[str, Any]
    desired_phase: str = "Running"  # Running | Stopped
    lifecycle: Lifecycle = field(default_factory=Lifecycle)
    source: str = ""  # file path as given by the user
    line: int | None = None  # line of the document's first key

    @property
    def address(self) -> str:
        return f"{self.kind}/{self.project_id}/{self.name}"
