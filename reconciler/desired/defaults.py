"""Folder defaults: a `_defaults.yaml` in a specs folder supplies fields to every spec at
or below that folder.

The spec is merged over the deepest `_defaults.yaml`, that one over the next folder up,
and so on (docs/specs.md, "Folder defaults"):
- mappings merge key by key, at every depth;
- a keyed list (items with an identity, `kinds.item_key`: environmentVariables, labels,
  annotations, imagePullSecrets by name, ports by container, ...) merges by key: an item
  of the deeper file replaces the item of the same key whole, in its place; new items
  follow;
- a scalar, or any other list (nodePools, ignoreChanges, ...), of the deeper file
  replaces the other's; `null` removes it;
- `project` and `projectId` are one field: either one replaces the other;
- `lifecycle.sensitive` is the union: a spec cannot unmask what its folder masks.
`name` cannot be a default. A merged document (`Layered`) knows which file and which path
in it each value came from (`locate`), so that problems name the defaults file and its
line. Subtrees taken from a defaults file are shared by the specs that take them (the
engine never changes a body in place: diff copies before it edits).
Caller: `reconciler.desired.loader`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reconciler import kinds
from reconciler.desired import sources
from reconciler.desired.sources import Path_, Problem, RawDocument

NAME = sources.DEFAULTS_NAME
_UPPER, _LOWER = 0, 1
_ONE_OF = {"project": "projectId", "projectId": "project"}
_UNION = ("lifecycle", "sensitive")


class Layered:
    """A document merged over the defaults below it (`lower`: a `_defaults.yaml`'s
    document or another Layered). Seen by the loader as the upper document is, with
    `locate` and `written` looking each path up in the layer it came from."""

    __slots__ = ("upper", "lower", "data", "origin", "file", "line", "clean", "surprising")

    def __init__(self, upper: RawDocument | Layered, lower: RawDocument | Layered):
        self.upper, self.lower = upper, lower
        self.origin: dict[Path_, tuple[int, Path_]] = {}
        self.data = merge(upper.data, lower.data, self.origin)
        self.file, self.line = upper.file, upper.line
        self.clean = upper.clean and lower.clean
        self.surprising = upper.surprising or lower.surprising

    def resolve(self, path: Path_) -> tuple[RawDocument, Path_]:
        """The file's document that `path` came from, and its path there."""
        layer: Any = self
        while isinstance(layer, Layered):
            for n in range(len(path), 0, -1):
                hit = layer.origin.get(path[:n])
                if hit is not None:
                    side, sub = hit
                    layer, path = (layer.upper if side == _UPPER else layer.lower), sub + path[n:]
                    break
            else:
                layer = layer.upper
        return layer, path

    def locate(self, path: Path_) -> tuple[str, int | None, Path_]:
        doc, sub = self.resolve(path)
        return doc.file, doc.line_of(sub), sub

    def written(self, path: Path_) -> str | None:
        doc, sub = self.resolve(path)
        return doc.written(sub)


def merge(upper: Any, lower: Any, origin: dict[Path_, tuple[int, Path_]],
          path: Path_ = ()) -> Any:
    """`upper` over `lower` by the rules above; `origin` receives, for each subtree taken
    from `lower` and each item of a merged keyed list, (side, its path on that side)."""
    if not (isinstance(upper, dict) and isinstance(lower, dict)):
        return upper
    out: dict = {}
    for key, value in upper.items():
        if key not in lower or value is None:
            out[key] = value
            continue
        sub = path + (key,)
        other = lower[key]
        if isinstance(value, dict) and isinstance(other, dict):
            out[key] = merge(value, other, origin, sub)
        elif isinstance(value, list) and isinstance(other, list):
            out[key] = _merge_lists(str(key), value, other, origin, sub)
        else:
            out[key] = value
    for key, value in lower.items():
        if key not in upper and not (path == () and _ONE_OF.get(key) in upper):
            out[key] = value
            origin[path + (key,)] = (_LOWER, path + (key,))
    return out


def _merge_lists(field: str, upper: list, lower: list, origin: dict, path: Path_) -> list:
    if path == _UNION:
        taken = [item for item in lower if item not in upper]
        for i, item in enumerate(taken):
            origin[path + (len(upper) + i,)] = (_LOWER, path + (lower.index(item),))
        return upper + taken
    upper_keys = [kinds.item_key(field, item) for item in upper]
    lower_keys = [kinds.item_key(field, item) for item in lower]
    if all(key is None for key in upper_keys + lower_keys):
        return upper  # not a keyed list: it replaces
    # An item without a key (its name missing) or with another's key matches none: it is
    # kept, so that validation reports it at its line instead of the merge dropping it.
    index: dict[str, int] = {}
    for i, key in enumerate(upper_keys):
        if key is not None:
            index.setdefault(key, i)
    out, taken = [], set()
    for j, key in enumerate(lower_keys):
        i = index.get(key) if key is not None else None
        if i is None or i in taken:
            origin[path + (len(out),)] = (_LOWER, path + (j,))
            out.append(lower[j])
        else:
            taken.add(i)
            origin[path + (len(out),)] = (_UPPER, path + (i,))
            out.append(upper[i])
    for i, item in enumerate(upper):
        if i not in taken:
            origin[path + (len(out),)] = (_UPPER, path + (i,))
            out.append(item)
    return out


# --- the _defaults.yaml files ----------------------------------------------------------

Chain = tuple[tuple[Path, str], ...]


def read(path: Path, display: str) -> tuple[RawDocument | None, list[Problem]]:
    """The document of one `_defaults.yaml` and the problems of the file itself."""
    docs, problems = sources.read_documents(path, display)
    if problems:
        return None, problems
    if len(docs) > 1:
        return None, [Problem(display, docs[1].line, "", f"{NAME} holds one document, "
                              "the fields for every spec at or below its folder")]
    if not docs:
        return RawDocument(display, {}, {}, clean=True), []
    doc = docs[0]
    if not isinstance(doc.data, dict):
        return None, [Problem(display, doc.line, "", f"{NAME} must be a mapping of spec "
                              "fields (such as clusterId, projectId, spec.labels)")]
    if "name" in doc.data:
        return None, [Problem(display, doc.line_of(("name",)), "name", "cannot be a "
                              "default: every spec names itself")]
    return doc, []


class Folders:
    """The merged defaults of each folder, read once per load (a `load_share` call)."""

    def __init__(self) -> None:
        self._files: dict[Path, RawDocument | None] = {}
        self._chains: dict[Chain, RawDocument | Layered | None] = {}

    def layer(self, chain: Chain) -> RawDocument | Layered | None:
        """The defaults `chain` (outermost first) merged, or None when one of its files
        is broken (that file's own problems are reported where it is listed)."""
        if chain not in self._chains:
            lower = self.layer(chain[:-1]) if len(chain) > 1 else None
            path, display = chain[-1]
            if path not in self._files:
                self._files[path] = read(path, display)[0]
            doc = self._files[path]
            if doc is None or (len(chain) > 1 and lower is None):
                self._chains[chain] = None
            else:
                self._chains[chain] = doc if lower is None else Layered(doc, lower)
        return self._chains[chain]
