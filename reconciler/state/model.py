"""The state file's data model (pure; reading, writing and locking live in `store`).

    {"version": 3, "lineage": "<uuid>", "serial": 3,
     "specs_folder": {"git": "specs", "state": "../specs", "path": "/abs/specs"},
     "hmac_key": "<base64 of 32 random bytes>",
     "resources": {"<address>": ResourceState, ...}}

`version` is the file format; `lineage` is fixed when a state is born and tells two
unrelated states apart; `serial` rises by one on every write that changes content.
`specs_folder` (version 2) is where the state was last applied from (`folders`): plan and
apply of another folder refuse to delete what only that one names. A state without it is
written as version 1, as before, so that an older runai-reconcile still reads it; one
with it says to an older one that a newer one wrote it.
`hmac_key` (version 3) is the key of the keyed hashes (`masking.hash_sensitive`) that
stand for the sensitive values of the `applied` bodies: made when the state first records
one, kept for the state's life, so that every machine applying this state hashes a value
alike. A state with it is written as version 3 (an older runai-reconcile would take the
hashes for values).
Callers: `store` (parse and serialise), the planner (the "L" of the three-way diff),
the executor (records each outcome) and the CLI's `state list|show|rm`.
"""

from __future__ import annotations

import base64
import copy
import secrets
import uuid
from dataclasses import dataclass, field, fields
from typing import Any

from reconciler import kinds
from reconciler.errors import StateError

STATE_VERSION = 3
SPECS_FOLDER_KEYS = ("git", "state", "path")  # `folders`: how a specs folder is identified


@dataclass
class ResourceState:
    kind: str
    name: str
    project_id: str
    cluster_id: str | None  # None: a resource in no cluster (a tenant's Run:ai policy)
    workload_id: str | None
    applied: dict[str, Any]  # the create body last applied (the "L" of the three-way diff)
    desired_phase: str = "Running"  # the phase we last asked for
    last_phase: str | None = None  # actualPhase last seen
    prevent_destroy: bool = False
    completed: bool = False  # a training seen Completed: not re-created if it disappears
    # The spec's lifecycle.sensitive paths, kept so that a plan deleting the workload
    # after its spec is gone still masks them.
    sensitive: list[str] = field(default_factory=list)
    project_name: str | None = None  # the project's name when known (older states lack it)
    # The fingerprint of the workload's list entry when it was last seen matching this
    # record (`listing.fingerprint`): while the list shows the same, `--refresh=auto`
    # does not GET it. None (older states, or not vouched for): it is read.
    listed: str | None = None

    @property
    def address(self) -> str:
        return kinds.address(self.kind, self.project_id, self.name)

    def to_json(self) -> dict[str, Any]:
        """The fields as a dict for `json.dumps`: `applied` is this record's own, not a copy.
        An unknown project name and a missing list fingerprint are left out (the file stays
        as older versions wrote it)."""
        out = {name: getattr(self, name) for name in _FIELD_NAMES}
        if out["project_name"] is None:
            del out["project_name"]
        if out["listed"] is None:
            del out["listed"]
        return out

    @classmethod
    def from_json(cls, data: Any, *, where: str = "resource") -> "ResourceState":
        """Build from parsed JSON; StateError naming `where` and the field when the shape is wrong.

        The record keeps `data`'s `applied` as it is (callers pass what `json.loads` just
        made, so a copy would only cost time)."""
        if not isinstance(data, dict):
            raise StateError(f"{where}: expected an object, got {_kind_of(data)}")
        unknown = sorted(set(data) - _FIELD_SET)
        if unknown:
            raise StateError(f"{where}: unknown field(s) {', '.join(unknown)}")
        for name, check, required in _RESOURCE_FIELDS:
            if name not in data:
                if required:
                    raise StateError(f"{where}.{name}: missing")
                continue
            if not check(data[name]):
                # A body's content is never quoted: it holds the secrets the state keeps.
                value = data[name]
                quoted = name != "applied" and not isinstance(value, (dict, list))
                got = repr(value) if quoted else _kind_of(value)
                raise StateError(
                    f"{where}.{name}: expected {_EXPECTED.get(check, _STR_LIST)}, got {got}")
        if data["kind"] not in kinds.KINDS:
            raise StateError(f"{where}.kind: unknown kind {data['kind']!r}; expected one of "
                             + ", ".join(sorted(kinds.KINDS)))
        return cls(**data)


_FIELD_NAMES = tuple(f.name for f in fields(ResourceState))
_FIELD_SET = frozenset(_FIELD_NAMES)


def _is_str(v: Any) -> bool:
    return isinstance(v, str) and v != ""


def _is_opt_str(v: Any) -> bool:
    return v is None or _is_str(v)


def _is_dict(v: Any) -> bool:
    return isinstance(v, dict)


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def _is_key(v: Any) -> bool:
    try:
        return isinstance(v, str) and len(base64.b64decode(v, validate=True)) == 32
    except ValueError:
        return False


def _is_serial(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


_EXPECTED = {
    _is_str: "a non-empty string",
    _is_opt_str: "a non-empty string or null",
    _is_dict: "an object",
    _is_bool: "true or false",
    _is_serial: "a non-negative integer",
}
_STR_LIST = "a list of non-empty strings"

_RESOURCE_FIELDS = (
    ("kind", _is_str, True),
    ("name", _is_str, True),
    ("project_id", _is_str, True),
    ("cluster_id", _is_opt_str, True),
    ("workload_id", _is_opt_str, True),
    ("applied", _is_dict, True),
    ("desired_phase", _is_str, False),
    ("last_phase", _is_opt_str, False),
    ("prevent_destroy", _is_bool, False),
    ("completed", _is_bool, False),
    ("sensitive", lambda v: isinstance(v, list) and all(_is_str(p) for p in v), False),
    ("project_name", _is_opt_str, False),
    ("listed", _is_opt_str, False),
)


def _kind_of(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", type(None): "null",
            bool: "a boolean"}.get(type(v), type(v).__name__)


@dataclass
class State:
    lineage: str = field(default_factory=lambda: str(uuid.uuid4()))
    serial: int = 0
    resources: dict[str, ResourceState] = field(default_factory=dict)
    # The format as read (not content: a write uses the oldest version that holds it).
    version: int = field(default=STATE_VERSION, compare=False)
    specs_folder: dict[str, str] | None = None  # where it was last applied from (`folders`)
    hmac_key: str | None = None  # base64 of the keyed hashes' key; None until one is made

    def secret_key(self, *, create: bool = False) -> bytes | None:
        """The key of this state's keyed hashes; made now when `create` and there is none
        (None otherwise: nothing hashed yet, and the records hold no hash to compare)."""
        if self.hmac_key is None:
            if not create:
                return None
            self.hmac_key = base64.b64encode(secrets.token_bytes(32)).decode()
        return base64.b64decode(self.hmac_key)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": 3 if self.hmac_key is not None else 1 if self.specs_folder is None
            else 2,
            "lineage": self.lineage,
            "serial": self.serial,
            "resources": {a: r.to_json() for a, r in sorted(self.resources.items())},
        }
        if self.specs_folder is not None:
            out["specs_folder"] = dict(sorted(self.specs_folder.items()))
        if self.hmac_key is not None:
            out["hmac_key"] = self.hmac_key
        return out

    @classmethod
    def from_json(cls, data: Any) -> "State":
        """Parse a decoded state document; StateError with the offending field otherwise.

        A `version` newer than this program's is refused rather than half understood.
        """
        if not isinstance(data, dict):
            raise StateError(f"expected a JSON object at the top, got {_kind_of(data)}")
        version = data.get("version")
        if not _is_serial(version) or version < 1:
            raise StateError(f"version: expected a positive integer, got {version!r}")
        if version > STATE_VERSION:
            raise StateError(
                f"state format version {version} was written by a newer runai-reconcile; "
                f"this one reads up to version {STATE_VERSION}")
        unknown = sorted(set(data) - {"version", "lineage", "serial", "resources",
                                      "specs_folder", "hmac_key"})
        if unknown:
            raise StateError(f"unknown top-level field(s) {', '.join(unknown)}")
        folder = data.get("specs_folder")
        if folder is not None and (
                version < 2 or not isinstance(folder, dict) or not folder
                or not set(folder) <= set(SPECS_FOLDER_KEYS)
                or not all(_is_str(v) for v in folder.values())):
            raise StateError(
                "specs_folder: expected an object of non-empty strings under "
                + ", ".join(SPECS_FOLDER_KEYS) + f" (state format version 2), got "
                + (repr(folder) if not isinstance(folder, (dict, list)) else _kind_of(folder)
                   if not isinstance(folder, dict) else "other keys or values"))
        key = data.get("hmac_key")
        if key is not None and (version < 3 or not _is_key(key)):
            raise StateError("hmac_key: expected the base64 of 32 bytes (state format "
                             "version 3)")
        if not _is_str(data.get("lineage")):
            raise StateError(f"lineage: expected a non-empty string, got {data.get('lineage')!r}")
        if not _is_serial(data.get("serial")):
            raise StateError(
                f"serial: expected a non-negative integer, got {data.get('serial')!r}")
        raw = data.get("resources", {})
        if not isinstance(raw, dict):
            raise StateError(f"resources: expected an object, got {_kind_of(raw)}")
        resources: dict[str, ResourceState] = {}
        for addr, item in raw.items():
            where = f"resources[{addr!r}]"
            rs = ResourceState.from_json(item, where=where)
            if rs.address != addr:
                raise StateError(
                    f"{where}: the address does not match its kind, project_id and name "
                    f"({rs.address!r})")
            resources[addr] = rs
        return cls(lineage=data["lineage"], serial=data["serial"], resources=resources,
                   version=version, specs_folder=dict(folder) if folder else None,
                   hmac_key=key)

    # --- conveniences for the engine and `state list|show|rm` ----------------------

    def addresses(self) -> list[str]:
        return sorted(self.resources)

    def get(self, address: str) -> ResourceState | None:
        return self.resources.get(address)

    def set(self, resource: ResourceState) -> None:
        """Record `resource` under its own address (replacing what was there)."""
        self.resources[resource.address] = resource

    def remove(self, address: str) -> ResourceState:
        """Forget `address`; StateError when the state does not hold it."""
        try:
            return self.resources.pop(address)
        except KeyError:
            raise StateError(f"no workload {address!r} in the state") from None

    def copy(self) -> "State":
        return copy.deepcopy(self)

    def same_content(self, other: "State") -> bool:
        """Equal apart from `serial`: a write of this over `other` would change nothing."""
        a, b = self.to_json(), other.to_json()
        a.pop("serial")
        b.pop("serial")
        return a == b
