"""Saved plans: the versioned file `plan --out FILE` writes and `apply FILE` / `show FILE` read.

Kept apart from the `plans` model, like opentofu's `plans/planfile`: this module owns the
encoding only. A saved plan holds everything `apply` needs without the spec files:

    {"format": "runai-reconcile-plan", "version": 1, "plan_id": "<uuid>",
     "created_at": "<UTC ISO 8601>", "runai_reconcile_version": "0.1.0",
     "state": {"lineage": ..., "serial": ...,      # the state the plan was made against
               "digest": "sha256:..."},            # ... its records and open journal intents
     "options": {"targets": [...], "replace": [...], "destroy": false, "refresh": true},
     "changes": [<ResourceChange>, ...],           # the actions, with the desired bodies
     "desired": [<DesiredWorkload>, ...],          # phase and lifecycle flags for the state
     "live": {"<address>": "sha256:..." | "absent"},  # what each live read found
     "gpu_quotas": {"<project id>": 8 | null},    # as read; absent when not read
     "project_names": {"<project id>": "team-a"},  # the names those reads gave
     "gpu_elsewhere": {"<project id>": [8, 8, 0, 0]},  # with --target: the others' GPUs
     "policy": {...},                              # the policy results, with --policy
     "specs_folder": {"git": "specs", ...},       # the folder it was made from (not --target)
     "digest": "sha256:..."}                       # of every other field: a hand edit shows

The plan's GPU impact is made again from the changes, `gpu_quotas` and `project_names`
(`gpus.impact_of`),
so `show` renders the same block as `plan` did. The `live` fingerprints let `apply FILE` re-read the workloads it acts on and refuse
when one changed since the plan (`live_problems`); `state_problems` refuses a plan made
against another lineage, serial or digest (a run killed after the plan leaves journal
entries that change the records without moving the serial; files without a digest,
from before it was recorded, are judged on lineage and serial). The file is written with mode 0600: it holds the
desired bodies, secret-looking values included, never an API token. `digest` is the
sha256 of the document without it (`content_digest`): a file edited after it was written
(a failed policy result turned into a pass, a quota raised, a body changed, the digest
taken out) is refused. It shows an edit, it does not prove authorship: whoever can run
sha256 can forge it, so a pipeline that must enforce its policy passes it to `apply FILE`
too (`--policy`, or RUNAI_RECONCILE_POLICY), which checks the rules again.
Callers: `operations` (`plan --out`, `show`, `apply FILE`).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Annotated, Any

from pydantic import AllowInfNan, Field, TypeAdapter, ValidationError

from reconciler import __version__, diff, kinds, phases
from reconciler.desired.types import DesiredWorkload
from reconciler.errors import ReconcileError
from reconciler.plans import FieldChange, Plan, ResourceChange
from reconciler.state import journal
from reconciler.state.model import State

FORMAT = "runai-reconcile-plan"
VERSION = 1
ABSENT = "absent"


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


# --- encoding ---------------------------------------------------------------------------

def encode(saved: SavedPlan) -> str:
    plan = saved.plan
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "plan_id": saved.plan_id,
        "created_at": saved.created_at,
        "runai_reconcile_version": __version__,
        "state": {"lineage": plan.lineage, "serial": plan.serial,
                  "digest": saved.state_digest},
        "options": {"targets": list(plan.targets), "replace": list(saved.replace),
                    "destroy": saved.destroy, "refresh": saved.refresh},
        "changes": [_change_doc(rc) for rc in plan.changes],
        "desired": [_desired_doc(d) for d in sorted(saved.desired, key=lambda d: d.address)],
        "live": dict(sorted(saved.live.items())),
    }
    if plan.gpu_quotas is not None:
        doc["gpu_quotas"] = dict(plan.gpu_quotas)
    if plan.project_names:
        doc["project_names"] = dict(plan.project_names)
    if plan.gpu_elsewhere is not None:
        doc["gpu_elsewhere"] = dict(plan.gpu_elsewhere)
    if saved.specs_folder is not None:
        doc["specs_folder"] = dict(saved.specs_folder)
    if plan.policy is not None:
        from reconciler import policy  # its models take long to build: only with a policy

        doc["policy"] = policy.report_document(plan.policy)
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
        doc = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PlanFileError(f"{where} is not a saved plan (not JSON: {exc})") from None
    except ValueError:  # an integer too long for Python (its message is advice to us)
        raise PlanFileError(f"{where} is not a saved plan (an integer in it is too "
                            "long)") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise PlanFileError(f"{where} is not a saved plan (write one with `plan --out FILE`)")
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise PlanFileError(f"{where}: version: expected a positive integer, got {version!r}")
    if version > VERSION:
        raise PlanFileError(f"{where} was written by a newer runai-reconcile (plan file "
                            f"version {version}; this one reads up to {VERSION})")
    for key, typ in (("state", dict), ("options", dict), ("changes", list),
                     ("desired", list), ("live", dict)):
        if not isinstance(doc.get(key), typ):
            raise PlanFileError(f"{where} is damaged or incomplete ({key}: expected a "
                                f"{'mapping' if typ is dict else 'list'}, got "
                                f"{json.dumps(doc.get(key))[:40]}); make the plan again")
    try:
        state, options = doc["state"], doc["options"]
        _check(state, _STATE, "state")
        plan = Plan(changes=[_change_from(c) for c in doc["changes"]],
                    lineage=state["lineage"], serial=state["serial"],
                    targets=[str(t) for t in options["targets"]])
        if doc.get("gpu_quotas") is not None:
            plan.gpu_quotas = _check(doc["gpu_quotas"], _GPU_QUOTAS, "gpu_quotas")
        if doc.get("project_names") is not None:
            plan.project_names = _check(doc["project_names"], _PROJECT_NAMES, "project_names")
        if doc.get("gpu_elsewhere") is not None:
            plan.gpu_elsewhere = _check(doc["gpu_elsewhere"], _GPU_ELSEWHERE, "gpu_elsewhere")
        saved = SavedPlan(
            plan=plan, desired=[_desired_from(d) for d in doc["desired"]],
            live={str(k): str(v) for k, v in doc["live"].items()},
            plan_id=str(doc["plan_id"]), created_at=str(doc["created_at"]),
            replace=[str(a) for a in options["replace"]], destroy=bool(options["destroy"]),
            refresh=bool(options["refresh"]),
            state_digest=None if state.get("digest") is None else str(state["digest"]),
            specs_folder=(None if doc.get("specs_folder") is None else
                          _check(doc["specs_folder"], _SPECS_FOLDER, "specs_folder")))
        if doc.get("policy") is not None:
            from reconciler import policy

            plan.policy = policy.report_from_document(doc["policy"])
    except _Damaged as exc:
        raise PlanFileError(f"{where} is damaged or incomplete ({exc}); make the plan "
                            "again") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise PlanFileError(f"{where} is damaged or incomplete ({type(exc).__name__}: {exc}); "
                            "make the plan again") from None
    for rc in plan.changes:
        if rc.kind not in kinds.KINDS:
            raise PlanFileError(f"{where}: {rc.address} is of a kind this version does not know")
    # After the fields' own checks, which say more about a damaged file than this can.
    if doc.get("digest") != content_digest(doc):
        why = ("its digest is missing: it was changed since it was written, or written by an "
               "earlier runai-reconcile" if "digest" not in doc else
               "it was changed since it was written: its digest does not match")
        raise PlanFileError(f"{where} is refused ({why}); make the plan again")
    return saved


def write(path: str | os.PathLike[str], saved: SavedPlan) -> None:
    """Write `saved` to `path` with mode 0600 (an existing file is replaced)."""
    data = encode(saved).encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, data)
    finally:
        os.close(fd)


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


def _change_doc(rc: ResourceChange) -> dict[str, Any]:
    doc = asdict(rc)
    doc["action"] = rc.action.value
    doc["sensitive"] = list(rc.sensitive)
    doc["ignore_changes"] = list(rc.ignore_changes)
    return doc


_CHANGE_FIELDS = {f.name for f in fields(ResourceChange)}
# What the decoded fields must be (the dataclasses' own annotations): a wrong type is a
# damaged file, refused here rather than failing later in a renderer or the executor.
_CHANGE = TypeAdapter(ResourceChange)
_DESIRED = TypeAdapter(DesiredWorkload)
_STATE = TypeAdapter(dict[str, str | int | None])
_GPU_QUOTAS = TypeAdapter(dict[str, Annotated[float, AllowInfNan(False)] | None])
_PROJECT_NAMES = TypeAdapter(dict[str, str])
_SPECS_FOLDER = TypeAdapter(dict[str, str])
_GPU_ELSEWHERE = TypeAdapter(dict[str, Annotated[list[float], Field(min_length=4, max_length=4)]])


class _Damaged(Exception):
    """A decoded field of the wrong type: `label.path: what was expected`."""


def _check(value: Any, adapter: TypeAdapter, label: str) -> Any:
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        # The first problem, without its input: a plan file holds unmasked values.
        err = exc.errors(include_url=False, include_input=False)[0]
        at = "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in err["loc"])
        raise _Damaged(f"{label}: {at.lstrip('.')}: {err['msg'].lower()}") from None
_FIELD_CHANGE_FIELDS = {f.name for f in fields(FieldChange)}


def _change_from(doc: dict[str, Any]) -> ResourceChange:
    unknown = set(doc) - _CHANGE_FIELDS
    if unknown:
        raise ValueError(f"unknown change field(s) {sorted(unknown)}")
    d = dict(doc)
    d["changes"] = [{k: v for k, v in c.items() if k in _FIELD_CHANGE_FIELDS}
                    for c in d.get("changes", [])]
    return _check(d, _CHANGE, f"the change to {doc.get('address')!s:.80}")


def _desired_doc(d: DesiredWorkload) -> dict[str, Any]:
    return {"kind": d.kind, "name": d.name, "project_id": d.project_id,
            "cluster_id": d.cluster_id, "body": d.body, "desired_phase": d.desired_phase,
            "lifecycle": {"prevent_destroy": d.lifecycle.prevent_destroy,
                          "ignore_changes": list(d.lifecycle.ignore_changes),
                          "sensitive": list(d.lifecycle.sensitive)},
            "source": d.source, "line": d.line, "project_name": d.project_name}


def _desired_from(doc: dict[str, Any]) -> DesiredWorkload:
    lc = doc["lifecycle"]
    return _check({
        "kind": doc["kind"], "name": doc["name"], "project_id": doc["project_id"],
        "cluster_id": doc["cluster_id"], "body": doc["body"],
        "desired_phase": doc["desired_phase"],
        "lifecycle": {"prevent_destroy": lc["prevent_destroy"],
                      "ignore_changes": lc["ignore_changes"], "sensitive": lc["sensitive"]},
        "source": doc.get("source") or "", "line": doc.get("line"),
        "project_name": doc.get("project_name")}, _DESIRED,
        f"the desired workload {doc.get('name')!s:.80}")
