"""Saved plans: the versioned file `plan --out FILE` writes and `apply FILE` / `show FILE` read.

Kept apart from the `plans` model, like opentofu's `plans/planfile`: this module owns the
encoding only. A saved plan holds everything `apply` needs without the spec files:

    {"format": "runai-reconcile-plan", "version": 3, "plan_id": "<uuid>",
     "created_at": "<UTC ISO 8601>", "runai_reconcile_version": "0.1.0",
     "state": {"lineage": ..., "serial": ...,      # the state the plan was made against
               "digest": "sha256:..."},            # ... its records and open journal intents
     "options": {"targets": [...], "replace": [...], "destroy": false, "refresh": true},
     "changes": [<ResourceChange>, ...],           # the actions, with the desired bodies
     "desired": [<DesiredWorkload>, ...],          # phase and lifecycle flags for the state
     "live": {"<address>": "sha256:..." | "absent"},  # what each live read found
     "gpu_quotas": {"<project id>": 8 | null},    # as read; absent when not read
     "quota_unknown": {"<project id>": "..."},    # why a quota read gave none
     "project_names": {"<project id>": "team-a"},  # the names those reads gave
     "quota_pools": {"<project id>": {"<pool>": [8, null]}},  # their quotas per node pool
     "department_projects": {"<address>": {"<project>": {"<pool>": 8}}},  # others' deserved
     "gpu_elsewhere": {"<project id>": [8, 8, 0, 0]},  # with --target: the others' GPUs
     "policy": {...},                              # the policy results, with --policy
     "specs_folder": {"git": "specs", ...},       # the folder it was made from (not --target)
     "secrets": {"mode": "encrypted" | "resolve",  # how its sensitive values are held
                 "hmac_key": "<base64>", "specs": "/abs/specs"},
     "digest": "sha256:..."}                       # of every other field: a hand edit shows

One pydantic model of the document (`_Document`) decodes it: a field of the wrong type is
a damaged file, refused with its path, before the digest is compared. Files of another
version are refused with a message saying which (version 1, before the policy's scope and
`onUnknown`, and before `quota_unknown`; version 2, which held sensitive values in clear:
make the plan again).

Sensitive values (`masking.is_masked`, with each change's `sensitive` paths) are never in
the file in clear. In the bodies apply sends (`after`, `patch`, the desired bodies) each
one is, with a key (`RUNAI_RECONCILE_PLAN_KEY`, `plan_key`), AES-256-GCM encrypted
(`aes-256-gcm:<base64 of nonce and ciphertext>`, a random nonce per value, the plan id,
address and path as associated data), or without one its keyed hash (`masking.keyed_hash`
with the plan's own random `hmac_key`); everywhere else (the live `before`, the field
changes) its keyed hash. `reveal` gives the values back for `apply FILE`: decrypted with
the key, or read again from the specs (`secrets.specs`) and refused when one's hash is
not the one the plan recorded.
The plan's GPU impact is made again from the changes, `gpu_quotas`, `quota_unknown`,
`project_names`, `quota_pools` and `department_projects` when the operation that read
the file finishes the plan, so `show` renders the same block as `plan` did. The `live` fingerprints let `apply FILE` re-read
the workloads it acts on and refuse
when one changed since the plan (`live_problems`); `state_problems` refuses a plan made
against another lineage, serial or digest (a run killed after the plan leaves journal
entries that change the records without moving the serial; files without a digest,
from before it was recorded, are judged on lineage and serial). The file is written with
mode 0600: it holds the desired bodies, their sensitive values encrypted or hashed (above),
never an API token. `digest` is the
sha256 of the document without it (`content_digest`): a file edited after it was written
(a failed policy result turned into a pass, a quota raised, a body changed, the digest
taken out) is refused. It shows an edit, it does not prove authorship: whoever can run
sha256 can forge it, so a pipeline that must enforce its policy passes it to `apply FILE`
too (`--policy`, or RUNAI_RECONCILE_POLICY), which checks the rules again.
Callers: `operations` (`plan --out`, `show`, `apply FILE`).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import datetime
import hashlib
import json
import os
import secrets
import tempfile
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import AllowInfNan, BaseModel, ConfigDict, Field, Strict, ValidationError

from reconciler import __version__, diff, kinds, masking, phases
from reconciler.desired.types import DesiredWorkload
from reconciler.errors import ReconcileError
from reconciler.plans import Plan, Report, ResourceChange, RuleResult, Violation
from reconciler.state import journal
from reconciler.state.model import State

FORMAT = "runai-reconcile-plan"
VERSION = 3
ABSENT = "absent"
KEY_ENV = "RUNAI_RECONCILE_PLAN_KEY"
ENCRYPTED_PREFIX = "aes-256-gcm:"
ENCRYPTED = "encrypted"  # `secrets.mode`: the values are in the file, encrypted
RESOLVE = "resolve"  # the file holds their hashes: apply reads them again from the specs


class PlanFileError(ReconcileError):
    """The file is not a saved plan this version can read."""


@dataclass
class SavedPlan:
    plan: Plan
    desired: list[DesiredWorkload]
    live: dict[str, str]  # address -> fingerprint(...) for each live object the plan read
    plan_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    created_at: str = field(default_factory=lambda: datetime.datetime.now(
        datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    replace: list[str] = field(default_factory=list)
    destroy: bool = False
    refresh: bool = True
    state_digest: str | None = None  # state_digest() of the state the plan was made from
    # The specs folder it was made from (`state.folders`), for apply to record in the
    # state; None for a --target plan, and in files written before it was recorded.
    specs_folder: dict[str, str] | None = None
    # The absolute specs folder, where apply reads sensitive values again (mode RESOLVE).
    specs_path: str | None = None
    # As read: how the file held its sensitive values ({"mode", "hmac_key", "specs"});
    # None when it held none. `reveal` puts the values back and sets it to None.
    secrets: dict[str, str] | None = None


def fingerprint(kind_name: str, live: Mapping[str, Any] | None) -> str:
    """What the planner used of one live GET body, hashed: its create-body fields, id,
    whether it is suspended and whether it completed. Phases moving on their own
    (Creating -> Running) do not change it."""
    if live is None:
        return ABSENT
    kind = kinds.get(kind_name)
    doc = {
        "body": diff.project(kind, dict(live)),
        "workloadId": live.get("workloadId"),
        "suspended": phases.live_suspended(live),
        "completed": phases.live_completed(live),
    }
    canonical = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def state_digest(state: State, pending: Sequence[journal.Intent] = ()) -> str:
    """The state's records and the journal's open intents, hashed (lineage and serial
    are compared apart). Equal for two reads of the same state file and journal."""
    doc = {"resources": {a: r.to_json() for a, r in sorted(state.resources.items())},
           "pending": [i.to_json() for i in pending]}
    return "sha256:" + hashlib.sha256(journal.encode([doc])).hexdigest()


def fingerprints(plan: Plan, live: Mapping[str, dict | None]) -> dict[str, str]:
    """Fingerprints of the live objects read for `plan` (addresses not read are left out)."""
    return {rc.address: fingerprint(rc.kind, live[rc.address])
            for rc in plan.changes if rc.address in live}


# --- staleness ------------------------------------------------------------------------

def adopt_new_state(saved: SavedPlan, state: State) -> None:
    """A plan made before any state existed applies to a state still empty: give that new
    state the lineage the plan recorded (a missing file reads as a fresh random lineage)."""
    if state.serial == 0 and not state.resources and saved.plan.serial == 0 \
            and saved.plan.lineage:
        state.lineage = saved.plan.lineage


def state_problems(saved: SavedPlan, state: State,
                   pending: Sequence[journal.Intent] = ()) -> list[str]:
    """Why the state (as read, with the journal's open `pending` intents) is not the one
    the plan was made against; empty when it is."""
    plan = saved.plan
    if plan.lineage != state.lineage:
        return [f"the state's lineage is {state.lineage} but the plan was made against "
                f"lineage {plan.lineage} (another state file?)"]
    if plan.serial != state.serial:
        return [f"the state changed since the plan was made (serial {plan.serial} then, "
                f"{state.serial} now): this plan was applied already, or another apply ran"]
    if saved.state_digest is not None and saved.state_digest != state_digest(state, pending):
        return ["the state changed since the plan was made (an apply that was interrupted "
                "or killed recorded changes since; the next apply resolves them)"]
    return []


def acted_on(saved: SavedPlan) -> set[str]:
    """The addresses whose live object `apply FILE` must re-read before acting."""
    return {rc.address for rc in saved.plan.actionable() if rc.address in saved.live}


def live_problems(saved: SavedPlan, live_now: Mapping[str, dict | None]) -> list[str]:
    """For each workload the plan acts on, why live is not what the plan read."""
    out = []
    kinds_by_addr = {rc.address: rc.kind for rc in saved.plan.changes}
    for addr in sorted(acted_on(saved)):
        then = saved.live[addr]
        now = fingerprint(kinds_by_addr[addr], live_now.get(addr))
        if then == now:
            continue
        if now == ABSENT:
            out.append(f"{addr} was deleted since the plan was made")
        elif then == ABSENT:
            out.append(f"{addr} exists now; it did not when the plan was made")
        else:
            out.append(f"{addr} was changed since the plan was made")
    return out


# --- the document -----------------------------------------------------------------------


class _Model(BaseModel):
    # Strict: a value of another JSON type is a damaged file, not one to convert.
    model_config = ConfigDict(extra="forbid", strict=True)


class _StateDoc(_Model):
    lineage: str | None
    serial: int | None
    digest: str | None = None


class _Options(_Model):
    targets: list[str]
    replace: list[str]
    destroy: bool
    refresh: bool


class _ViolationDoc(_Model):
    address: str
    message: str
    unknown: bool = False


class _RuleDoc(_Model):
    name: str
    check: str
    limit: Any
    description: str
    enforcement: Literal["deny", "warn"]
    scope: Literal["changed", "all"]
    on_unknown: Literal["fail", "warn"]
    source: str
    status: Literal["passed", "failed", "warned", "unchecked"]
    violations: list[_ViolationDoc]
    preexisting: list[_ViolationDoc]
    notes: list[str]


class _PolicyDoc(_Model):
    passed: bool
    summary: str
    files: list[str]
    rules: list[_RuleDoc]

    @classmethod
    def of(cls, report: Report) -> _PolicyDoc:
        def violations(found: tuple[Violation, ...]) -> list[_ViolationDoc]:
            return [_ViolationDoc(address=v.address, message=v.message, unknown=v.unknown)
                    for v in found]
        return cls(passed=report.passed, summary=report.summary(), files=list(report.files),
                   rules=[_RuleDoc(name=r.name, check=r.check, limit=r.limit,
                                   description=r.description, enforcement=r.enforcement,
                                   scope=r.scope, on_unknown=r.on_unknown, source=r.source,
                                   status=r.status, violations=violations(r.violations),
                                   preexisting=violations(r.preexisting), notes=list(r.notes))
                          for r in report.ordered()])

    def report(self) -> Report:
        """The report (its verdict and summary worked out again from the rules)."""
        def violations(found: list[_ViolationDoc]) -> tuple[Violation, ...]:
            return tuple(Violation(v.address, v.message, v.unknown) for v in found)
        return Report(files=tuple(self.files), rules=tuple(
            RuleResult(name=r.name, check=r.check, limit=r.limit, enforcement=r.enforcement,
                       source=r.source, violations=violations(r.violations),
                       notes=tuple(r.notes), checked=r.status != "unchecked",
                       preexisting=violations(r.preexisting), scope=r.scope,
                       on_unknown=r.on_unknown, description=r.description)
            for r in self.rules))


class _SecretsDoc(_Model):
    mode: Literal["encrypted", "resolve"]
    hmac_key: str
    specs: str | None = None


_Finite = Annotated[float, Strict(), AllowInfNan(False)]
_Str = Annotated[str, Strict()]


class _Document(_Model):
    """A saved plan, field by field (docs/plan-format.md, "Saved plans"). Its own fields
    are strict; the changes and desired workloads are the engine's dataclasses, checked
    against their annotations (an action's name becomes the `Action`)."""
    model_config = ConfigDict(extra="forbid", strict=False)
    format: Literal["runai-reconcile-plan"]
    version: Literal[3]
    plan_id: _Str
    created_at: _Str
    runai_reconcile_version: _Str
    state: _StateDoc
    options: _Options
    changes: list[ResourceChange]
    desired: list[DesiredWorkload]
    live: dict[_Str, _Str]
    gpu_quotas: dict[_Str, _Finite | None] | None = None
    quota_unknown: dict[_Str, _Str] | None = None
    project_names: dict[_Str, _Str] | None = None
    quota_pools: dict[_Str, dict[_Str, Annotated[list[_Finite | None],
                                                 Field(min_length=2, max_length=2)]]] | None = None
    department_projects: dict[_Str, dict[_Str, dict[_Str, _Finite | None]]] | None = None
    gpu_elsewhere: dict[str, Annotated[list[_Finite], Field(min_length=4, max_length=4)]] | None = None
    specs_folder: dict[_Str, _Str] | None = None
    policy: _PolicyDoc | None = None
    secrets: _SecretsDoc | None = None
    digest: _Str | None = None


# The fields a file holds only when they say something.
_OPTIONAL = ("gpu_quotas", "quota_unknown", "project_names", "quota_pools",
             "department_projects", "gpu_elsewhere", "specs_folder", "policy", "secrets",
             "digest")


def encode(saved: SavedPlan, plan_key: bytes | None = None) -> str:
    """The file's text; its sensitive values encrypted with `plan_key`, or
    hashed without one (module docstring)."""
    plan = saved.plan
    doc = _Document(
        format=FORMAT, version=VERSION, plan_id=saved.plan_id, created_at=saved.created_at,
        runai_reconcile_version=__version__,
        state=_StateDoc(lineage=plan.lineage, serial=plan.serial, digest=saved.state_digest),
        options=_Options(targets=list(plan.targets), replace=list(saved.replace),
                         destroy=saved.destroy, refresh=saved.refresh),
        changes=plan.changes,
        desired=sorted(saved.desired, key=lambda d: d.address),
        live=dict(sorted(saved.live.items())),
        gpu_quotas=plan.gpu_quotas, quota_unknown=plan.quota_unknown or None,
        project_names=plan.project_names or None, quota_pools=plan.quota_pools or None,
        department_projects=plan.department_projects or None,
        gpu_elsewhere=plan.gpu_elsewhere,
        specs_folder=saved.specs_folder,
        policy=None if plan.policy is None else _PolicyDoc.of(plan.policy),
    ).model_dump(mode="json")
    for key in _OPTIONAL:
        if doc[key] is None:
            del doc[key]
    for d in doc["desired"]:
        del d["warnings"]  # the loader's, for this run's output only
    held = _conceal(doc, saved, plan_key)
    if held is not None:
        doc["secrets"] = held
    doc["digest"] = content_digest(doc)
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def content_digest(doc: Mapping[str, Any]) -> str:
    """sha256 of a saved plan's document, its `digest` left out, in one canonical form
    (so re-indenting the file does not change it)."""
    rest = {k: v for k, v in doc.items() if k != "digest"}
    canonical = json.dumps(rest, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def decode(text: str, where: str = "plan file") -> SavedPlan:
    try:
        raw = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PlanFileError(f"{where} is not a saved plan (not JSON: {exc})") from None
    except ValueError:  # an integer too long for Python (its message is advice to us)
        raise PlanFileError(f"{where} is not a saved plan (an integer in it is too "
                            "long)") from None
    # Which document this is, before its fields: another one is named for what it is.
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise PlanFileError(f"{where} is not a saved plan (write one with `plan --out FILE`)")
    version = raw.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise PlanFileError(f"{where}: version: expected a positive integer, got {version!r}")
    if version > VERSION:
        raise PlanFileError(f"{where} was written by a newer runai-reconcile (plan file "
                            f"version {version}; this one reads up to {VERSION})")
    if version < VERSION:
        raise PlanFileError(f"{where} was written by an earlier runai-reconcile (plan file "
                            f"version {version}; this one reads version {VERSION}); make "
                            "the plan again")
    try:
        doc = _Document.model_validate(raw)
    except ValidationError as exc:
        raise PlanFileError(f"{where} is damaged or incomplete ({_first_problem(exc)}); make "
                            "the plan again") from None
    for rc in doc.changes:
        if rc.kind not in kinds.KINDS:
            raise PlanFileError(f"{where}: {rc.address} is of a kind this version does not know")
    # After the fields' own checks, which say more about a damaged file than this can.
    if raw.get("digest") != content_digest(raw):
        why = ("its digest is missing: it was changed since it was written, or written by an "
               "earlier runai-reconcile" if "digest" not in raw else
               "it was changed since it was written: its digest does not match")
        raise PlanFileError(f"{where} is refused ({why}); make the plan again")
    plan = Plan(changes=doc.changes, lineage=doc.state.lineage, serial=doc.state.serial,
                targets=doc.options.targets, gpu_quotas=doc.gpu_quotas,
                quota_unknown=doc.quota_unknown, project_names=doc.project_names,
                quota_pools=doc.quota_pools, department_projects=doc.department_projects,
                gpu_elsewhere=doc.gpu_elsewhere,
                policy=None if doc.policy is None else doc.policy.report())
    return SavedPlan(plan=plan, desired=doc.desired, live=doc.live, plan_id=doc.plan_id,
                     created_at=doc.created_at, replace=doc.options.replace,
                     destroy=doc.options.destroy, refresh=doc.options.refresh,
                     state_digest=doc.state.digest, specs_folder=doc.specs_folder,
                     specs_path=doc.secrets.specs if doc.secrets else None,
                     secrets=doc.secrets.model_dump() if doc.secrets else None)


def _first_problem(exc: ValidationError) -> str:
    """`gpu_quotas: 7: input should be a valid number`: the first problem's field and what
    was expected, without its input (a plan file holds unmasked values)."""
    err = exc.errors(include_url=False, include_input=False)[0]
    top, *rest = err["loc"] or ("",)
    at = "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in rest).lstrip(".")
    return f"{top}: {at + ': ' if at else ''}{err['msg'].lower()}"


def write(path: str | os.PathLike[str], saved: SavedPlan, key: bytes | None = None) -> None:
    """Write `saved` to `path` with mode 0600, atomically: a temporary file beside it,
    written whole and fsynced, then renamed over `path` (and the folder fsynced), so a
    kill or a full disk leaves the old file or the new one, never a truncated plan.
    Its sensitive values are encrypted with `key`, or hashed without one."""
    data = encode(saved, key).encode()
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    done = False
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        done = True
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    finally:
        if not done:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


def read(path: str | os.PathLike[str]) -> SavedPlan:
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise PlanFileError(f"cannot read plan file {path}: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise PlanFileError(f"{path} is not a saved plan (not UTF-8 text)") from None
    return decode(text, str(path))


# --- sensitive values ---------------------------------------------------------------------


def plan_key(environ: Mapping[str, str]) -> bytes | None:
    """The key `RUNAI_RECONCILE_PLAN_KEY` gives (32 bytes, in base64 or as 64 hex digits);
    None when it is not set; PlanFileError saying the format when it is not a key."""
    text = (environ.get(KEY_ENV) or "").strip()
    if not text:
        return None
    try:
        key = bytes.fromhex(text) if len(text) == 64 else base64.b64decode(text, validate=True)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise PlanFileError(f"{KEY_ENV} is not a key: give 32 random bytes in base64 (44 "
                            "characters) or as 64 hex digits, e.g. the output of python -c "
                            "'import secrets,base64;print(base64.b64encode(secrets."
                            "token_bytes(32)).decode())'")
    return key


# The bodies of a change that apply sends or records, and those it only shows.
_SENT = ("after", "patch")
_SHOWN = ("before", "applied")  # shown only: drift's before is the state's body


def _conceal(doc: dict[str, Any], saved: SavedPlan, key: bytes | None) -> dict | None:
    """Replace each sensitive value of `doc` (encoded) in place; the `secrets` block to
    write, or None when there was none."""
    hmac_key = secrets.token_bytes(32)
    found = False

    def hashed(_: str, value: Any) -> str:
        nonlocal found
        found = True
        return masking.keyed_hash(value, hmac_key)

    def sent(address: str) -> Any:
        if key is None:
            return hashed

        def encrypt(path: str, value: Any) -> str:
            nonlocal found
            found = True
            return _encrypt(key, _aad(saved.plan_id, address, path), value)
        return encrypt

    for rc in doc["changes"]:
        sensitive = rc.get("sensitive") or ()
        for name in _SENT:
            if rc.get(name) is not None:
                rc[name] = masking.map_sensitive(rc[name], sensitive, sent(rc["address"]))
        for name in _SHOWN:
            if rc.get(name) is not None:
                rc[name] = masking.map_sensitive(rc[name], sensitive, hashed)
        for fc in rc.get("changes") or ():
            for side in ("before", "after"):
                fc[side] = masking.map_sensitive(fc[side], sensitive, hashed, path=fc["path"])
    for d in doc["desired"]:
        sensitive = (d.get("lifecycle") or {}).get("sensitive") or ()
        address = kinds.address(d["kind"], d["project_id"], d["name"])
        d["body"] = masking.map_sensitive(d["body"], sensitive, sent(address))
    if not found:
        return None
    return {"mode": ENCRYPTED if key is not None else RESOLVE,
            "hmac_key": base64.b64encode(hmac_key).decode(),
            **({"specs": saved.specs_path} if saved.specs_path else {})}


def _aad(plan_id: str, address: str, path: str) -> bytes:
    return f"{plan_id}\0{address}\0{path}".encode()


def _encrypt(key: bytes, aad: bytes, value: Any) -> str:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = secrets.token_bytes(12)
    sealed = AESGCM(key).encrypt(nonce, json.dumps(value).encode(), aad)
    return ENCRYPTED_PREFIX + base64.b64encode(nonce + sealed).decode()


def _decrypt(key: bytes, aad: bytes, token: Any) -> Any:
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    if not isinstance(token, str) or not token.startswith(ENCRYPTED_PREFIX):
        raise ValueError("not an encrypted value")
    try:
        raw = base64.b64decode(token[len(ENCRYPTED_PREFIX):], validate=True)
        return json.loads(AESGCM(key).decrypt(raw[:12], raw[12:], aad))
    except (ValueError, InvalidTag):
        raise ValueError("cannot be decrypted") from None


def reveal(saved: SavedPlan, key: bytes | None,
           load_desired: Callable[[str], Sequence[DesiredWorkload]], where: str) -> SavedPlan:
    """`saved` with the sensitive values apply sends put back: decrypted with `key`, or
    (a plan made without one) read again from the specs, `load_desired(folder)`, each
    checked against the hash the plan recorded. PlanFileError saying why when they cannot
    be: nothing is sent then."""
    info = saved.secrets
    if info is None:
        return saved
    if info["mode"] == ENCRYPTED:
        if key is None:
            raise PlanFileError(f"{where} holds its sensitive values encrypted: set {KEY_ENV} "
                                "to the key it was made with")
        values = None
    else:
        folder = info.get("specs")
        if not folder:
            raise PlanFileError(f"{where} holds only the hashes of its sensitive values and "
                                "names no specs folder to read them from again; make the "
                                "plan again")
        values = {}
        for d in load_desired(folder):
            values[(d.kind, d.name, d.project_id or f"name:{d.project_name}")] = d
    hmac_key = base64.b64decode(info["hmac_key"])
    project_names = {d.address: d.project_name for d in saved.desired}
    problems: list[str] = []

    def restore(address: str, kind: str, project: str, name: str, sensitive: Sequence[str],
                body: Any) -> Any:
        if key is not None and values is None:
            def leaf(path: str, token: Any) -> Any:
                try:
                    return _decrypt(key, _aad(saved.plan_id, address, path), token)
                except ValueError:
                    problems.append(f"{address}: {path}: cannot be decrypted with "
                                    f"{KEY_ENV}: another key, or the file was changed")
                    return token
            return masking.map_sensitive(body, sensitive, leaf)
        now = None
        if values is not None:
            now = values.get((kind, name, project)) or values.get(
                (kind, name, f"name:{project_names.get(address)}"))
        current: dict[str, list[Any]] = {}
        if now is not None:
            masking.map_sensitive(now.body, (*sensitive, *now.lifecycle.sensitive),
                                  lambda p, v: current.setdefault(p, []).append(v))
        seen: dict[str, int] = {}

        def again(path: str, hashed: Any) -> Any:
            i = seen[path] = seen.get(path, -1) + 1
            candidates = current.get(path, [])
            value = candidates[i] if i < len(candidates) else None
            if value is None or masking.keyed_hash(value, hmac_key) != hashed:
                problems.append(f"{address}: {path}: "
                                + ("is not in the specs now" if value is None else
                                   "differs from the value the plan was made with"))
                return hashed
            return value
        return masking.map_sensitive(body, sensitive, again)

    for rc in saved.plan.changes:
        for name in _SENT:
            body = getattr(rc, name)
            if body is not None:
                setattr(rc, name, restore(rc.address, rc.kind, rc.project_id, rc.name,
                                          rc.sensitive, body))
    desired = []
    for d in saved.desired:
        body = restore(d.address, d.kind, d.project_id, d.name, d.lifecycle.sensitive, d.body)
        desired.append(dataclasses.replace(d, body=body))
    if problems:
        how = ("" if info["mode"] == ENCRYPTED else
               f" (it was made without {KEY_ENV}, so apply reads them again from "
               f"{info.get('specs')})")
        raise PlanFileError(f"{where} is refused: its sensitive values cannot be restored"
                            f"{how}: " + "; ".join(sorted(dict.fromkeys(problems)))
                            + "; nothing was applied: make the plan again")
    saved.desired = desired
    saved.secrets = None
    return saved
