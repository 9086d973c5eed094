"""The three-way diff of one workload: desired (D), last applied (L), live (R) -> field changes.

Called by `planner` for every address that has both a spec and a live (or recorded)
workload. Pure: plain dicts in, `plans.FieldChange` list out; inputs are never mutated.

The model is kubectl's last-applied three-way merge. For each field path of the create
body (name, projectId, clusterId, templateId and the kind's `body_keys`):

- D != L: the user changed it (before = R's value when live is known, else L's).
- D == L, R != L: drift, changed outside the reconciler (before R, after D).
- D and L absent, R present: a server default or generated value (`Kind.server_owns`)
  is ignored; anything else someone added outside (an environment variable such as
  `LD_PRELOAD`, an `args`): drift, `added`, one change per object member or keyed list
  item at the deepest path that names it, after None. Not for a workload made from a
  template (`templateId`: the server fills in the template's values, undescribed).
- D absent, L present: the user removed it (after None).
- No L at all (first run, lost state): D is compared with R on the paths D sets only.

Server defaults (the kind entry's `defaults`, CONTRACT.md §5, conditional ones such as
`imagePullPolicy` by the image's tag included): where D spells or L records a default and
each of D, L and R holds the server's value there or nothing, the default is filled into
the others before the walk (`Kind.with_defaults_aligned`), so spelling it is leaving it
out, in either direction: a spec that drops `backoffLimit: 6`, or adds
`security.uidGidSource: fromTheImage` that live lacks, plans nothing. A value other than
the default, on any side, is compared as written. Generated values (a new PVC's claim
name) are not defaults: spelling one chooses it.

Normalisation: `null`, an empty object and an empty list all equal "absent"; numbers
compare by value (1 == 1.0) but a boolean is not a number; two quantities in a field
that holds one (`kinds.QUANTITY_FIELDS`: `cpuMemoryRequest`, a PVC's `size`, ...) compare
by value (`256Gi` == `262144Mi`), text that is not a quantity as text; arrays of objects
whose field has an item key (`kinds.item_key`) compare as maps, so order does not matter
and a path names the item (`spec.environmentVariables[HF_HOME].value`); `kinds.SET_LISTS`
compare as sets; `kinds.ORDERED_LISTS` and every other array compare as whole ordered
values.

A subtree (object or keyed item) that is added or removed is one change at its root,
carrying the whole value. A user change that live already matches is no change: there
is nothing to send (an added subtree matches when live has every path of it).

Compromise: removing an updatable field (e.g. DistributedInference `spec.replicas`)
forces a replacement, because the API offers no way to unset a field in place. Removing
something inside one that stays (an Inference's environment variable, an autoscaling
key) is an update: the PATCH sends that field's whole desired value.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Sequence
from typing import Any

import orjson

from reconciler import kinds as kinds_mod
from reconciler import plans
from reconciler import quantities

# Keys of the create body the API never echoes back: compared D against L only.
WRITE_ONLY_KEYS = frozenset({"templateId", "useGivenNameAsPrefix"})
META_KEYS = ("name", "projectId", "clusterId", "templateId")
# Identifiers compared as strings (CONTRACT.md §2: projectId may come back as a number).
_STRING_IDS = frozenset({"projectId", "clusterId"})


def body_keys(kind: kinds_mod.Kind) -> tuple[str, ...]:
    """The top-level keys of `kind`'s create body that the diff compares
    (`Kind.wire_keys`). A kind whose create body names no cluster (a NIM service's) has no
    clusterId compared: the spec's only names the cluster its `project:` is looked up in,
    and the project decides it."""
    return kind.wire_keys


def project(kind: kinds_mod.Kind, body: dict | None) -> dict | None:
    """`body` (e.g. a live GET response) cut down to the create-body keys of `kind`."""
    if body is None:
        return None
    return {k: body[k] for k in body_keys(kind) if body.get(k) is not None}


def diff_workload(kind: kinds_mod.Kind, desired: dict | None, applied: dict | None,
                  live: dict | None, *, ignore: Sequence[str] = ()) -> list[plans.FieldChange]:
    """Field changes that would take the workload from its present form to `desired`.

    `applied` None means no state for the workload (compare D with R on D's paths);
    `live` None means live is unknown (not refreshed: L stands in for it, no drift).
    `ignore` holds dotted paths (lifecycle.ignoreChanges): a change at or under one
    is dropped. Sorted by path.
    """
    if live is None and desired is applied and desired is not None:
        return []  # the spec is the body the state holds (the spec cache shares it): alike
    if kind.hooks.normalises:
        desired, applied, live = kind.normalise(desired, applied, live)
    if desired is not None and applied is not None and live is not None and _quiet(
            kind, desired, applied, live):
        return []  # unchanged and no drift, found without walking: most of a fleet
    out = _walk(kind, desired, applied, live, ignore)
    if out and kind.touches_defaults(c.path for c in out):
        # A change at or above a default: compare again with the defaults aligned (rare:
        # the walk alone serves every other change).
        aligned = _walk(kind, *kind.with_defaults_aligned(desired, applied, live), ignore)
        out = [_as_written(kind, c, desired, applied if live is None else live)
               for c in aligned]
    if out:
        body = desired or applied or live
        out = [dataclasses.replace(c, forces_replacement=True)
               if not c.forces_replacement and kind.forces_replacement(body, c.path)
               else c for c in out]
    return out


def _as_written(kind: kinds_mod.Kind, change: plans.FieldChange, desired: dict | None,
                present: dict | None) -> plans.FieldChange:
    """`change` (found with the defaults aligned) with its values as the bodies hold them:
    after from `desired`, before from `present` (live, or the state without refresh)."""
    segs = _segments(change.path)
    if segs[0][0] in META_KEYS:
        return change  # no defaults there; ids compared as strings
    after = _get(desired, segs) if desired is not None else _MISSING
    after = None if after is _MISSING else _clean(after)
    before = change.before
    if present is not None and segs[0][0] not in WRITE_ONLY_KEYS:
        found = _get(present, segs)
        before = None if found is _MISSING else _clean(found)
    if change.added:
        before = change.before  # what was added, without the server's values in it
    return plans.FieldChange(
        path=change.path, before=before, after=after, drift=change.drift,
        forces_replacement=not kind.is_updatable(change.path) or (
            after is None and change.path in kind.updatable_paths), added=change.added)


def _walk(kind: kinds_mod.Kind, desired: dict | None, applied: dict | None,
          live: dict | None, ignore: Sequence[str]) -> list[plans.FieldChange]:
    walker = _Walker(kind, has_state=applied is not None, live_known=live is not None,
                     additions=_sees_additions(applied))
    d_root = desired or {}
    l_root = applied or {}
    r_root = live or {}
    for key in body_keys(kind):
        d, l, r = d_root.get(key), l_root.get(key), r_root.get(key)
        if key in _STRING_IDS:
            d, l, r = _str_id(d), _str_id(l), _str_id(r)
        if key in WRITE_ONLY_KEYS:
            if applied is None:
                continue  # nothing to compare with: the API never says what it used
            walker.node(key, key, d, l, None, write_only=True)
        else:
            walker.node(key, key, d, l, r, r_holder=r_root, l_holder=l_root)
    out = walker.changes
    if ignore:
        out = [c for c in out if not kinds_mod.under_any(c.path, ignore)]
    out.sort(key=lambda c: c.path)
    return out


def _quiet(kind: kinds_mod.Kind, desired: dict, applied: dict, live: dict) -> bool:
    """True only when the walk would report nothing: D is L exactly (the specs did not
    change) and live agrees with L on every path L sets (`live_matches`), found without
    the walk; False sends the workload through the walk, which says what differs."""
    for key in body_keys(kind):
        d, l = desired.get(key), applied.get(key)
        if key in _STRING_IDS:
            d, l = _str_id(d), _str_id(l)
        if not (d == l and identical(d, l)):
            return False
    return live_matches(kind, applied, live)


def live_matches(kind: kinds_mod.Kind, applied: dict, live: dict) -> bool:
    """Live agrees with the last applied body on every path it sets, and holds nothing
    else but the server's values (defaults, server-owned fields): no drift."""
    additions = _sees_additions(applied)
    for key in body_keys(kind):
        if key not in WRITE_ONLY_KEYS:
            l, r = applied.get(key), live.get(key)
            if key in _STRING_IDS:
                l, r = _str_id(l), _str_id(r)
            if not _agrees(field=key, l=l, r=r, kind=kind if additions else None, path=key,
                           holder=live, l_holder=applied):
                return False
    return True


def _sees_additions(applied: dict | None) -> bool:
    """Whether what live holds beyond the last applied body can be told from what the
    server fills in: not for a workload made from a template (`templateId`), whose values
    the server fills in from the template, which the API does not describe."""
    return applied is not None and applied.get("templateId") is None


def _agrees(*, field: str, l: Any, r: Any, kind: kinds_mod.Kind | None, path: str,
            holder: Any, l_holder: Any = None) -> bool:
    """No drift at or under this node: what `_Walker.node` concludes when D is L. With
    `kind`, live's values beyond L disagree unless the server put them there (`_residue`;
    `holder` and `l_holder` are the objects holding `r` and `l`); without it they are not
    looked at."""
    if l is r or (l == r and identical(l, r)):
        return True
    if _absent(l):
        # A server default or server-owned value, or something added outside.
        return kind is None or _residue(kind, path, field, r, holder, l_holder) is None
    lm = _as_map(field, l)
    if lm is None:
        return not _absent(r) and _eq(r, l, field)
    if _absent(r):
        return False
    rm = _as_map(field, r, lenient=True)
    if rm is not None and not _same_shape(rm, lm):
        rm = None
    sep = "[" if isinstance(lm, _Keyed) else "."
    for k, lv in lm.items():
        rv = rm.get(k) if rm is not None else None
        if lv is rv or (lv == rv and identical(lv, rv)):
            continue  # most members of most workloads: no path to make
        if not _agrees(field=_child_field(field, lm, k), l=lv, r=rv, kind=kind,
                       path=_join(path, sep, k), holder=rm, l_holder=lm):
            return False
    if kind is not None and rm is not None:
        for k, rv in rm.items():
            if k not in lm and _residue(kind, _join(path, sep, k), _child_field(field, rm, k),
                                        rv, rm, lm) is not None:
                return False
    return True


def _residue(kind: kinds_mod.Kind, path: str, field: str, value: Any, holder: Any,
             l_holder: Any = None) -> Any:
    """What of `value` (live's, at `path`, inside the object `holder`; `l_holder` the
    object at the same place in the last applied body) the server did not put there:
    `value` without the values `kind` says are the server's (`Kind.server_owns`), None
    when nothing is left. A keyed list item is kept whole (less the server's values inside
    it): the server adds no items of its own."""
    if _absent(value) or kind.server_owns(path, value, holder, l_holder):
        return None
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            left = _residue(kind, f"{path}.{k}", k, v, value)
            if left is not None:
                out[k] = left
        return out or None
    m = _as_map(field, value, lenient=True) if isinstance(value, list) else None
    if m:
        items = [_residue(kind, f"{path}[{k}]", field, item, value) for k, item in m.items()]
        return [item for item in items if item is not None] or None
    return value


def is_ignored(path: str, ignore: Sequence[str]) -> bool:
    """True when dotted `path` lies at or under one of the `ignore` paths."""
    return kinds_mod.under_any(path, ignore)


class _Walker:
    __slots__ = ("kind", "has_state", "live_known", "additions", "changes")

    def __init__(self, kind: kinds_mod.Kind, *, has_state: bool, live_known: bool,
                 additions: bool):
        self.kind = kind
        self.has_state = has_state
        self.live_known = live_known
        self.additions = additions and has_state and live_known
        self.changes: list[plans.FieldChange] = []

    def node(self, path: str, field: str, d: Any, l: Any, r: Any, *,
             write_only: bool = False, same_dl: bool = False, r_holder: Any = None,
             l_holder: Any = None) -> None:
        """`same_dl`: a parent found D and L identical, so they are here too; `r_holder`
        and `l_holder`: the objects that hold `r` in live and `l` in the last applied body."""
        live_known = self.live_known and not write_only
        if self.has_state:
            if not same_dl:
                same_dl = d == l and identical(d, l)
            if same_dl and (not live_known or (r == l and identical(l, r))):
                return  # unchanged and no drift: most of a fleet, most of the time
        d_abs, l_abs, r_abs = _absent(d), _absent(l), _absent(r)
        if not self.has_state:
            if d_abs:
                return  # a path D does not set
            dm = _as_map(field, d)
            rm = _as_map(field, r, lenient=True) if dm is not None and not r_abs else None
            if dm is not None and rm is not None and _same_shape(dm, rm):
                sep = "[" if isinstance(dm, _Keyed) else "."
                for k, dv in dm.items():
                    self.node(_join(path, sep, k), _child_field(field, dm, k), dv, None, rm.get(k))
                return
            if r_abs or not _eq(d, r, field):
                self._add(path, r, d, drift=False)
            return

        if d_abs and l_abs:
            if self.additions and not write_only and not r_abs:
                self._added(path, field, r, r_holder, l_holder)
            return  # else a server default or server-owned value
        if not d_abs and not l_abs:
            dm = _as_map(field, d)
            lm = _as_map(field, l) if dm is not None else None
            if dm is not None and lm is not None and _same_shape(dm, lm):
                if live_known and r_abs:
                    # The whole subtree is gone from live: one change at its root.
                    if _eq(d, l, field):
                        self._add(path, None, d, drift=True)
                    else:
                        self._add(path, None, d, drift=False)
                    return
                rm = _as_map(field, r, lenient=True) if live_known else None
                if rm is not None and not _same_shape(rm, dm):
                    rm = None
                sep = "[" if isinstance(dm, _Keyed) else "."
                keys = _union(dm, lm)
                if rm is not None and self.additions:
                    keys = _union(dict.fromkeys(keys), rm)  # and what only live holds
                for k in keys:
                    self.node(_join(path, sep, k), _child_field(field, dm, k),
                              dm.get(k), lm.get(k), rm.get(k) if rm is not None else None,
                              write_only=write_only, same_dl=same_dl, r_holder=rm,
                              l_holder=lm)
                return
        if not _eq(d, l, field):
            if live_known:
                # Live has what the user added, on every path of it (its other paths are
                # server defaults): nothing to send. An import's L, which leaves the
                # defaults out, meets this wherever a spec spells them.
                if not (_eq(d, r, field) or (l_abs and _agrees(
                        field=field, l=d, r=r, kind=None, path=path, holder=r_holder))):
                    self._add(path, r, d, drift=False)
            else:
                self._add(path, l, d, drift=False)
        elif live_known and (r_abs or not _eq(r, l, field)):
            self._add(path, r, d, drift=True)

    def _added(self, path: str, field: str, r: Any, holder: Any, l_holder: Any) -> None:
        """Live's `r` at `path`, which neither D nor L holds: a change (drift, `added`) for
        each object member, keyed list item or other value the server did not put there
        (`_residue`), at the deepest path that names it, so a narrower
        `lifecycle.ignoreChanges` path can accept it and a PATCH can remove it by sending
        the field that holds it."""
        if self.kind.server_owns(path, r, holder, l_holder):
            return
        if path.endswith("]"):  # a keyed list item, found beside the items D and L hold
            left = _residue(self.kind, path, field, r, holder, l_holder)
            if left is not None:
                self._add(path, left, None, drift=True, added=True)
            return
        if isinstance(r, dict):
            for k, v in r.items():
                if not _absent(v):
                    self._added(f"{path}.{k}", k, v, r, None)
            return
        m = _as_map(field, r, lenient=True) if isinstance(r, list) else None
        if m:
            for k, item in m.items():
                left = _residue(self.kind, f"{path}[{k}]", field, item, r)
                if left is not None:
                    self._add(f"{path}[{k}]", left, None, drift=True, added=True)
            return
        self._add(path, r, None, drift=True, added=True)

    def _add(self, path: str, before: Any, after: Any, *, drift: bool,
             added: bool = False) -> None:
        after_c = _clean(after)
        forces = not self.kind.is_updatable(path) or (
            after_c is None and path in self.kind.updatable_paths)
        self.changes.append(plans.FieldChange(
            path=path, before=_clean(before), after=after_c, drift=drift,
            forces_replacement=forces, added=added))


# --- normalisation ------------------------------------------------------------------

class _Keyed(dict):
    """A keyed list seen as a map from item key to item (path segments in brackets)."""


def _as_map(field: str, v: Any, *, lenient: bool = False) -> dict | None:
    """`v` as a map to recurse into: a dict as is, a keyed list as a `_Keyed`; else None.

    A keyed list whose items do not all have distinct keys is compared as a whole
    value, unless `lenient` (live's side: unkeyable items are skipped)."""
    if isinstance(v, dict):
        return v
    if not isinstance(v, list) or field in kinds_mod.ORDERED_LISTS or field in kinds_mod.SET_LISTS:
        return None
    out = _Keyed()
    for item in v:
        k = kinds_mod.item_key(field, item)
        if k is None or k in out:
            if lenient:
                continue
            return None
        out[k] = item
    if not out and not lenient:
        return None
    return out


def _same_shape(a: dict, b: dict) -> bool:
    return isinstance(a, _Keyed) == isinstance(b, _Keyed)


def _child_field(field: str, m: dict, key: str) -> str:
    # An item of a keyed list keeps the list's field name; an object's member is named
    # by its own key.
    return field if isinstance(m, _Keyed) else key


def _join(path: str, sep: str, key: str) -> str:
    return f"{path}[{key}]" if sep == "[" else f"{path}.{key}"


def _union(a: dict, b: dict) -> list[str]:
    out = list(a)
    out.extend(k for k in b if k not in a)
    return out


def _absent(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, dict):
        return all(_absent(x) for x in v.values())
    if isinstance(v, list):
        return not v
    return False


def identical(a: Any, b: Any) -> bool:
    """Equal with the same types all the way down (Python's == also has True == 1).

    A strict, cheap test: when it holds, the walk below would find no change. Objects
    and arrays compare by their JSON text, keys sorted (orjson, in C), which tells `true`
    from `1` and `1` from `1.0` as the walk does."""
    if a is b:
        return True
    t = type(a)
    if t is not type(b):
        return False
    if t is dict or t is list:
        try:
            return orjson.dumps(a, option=orjson.OPT_SORT_KEYS) == orjson.dumps(
                b, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:  # not JSON data (say an integer beyond 64 bits)
            return _identical_walk(a, b)
    return a == b


def _identical_walk(a: Any, b: Any) -> bool:
    if a is b:
        return True
    t = type(a)
    if t is not type(b):
        return False
    if t is dict:
        return a.keys() == b.keys() and all(_identical_walk(x, b[k]) for k, x in a.items())
    if t is list:
        return len(a) == len(b) and all(_identical_walk(x, y) for x, y in zip(a, b))
    return a == b


def _str_id(v: Any) -> Any:
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, int):
        return str(v)
    return v


def _eq(a: Any, b: Any, field: str) -> bool:
    if a is b:
        return True
    ta, tb = type(a), type(b)
    if ta is str or tb is str:
        return ta is tb and (a == b or (field in kinds_mod.QUANTITY_FIELDS
                                        and quantities.same(a, b)))
    if _absent(a):
        return _absent(b)
    if _absent(b):
        return False
    return _canon(a, field) == _canon(b, field)


def _canon(v: Any, field: str) -> Any:
    """A hashable form of `v` that is equal exactly when the values mean the same."""
    if v is None:
        return None
    t = type(v)
    if t is str:
        if field in kinds_mod.QUANTITY_FIELDS:
            q = quantities.value(v)
            if q is not None:
                return ("q", q)  # `256Gi` is `262144Mi`
        return v
    if t is bool:
        return ("b", v)
    if t is int or t is float:
        return ("n", v)
    if isinstance(v, dict):
        return ("d", frozenset((k, _canon(x, k)) for k, x in v.items() if not _absent(x)))
    if isinstance(v, list):
        if field in kinds_mod.SET_LISTS:
            return ("s", frozenset(_canon(x, field) for x in v))
        m = _as_map(field, v)
        if m is not None:
            return ("k", frozenset((k, _canon(x, field)) for k, x in m.items()))
        return ("l", tuple(_canon(x, field) for x in v))
    return ("o", repr(v))


def _clean(v: Any) -> Any:
    """A copy of `v` without null or empty members (what a change reports)."""
    if isinstance(v, dict):
        out = {k: _clean(x) for k, x in v.items() if not _absent(x)}
        return out or None
    if isinstance(v, list):
        return [_clean(x) for x in v] or None
    return v


# --- ignoreChanges on what is sent -----------------------------------------------------

_SEGMENT = re.compile(r"([^.\[\]]+)|\[([^\]]*)\]")
_MISSING = object()


def keep_ignored(body: dict, prior: dict | None, ignore: Sequence[str]) -> dict:
    """`body` with the value at each `ignore` path taken from `prior` (set, or removed
    where `prior` has none): what a re-create or replacement sends, and what the state
    records. Terraform does the same: ignored attributes keep their prior value, so a
    replacement forced by another field never carries an ignored change along unseen.
    Returns `body` itself when there is nothing to keep."""
    if not ignore or prior is None:
        return body
    out = copy.deepcopy(body)
    for path in ignore:
        segs = _segments(path)
        if segs:
            _put(out, segs, _get(prior, segs))
    return out


def _segments(path: str) -> list[tuple[str, bool]]:
    """"spec.env[A].value" -> [("spec", False), ("env", False), ("A", True), ("value", False)]."""
    return [(name, False) if name else (key, True) for name, key in _SEGMENT.findall(path)]


def _get(obj: Any, segs: list[tuple[str, bool]]) -> Any:
    field = ""
    for seg, keyed in segs:
        if keyed:
            if not isinstance(obj, list):
                return _MISSING
            obj = next((i for i in obj if kinds_mod.item_key(field, i) == seg), _MISSING)
        else:
            if not isinstance(obj, dict) or seg not in obj:
                return _MISSING
            obj, field = obj[seg], seg
        if obj is _MISSING:
            return _MISSING
    return obj


def _put(obj: Any, segs: list[tuple[str, bool]], value: Any) -> None:
    """Set (or, for _MISSING, remove) the value at `segs` inside `obj`, in place."""
    field = ""
    for i, (seg, keyed) in enumerate(segs):
        last = i == len(segs) - 1
        if keyed:
            if not isinstance(obj, list):
                return
            idx = next((n for n, item in enumerate(obj) if kinds_mod.item_key(field, item) == seg), None)
            if last:
                if value is _MISSING:
                    if idx is not None:
                        del obj[idx]
                elif idx is None:
                    obj.append(copy.deepcopy(value))
                else:
                    obj[idx] = copy.deepcopy(value)
                return
            if idx is None:
                return  # the item is gone from the body: nothing of it to keep
            obj = obj[idx]
        else:
            if not isinstance(obj, dict):
                return
            if last:
                if value is _MISSING:
                    obj.pop(seg, None)
                else:
                    obj[seg] = copy.deepcopy(value)
                return
            if seg not in obj:
                if value is _MISSING:
                    return
                obj[seg] = [] if segs[i + 1][1] else {}
            obj, field = obj[seg], seg
