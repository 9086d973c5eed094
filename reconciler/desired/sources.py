"""Spec files on disk → raw documents, each with a map from field path to line number.

Finds `*.yaml`, `*.yml` and `*.json` under a directory (any depth, sorted, hidden files
and folders skipped; each with the `_defaults.yaml` files above it; a symbolic link,
to a file or a folder, that leads outside the directory is refused, named, unless
FOLLOW_ENV allows it), reads them, and
has `parsing` parse them: YAML (several documents per file, empty ones skipped) or JSON
(one object, or a list of them), keeping for the messages each number's or boolean's
text as written. `parsing` (and PyYAML with it) is imported when a file is read, so a
plan whose specs the cache serves lists them without it. Problems (unreadable file,
syntax error, duplicate key) are returned, never raised.
Callers: `reconciler.desired.loader`, `defaults`, `background` and `cache`.

A path is a tuple of keys and list indexes, e.g. ("spec", "environmentVariables", 2).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

SUFFIXES = (".yaml", ".yml", ".json")
# A folder's defaults for the specs at or below it (reconciler.desired.defaults).
DEFAULTS_NAME = "_defaults.yaml"
# A spec file larger than this is refused before it is read (docs/specs.md, "Spec files").
MAX_FILE_BYTES = 10 * 1024 * 1024
_MB = MAX_FILE_BYTES // (1024 * 1024)
# Set (1, yes, true, on): a link in the specs folder to a file or folder outside it is
# followed (docs/specs.md, "Spec files"); else it is refused, named.
FOLLOW_ENV = "RUNAI_RECONCILE_FOLLOW_LINKS_OUTSIDE"
_YES = {"1", "yes", "true", "on"}

Path_ = tuple[str | int, ...]


@dataclass
class Problem:
    file: str
    line: int | None
    path: str  # dotted field path, "" for the document or the file as a whole
    message: str
    # the specs a folder default with this problem was merged into (file is the default's)
    specs: tuple[str, ...] = ()

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        text = f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"
        if self.specs:
            shown = ", ".join(self.specs[:3])
            more = len(self.specs) - 3
            text += f" (a default for {shown}{f' and {more} more' if more > 0 else ''})"
        return text


def problem_lines(problems: list[Problem]) -> list[str]:
    """The problems as text, in order; a folder default's problem met in several specs
    is one line naming them."""
    merged: dict[tuple, Problem] = {}
    for p in problems:
        key = (p.file, p.line, p.path, p.message) if p.specs else (id(p),)
        if key in merged:
            merged[key].specs += p.specs
        else:
            merged[key] = Problem(p.file, p.line, p.path, p.message, p.specs)
    return [str(p) for p in merged.values()]


class RawDocument:
    """One parsed document: its data, the line of its first key, and a map from field
    path to line number (`lines`), worked out only when asked for: problems need it,
    a clean load does not.

    `clean` says the data holds no null and no subtree twice (no alias), so the loader
    may take it as it is instead of copying it without nulls. `texts` maps the path of
    each plain scalar that YAML read as a number, a boolean or null to the text as
    written (worked out with `lines`); `surprising` says one of them has a YAML 1.1 form
    (`parsing.yaml11_form`)."""

    __slots__ = ("file", "data", "line", "clean", "surprising", "_lines", "_texts",
                 "_find_lines", "flawed")

    def __init__(self, file: str, data: Any, lines: dict[Path_, int] | None = None,
                 line: int | None = None, *, clean: bool = False, surprising: bool = False,
                 texts: dict[Path_, str] | None = None,
                 find_lines: Callable[[], tuple[dict[Path_, int], dict[Path_, str]]] | None = None):
        self.file = file  # as the user should see it: the directory they gave joined with the file
        self.data = data
        self.line = line  # line of the document's first key
        self.clean = clean
        self.surprising = surprising
        self._lines = lines
        self._texts = texts
        self._find_lines = find_lines
        # A problem of the file lies in this document (a duplicate key): it is reported
        # with the file's problems, and the document is no valid workload.
        self.flawed = False

    @property
    def lines(self) -> dict[Path_, int]:
        if self._lines is None:
            self._lines, self._texts = (self._find_lines() if self._find_lines is not None
                                        else ({}, {}))
        return self._lines

    @property
    def texts(self) -> dict[Path_, str]:
        if self._texts is None:
            self.lines
        return self._texts or {}

    def line_of(self, path: Path_) -> int | None:
        """The line of `path`, or of its nearest ancestor that the file shows."""
        lines = self.lines
        for n in range(len(path), -1, -1):
            if path[:n] in lines:
                return lines[path[:n]]
        return self.line

    def locate(self, path: Path_) -> tuple[str, int | None, Path_]:
        """The file, line and path (here: this file's own) of the value at `path`."""
        return self.file, self.line_of(path), path

    def written(self, path: Path_) -> str | None:
        """The text of the scalar at `path` as written, when YAML read it as no text."""
        return self.texts.get(path)


# A spec file: its path, its name as the user should see it, and the `_defaults.yaml`
# files (path, name) of its folder and those above it under the root, outermost first.
# A `_defaults.yaml` is listed too (its own problems are reported there), with itself last.
Found = tuple[Path, str, tuple[tuple[Path, str], ...]]


def find_files(root: str | os.PathLike, *, follow_outside: bool | None = None,
               ) -> tuple[list[Found], list[Problem]]:
    """Every spec file under `root` (or `root` itself if a file), sorted by path.

    A symbolic link under `root` (to a file or a folder) that leads outside it is a
    problem naming the link and where it leads, unless `follow_outside` (None: FOLLOW_ENV
    set) allows it; then a folder it leads to is walked too. A link to a folder inside
    `root` is not walked (its files are found where they are)."""
    shown = os.fspath(root)
    base = Path(root)
    if base.is_file():
        return [(base, shown, ())], []
    if not base.is_dir():
        if os.path.lexists(base):  # a FIFO or a device: read_documents refuses it
            return [(base, shown, ())], []
        return [], [Problem(shown, None, "", "no such directory")]
    if follow_outside is None:
        follow_outside = os.environ.get(FOLLOW_ENV, "").strip().lower() in _YES
    problems: list[Problem] = []
    real_root = os.path.join(os.path.realpath(base), "")
    walked = {os.path.realpath(base)}  # the real folders walked: a loop of links ends

    def on_error(exc: OSError) -> None:
        problems.append(Problem(str(Path(shown) / Path(exc.filename).relative_to(base))
                                if exc.filename else shown, None, "", f"cannot read: {exc.strerror}"))

    def leads_outside(path: str, display: str) -> str | None:
        """Where the link `path` leads, when that is outside `root`."""
        target = os.path.realpath(path)
        if os.path.join(target, "").startswith(real_root):
            return None
        if not follow_outside:
            problems.append(Problem(f"{display} -> {target}", None, "",
                                    "the link leads outside the specs folder (refused; "
                                    f"{FOLLOW_ENV}=1 allows it)"))
        return target

    found = []
    chains: dict[Path, tuple[tuple[Path, str], ...]] = {}
    for dirpath, dirnames, filenames in os.walk(base, onerror=on_error, followlinks=follow_outside):
        folder = Path(dirpath)
        chain = chains.get(folder.parent, ())
        # pathlib once a folder; a file's sort key and display name are joined as text
        rel = folder.relative_to(base)
        key_prefix = f"{rel.as_posix()}/" if rel.parts else ""
        shown_folder = str(Path(shown) / rel)
        shown_prefix = "" if shown_folder == "." else os.path.join(shown_folder, "")
        kept = []
        for d in sorted(dirnames):
            if d.startswith("."):
                continue
            sub = os.path.join(dirpath, d)
            if os.path.islink(sub):
                target = leads_outside(sub, shown_prefix + d)
                if target is None or not follow_outside or target in walked:
                    continue  # inside: walked where it is; outside: refused, or walked once
                walked.add(target)
            kept.append(d)
        dirnames[:] = kept
        here = []
        for name in filenames:
            lower = name.lower()
            if name.startswith(".") or not lower.endswith(SUFFIXES):
                continue
            path = folder / name
            display = shown_prefix + name
            if (not follow_outside and os.path.islink(path)
                    and leads_outside(os.fspath(path), display) is not None):
                continue
            if lower == DEFAULTS_NAME:
                chain = chain + ((path, display),)
            elif lower.startswith("_defaults."):
                problems.append(Problem(display, None, "", f"folder defaults must be named "
                                        f"{DEFAULTS_NAME}: this file is not read"))
                continue
            here.append((key_prefix + name, path, display))
        chains[folder] = chain
        found.extend((*entry, chain) for entry in here)
    found.sort()
    return [(p, d, c) for _, p, d, c in found], problems


def read_documents(path: Path, display: str) -> tuple[list[RawDocument], list[Problem]]:
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):  # a FIFO blocks, a device reads without end
            return [], [Problem(display, None, "", "is not a regular file (a pipe, a device "
                                "or a socket?): refused without reading it")]
        too_big = [Problem(display, None, "", f"is larger than the {_MB} MB a spec file may "
                           "be: refused without reading it all")]
        if info.st_size > MAX_FILE_BYTES:
            return [], too_big
        with path.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)  # it may have grown since the stat
        if len(raw) > MAX_FILE_BYTES:
            return [], too_big
    except OSError as exc:
        return [], [Problem(display, None, "", f"cannot read: {exc.strerror or exc}")]
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return [], [Problem(display, None, "", "is not UTF-8 text")]
    from reconciler.desired import parsing  # PyYAML with it: only once a file is read

    if path.name.lower().endswith(".json"):
        return parsing.json_documents(text, display)
    return parsing.yaml_documents(text, display)


def dotted(path: Path_) -> str:
    """("spec", "ports", 0, "container") → "spec.ports[0].container"."""
    out = ""
    for seg in path:
        out += f"[{seg}]" if isinstance(seg, int) else (f".{seg}" if out else str(seg))
    return out
