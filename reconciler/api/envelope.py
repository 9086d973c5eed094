"""The wire shape of a kind whose bodies are enveloped (`Kind.envelope == "metadata"`: the
v2 NIM family, CONTRACT.md §12), to and from the flat bodies the engine works with.

The engine's body of every kind is flat: `name`, `projectId`, `clusterId` beside the
kind's body keys (`spec`), and a live body adds `workloadId`, `createdAt`, `desiredPhase`
and so on. A NIM service's create body is `{metadata: {name, projectId}, spec}` (no
clusterId: the project names the cluster), its update body `{spec}` (the planner's
update body already), and its answer `{metadata: {id, name, projectId, clusterId,
createdAt, updatedAt, ...}, desiredPhase, spec}`. Caller: `reconciler.api.client`, on
each request of such a kind; a flat kind's bodies pass through unchanged.
"""

from __future__ import annotations

from typing import Any

from reconciler.kinds import Kind

# The create metadata's keys (NIMServiceMetadataCreateParams).
_CREATE_METADATA = ("name", "projectId", "useGivenNameAsPrefix")


def create_body(kind: Kind, body: dict) -> dict:
    """What the API takes for creating `body` of `kind`."""
    if kind.envelope != "metadata":
        return body
    out: dict[str, Any] = {"metadata": {k: body[k] for k in _CREATE_METADATA if k in body}}
    for key in kind.body_keys:
        if key in body:
            out[key] = body[key]
    return out


def flat(kind: Kind, answer: Any) -> Any:
    """The engine's flat body of an API answer of `kind` (a create, get or update)."""
    if kind.envelope != "metadata" or not isinstance(answer, dict):
        return answer
    meta = answer.get("metadata")
    if not isinstance(meta, dict):
        return answer
    out: dict[str, Any] = {}
    for key, value in meta.items():
        out["workloadId" if key == "id" else key] = value
    for key, value in answer.items():
        if key != "metadata":
            out[key] = value
    return out
