"""The state file's data model (pure; reading and writing live in `store`).

    {"version": 1, "lineage": "<uuid>", "serial": 3,
     "resources": {"<address>": ResourceState, ...}}
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

STATE_VERSION = 1


@dataclass
class ResourceState:
    kind: str
    name: str
    project_id: str
    cluster_id: str
    workload_id: str | None
    applied: dict[str, Any]  # the create body last applied (the "L" of the three-way diff)
    desired_phase: str = "Running"  # the phase we last asked for
    last_phase: str | None = None  # actualPhase last seen
    prevent_destroy: bool = False
    completed: bool = False  # a training seen Completed: not re-created if it disappears

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ResourceState":
        return cls(**data)


@dataclass
class State:
    lineage: str = field(default_factory=lambda: str(uuid.uuid4()))
    serial: int = 0
    resources: dict[str, ResourceState] = field(default_factory=dict)
    version: int = STATE_VERSION

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "lineage": self.lineage,
            "serial": self.serial,
            "resources": {a: r.to_json() for a, r in sorted(self.resources.items())},
        }
