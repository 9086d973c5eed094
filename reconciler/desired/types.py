"""The loaded, validated form of one spec document (what the planner consumes)."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from reconciler import kinds

# What a spec's name and `project:` must be: a DNS-1123 label (the models check it with
# these, and `is_dns_label` for the names read from the API that a spec may give).
DNS_LABEL_RE = r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$"
DNS_LABEL_MAX = 63


def is_dns_label(text: str) -> bool:
    """Whether `text` may be a spec's name or `project:` (the models' rule)."""
    return len(text) <= DNS_LABEL_MAX and re.fullmatch(DNS_LABEL_RE, text) is not None


@dataclass(frozen=True)
class Lifecycle:
    prevent_destroy: bool = False
    ignore_changes: tuple[str, ...] = ()  # dotted paths, e.g. "spec.numWorkers"
    sensitive: tuple[str, ...] = ()  # dotted paths whose values are masked in output


@dataclass(frozen=True)
class DesiredWorkload:
    kind: str  # a key of reconciler.kinds.KINDS
    name: str
    # "" while a spec that names its project (`project: team-a`) is not resolved yet;
    # the operations fill it (`with_project_id`) before anything is planned.
    project_id: str
    cluster_id: str
    # Exactly the API's create body: name, projectId, clusterId and the kind's body keys
    # (spec, masterSpec, masterSpecSameAsWorker), with None/absent fields dropped.
    # Never holds kind, desiredPhase or lifecycle; no projectId until it is resolved.
    body: dict[str, Any]
    desired_phase: str = "Running"  # Running | Stopped
    lifecycle: Lifecycle = field(default_factory=Lifecycle)
    source: str = ""  # file path as given by the user
    line: int | None = None  # line of the document's first key
    project_name: str | None = None  # the spec's `project:`, or a name learnt for its id
    # (file, line) of a `project:` that a folder's `_defaults.yaml` gave, where an error
    # about the name points; None when the spec itself says it (or says projectId)
    project_at: tuple[str, int | None] | None = field(default=None, compare=False)
    # what the loader warns of in this spec (or the folder defaults it takes), as
    # "file:line: field: message"; not part of the workload's identity or its state
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @property
    def address(self) -> str:
        """`Kind/<project id>/<name>`. Before its project is resolved, a `project:` spec
        has the provisional `Kind/project=<name>/<name>` (never a real address: project
        ids are digits), which is enough to find two specs of the same project name."""
        project = self.project_id or f"project={self.project_name}"
        return f"{self.kind}/{project}/{self.name}"

    @property
    def listed_name(self) -> str:
        """The name under which the API lists what this spec describes (its `name`, or as
        its kind's hooks say: an access rule's identity, as the server keeps no name)."""
        kind = kinds.get(self.kind)
        return kind.hooks.listed_name(kind, self.body)

    @property
    def resolved(self) -> bool:
        return bool(self.project_id)

    def with_project_id(self, project_id: str) -> "DesiredWorkload":
        """This workload in the project `project_id` (its name's resolution)."""
        return dataclasses.replace(self, project_id=project_id,
                                   body={**self.body, "projectId": project_id})


def duplicate_addresses(keys: list[tuple[str, str, int | None]],
                        ) -> list[tuple[str, int | None, str]]:
    """(source, line, message) for each address defined again, and for each name used
    again in one project by another kind (the API's names are unique per project across
    kinds), given the (address, source, line) of every workload in file order: the
    message names the first place."""
    first: dict[str, tuple[str, int | None]] = {}
    named: dict[tuple[str, str], tuple[str, str, int | None]] = {}
    found = []
    for address, source, line in keys:
        if address in first:
            other, other_line = first[address]
            found.append((source, line, f"duplicate address {address}: already defined at "
                          f"{_where(other, other_line)}"))
            continue
        first[address] = (source, line)
        kind, project, name = address.split("/", 2)
        if (project, name) in named:
            other_address, other, other_line = named[(project, name)]
            found.append((source, line, f"name {name!r} is already used in this project by "
                          f"{other_address} at {_where(other, other_line)} (names are unique "
                          "per project across kinds)"))
        else:
            named[(project, name)] = (address, source, line)
    return found


def _where(source: str, line: int | None) -> str:
    return source if line is None else f"{source}:{line}"
