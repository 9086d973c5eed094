"""Taking an existing live workload into the state without touching it: what `import`
checks and what it records (pure).

`mismatches` says where a live workload (a GET body) differs from the address it is to
be recorded under (kind, project id, name); `record` is the state record written for it:
the workload id, its phase, and as the last applied body what a person would have
written (`export.spec_from_live`), not the raw live body. A raw body would make every
server default and generated value a path that L has and D lacks, read by the three-way
diff as "the user removed it": a perpetual change. (Finding the workloads `import --all`
adopts is `reconciler.live.workloads`', shared with the plan.)
Callers: `operations.import_workload` and `operations.import_all`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from reconciler import export, kinds, masking, phases
from reconciler.desired.types import DesiredWorkload
from reconciler.state.model import ResourceState


def mismatches(address: str, found_kind: str, live: Mapping[str, Any]) -> list[str]:
    """What differs between `address` and the live workload (of `found_kind`), each as
    `its kind is X, not Y`; empty when it matches."""
    kind, project_id, name = kinds.parse_address(address)
    out = []
    if found_kind != kind:
        out.append(f"its kind is {found_kind}, not {kind}")
    live_project = _str(live.get("projectId"))
    if live_project != project_id:
        hint = "" if project_id.isdigit() else " (an address gives the project's id, not its name)"
        out.append(f"its project is {live_project}, not {project_id}{hint}")
    if live.get("name") != name:
        out.append(f"its name is {live.get('name')!r}, not {name!r}")
    return out


def applied_body(kind: kinds.Kind, live: Mapping[str, Any]) -> dict[str, Any]:
    """The create body a person would have written for `live`: `export.spec_from_live`'s
    spec without the reconciler's own controls, and with the project as its id (the
    address and every recorded body hold the id). Secret values are kept (`record`
    hashes them for the state)."""
    spec = export.spec_from_live(kind.name, dict(live), include_secrets=True)
    body = {key: spec[key] for key in ("name", "clusterId", *kind.body_keys) if key in spec}
    # A spec that says its name otherwise (a Run:ai policy's is its workload type) still
    # has one in the body, as an applied one does.
    if "name" not in body and live.get("name") is not None:
        body["name"] = live["name"]
    body["projectId"] = _str(live.get("projectId"))
    return body


def record(kind: kinds.Kind, live: Mapping[str, Any], *,
           desired: DesiredWorkload | None = None,
           key: Callable[[], bytes] | None = None) -> ResourceState:
    """The state record of the live workload, as if it had just been applied as it is.

    With `desired` (its spec, for `import --all`) the lifecycle flags and the project's
    name come from the spec; the body and the phase always come from live, so that the
    next plan shows where the spec differs from what runs. `key` gives the state's key
    (`State.secret_key`): the sensitive values are recorded as its keyed hashes. A
    resource the server keeps no name for (an access rule) is recorded under its spec's."""
    if desired is not None:
        live = kind.hooks.addressed(kind, dict(live), desired.name)
    rec = ResourceState(
        kind=kind.name, name=str(live.get("name")), project_id=_str(live.get("projectId")),
        cluster_id=str(live["clusterId"]) if live.get("clusterId") else None,
        workload_id=str(live.get("workloadId")),
        applied=applied_body(kind, live),
        desired_phase=phases.STOPPED if phases.live_suspended(live) else phases.RUNNING,
        last_phase=live.get("actualPhase"),
        completed=phases.live_completed(live))
    if desired is not None:
        rec.prevent_destroy = desired.lifecycle.prevent_destroy
        rec.sensitive = list(desired.lifecycle.sensitive)
        rec.project_name = desired.project_name
    if key is not None and masking.has_sensitive(rec.applied, rec.sensitive):
        rec.applied = masking.hash_sensitive(rec.applied, rec.sensitive, key())
    return rec


def _str(v: Any) -> str:
    """An id as the address spells it (CONTRACT.md §2: projectId may come as a number)."""
    return "" if v is None else str(v)
