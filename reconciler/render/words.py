"""What every renderer says the same way: symbols, headers, value encoding, masking.

Pure helpers over `plans` objects; callers are `render.text` and `render.json` (and
the markdown renderer to come), so that a symbol or a phrase changes in one place.
"""

from __future__ import annotations

import json
import re
from typing import Any

from reconciler import plans
from reconciler.plans import Action, ResourceChange

SYMBOLS = {
    Action.CREATE: "+",
    Action.UPDATE: "~",
    Action.REPLACE: "-/+",
    Action.DELETE: "-",
    Action.SUSPEND: "<",
    Action.RESUME: ">",
}

LEGEND = {
    Action.CREATE: "create",
    Action.UPDATE: "update in place",
    Action.REPLACE: "replace (delete, then create)",
    Action.DELETE: "delete",
    Action.SUSPEND: "suspend",
    Action.RESUME: "resume",
}

# The order of the summary line.
SUMMARY_ORDER = (Action.CREATE, Action.UPDATE, Action.REPLACE, Action.DELETE,
                 Action.SUSPEND, Action.RESUME)

_OUTSIDE = "outside runai-reconcile"

_HEADERS: dict[tuple[Action, str | None], str] = {
    (Action.CREATE, None): "will be created",
    (Action.CREATE, plans.REASON_DELETED_OUTSIDE): f"was deleted {_OUTSIDE} and will be re-created",
    (Action.UPDATE, None): "will be updated in place",
    (Action.UPDATE, plans.REASON_DRIFT): f"was changed {_OUTSIDE} (drift) and will be updated in place",
    (Action.REPLACE, None): "must be replaced",
    (Action.REPLACE, plans.REASON_DRIFT): f"was changed {_OUTSIDE} (drift) and must be replaced",
    (Action.REPLACE, plans.REASON_REPLACE_REQUESTED): "will be replaced, as requested",
    (Action.REPLACE, plans.REASON_DELETED_OUTSIDE):
        f"was deleted {_OUTSIDE} and will be re-created",
    (Action.DELETE, None): "will be destroyed",
    (Action.DELETE, plans.REASON_REMOVED): "will be destroyed: it is no longer in the specs",
    (Action.SUSPEND, None): "will be suspended",
    (Action.SUSPEND, plans.REASON_PHASE_DRIFT): f"was resumed {_OUTSIDE} (drift) and will be suspended",
    (Action.RESUME, None): "will be resumed",
    (Action.RESUME, plans.REASON_PHASE_DRIFT): f"was suspended {_OUTSIDE} (drift) and will be resumed",
}


def header(rc: ResourceChange) -> str:
    """`# <address> will be ...`, with the drift said in words when it is drift."""
    phrase = _HEADERS.get((rc.action, rc.reason)) or _HEADERS[(rc.action, None)]
    return f"# {rc.address} {phrase}"


def encode(value: Any) -> str:
    """A value as it appears in text: JSON, on one line, keys sorted."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def leaves(body: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Flatten nested objects into (dotted path, value); lists stay whole values."""
    out: list[tuple[str, Any]] = []
    for key in sorted(body):
        value = body[key]
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict) and value:
            out.extend(leaves(value, path))
        else:
            out.append((path, value))
    return out


def phase_change(rc: ResourceChange) -> plans.FieldChange | None:
    """For a suspend or resume whose plan lists no `desiredPhase` change, the one it implies."""
    if rc.action not in (Action.SUSPEND, Action.RESUME):
        return None
    if any(c.path == "desiredPhase" for c in rc.changes):
        return None
    before, after = ("Running", "Stopped") if rc.action is Action.SUSPEND else ("Stopped", "Running")
    return plans.FieldChange("desiredPhase", before, after,
                             drift=rc.reason == plans.REASON_PHASE_DRIFT)


def drifted_paths(rc: ResourceChange) -> list[str]:
    """The paths changed outside the reconciler: drifted field changes, phase drift."""
    paths = [c.path for c in rc.changes if c.drift]
    if rc.reason == plans.REASON_PHASE_DRIFT and "desiredPhase" not in paths:
        paths.append("desiredPhase")
    return paths


# --- sensitive values ---------------------------------------------------------------
#
# DESIGN.md: environment variable values whose names look like secrets are masked in
# every output format (the state keeps them). Paths a spec marks sensitive are not in
# the plan yet, so only the name rule applies here.

MASK = "(sensitive value)"
_SECRET_NAME = re.compile(
    r"secret|token|passw(or)?d|pwd|credential|api[_-]?key|access[_-]?key|private[_-]?key",
    re.IGNORECASE)
_ENV_ITEM = re.compile(r"environmentVariables\[(?P<name>[^\]]*)\](?P<rest>.*)$")


def secret_name(name: Any) -> bool:
    return isinstance(name, str) and bool(_SECRET_NAME.search(name))


def mask_body(value: Any) -> Any:
    """A copy of `value` with the `value` of secret-looking environment variables masked."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "environmentVariables" and isinstance(v, list):
                out[k] = [_mask_env_item(item) for item in v]
            else:
                out[k] = mask_body(v)
        return out
    if isinstance(value, list):
        return [mask_body(v) for v in value]
    return value


def _mask_env_item(item: Any) -> Any:
    if isinstance(item, dict) and secret_name(item.get("name")) and item.get("value") is not None:
        return {**item, "value": MASK}
    return mask_body(item)


def mask_at(path: str, value: Any) -> Any:
    """`value` found at dotted `path`, masked when it is (or holds) a secret env value."""
    if value is None:
        return None
    m = _ENV_ITEM.search(path)
    if m and secret_name(m.group("name")):
        if m.group("rest") == ".value":
            return MASK
        if m.group("rest") == "" and isinstance(value, dict):
            return _mask_env_item(value)
    if path.endswith("environmentVariables") and isinstance(value, list):
        return [_mask_env_item(item) for item in value]
    return mask_body(value)
