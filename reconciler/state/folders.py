"""Which specs folder a state was applied from, told apart from another (docs/state-backends.md,
"The specs folder").

A checkout moves (CI runners, laptops), so a folder is identified by up to three keys,
from the most to the least portable:

    git    the path from the git top-level (the nearest folder above holding `.git`)
    state  the path from the state file's folder (a state file only)
    path   the absolute path (symbolic links resolved): the fallback

`same(recorded, current)` decides with the first key both have: two checkouts of one
repository agree on `git` wherever they are, a folder beside its state file on `state`.
Callers: `operations.planning` (plan and apply refuse, with the state's recorded folder,
to delete what another folder does not name) and `operations.importing` (finds the
folder to warn about an imported workload no spec names).
"""

from __future__ import annotations

import os
from pathlib import Path

from reconciler.state.model import SPECS_FOLDER_KEYS

_FROM = {"git": "from the git top-level", "state": "from the state file's folder",
         "path": "absolute"}


def git_top(folder: Path) -> Path | None:
    """The nearest folder at or above `folder` holding `.git` (a folder, or a worktree's
    file), None outside a repository."""
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def identify(specs_dir: str, state_file: Path | None) -> dict[str, str]:
    """The keys of `specs_dir` (see the module's docstring); `state_file` is the local
    state file, None for a database."""
    folder = Path(os.path.realpath(specs_dir))
    out = {"path": folder.as_posix()}
    top = git_top(folder)
    if top is not None:
        out["git"] = folder.relative_to(top).as_posix()
    if state_file is not None:
        anchor = os.path.realpath(Path(state_file).parent)
        out["state"] = Path(os.path.relpath(folder, anchor)).as_posix()
    return out


def deciding_key(recorded: dict[str, str], current: dict[str, str]) -> str | None:
    """The first key both have, which `same` compares."""
    return next((k for k in SPECS_FOLDER_KEYS if k in recorded and k in current), None)


def same(recorded: dict[str, str], current: dict[str, str]) -> bool:
    key = deciding_key(recorded, current)
    return key is not None and recorded[key] == current[key]


def describe(folder: dict[str, str], key: str | None = None) -> str:
    """`folder` for a message: its `key` (default: its most portable), and which one."""
    key = key or next(k for k in SPECS_FOLDER_KEYS if k in folder)
    return f"{folder[key]} ({_FROM[key]})"


def locate(folder: dict[str, str], state_file: Path | None) -> str | None:
    """A path to the recorded `folder` from here, or None when none of its keys leads to an
    existing folder. Tried in turn: beside the state file, in the state file's repository,
    in the current directory's repository, the absolute path."""
    candidates = []
    tops = []
    if state_file is not None:
        anchor = Path(os.path.realpath(Path(state_file).parent))
        if "state" in folder:
            candidates.append(anchor / folder["state"])
        tops.append(git_top(anchor))
    tops.append(git_top(Path.cwd().resolve()))
    if "git" in folder:
        candidates += [top / folder["git"] for top in tops if top is not None]
    if "path" in folder:
        candidates.append(Path(folder["path"]))
    for candidate in candidates:
        if candidate.is_dir():
            rel = os.path.relpath(candidate)
            return str(candidate) if rel.startswith("..") else rel
    return None
