"""Export: one spec file per live workload (`export`), read from the API and written all
or nothing (`specfiles.write_all`); what a spec holds is `reconciler.export`'s (pure).

Callers: `reconciler.cli` (through `reconciler.operations`); `importing` looks a
workload up by id with `get_any`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reconciler import errors
from reconciler.operations.planning import ClientFactory
from reconciler.operations.specfiles import write_all


@dataclass
class ExportOptions:
    projects: Sequence[str] = ()  # project ids or names: only these
    kinds: Sequence[str] = ()  # kind names: only these
    names: Sequence[str] = ()  # shell-style globs of workload names: only those matching one
    force: bool = False  # overwrite existing files
    include_secrets: bool = False  # write sensitive values instead of the placeholder
    defaults: bool = False  # factor what a folder's specs share into its _defaults.yaml
    parallelism: int = 64


@dataclass
class Exported:
    address: str
    path: str  # the file written
    workload_id: str
    secrets: list[str]  # the dotted paths holding the placeholder: to supply before validate


@dataclass
class ExportResult:
    out_dir: str
    exported: list[Exported]
    skipped: dict[str, int]  # why ("deleted", "completed") -> how many
    defaults_files: list[str]  # the _defaults.yaml files written (--defaults)


def export(out_dir: str, connect: ClientFactory, options: ExportOptions) -> ExportResult:
    """Write one spec file per live workload, `<out_dir>/<project>/<kind>/<name>.yaml`
    (`export.spec_from_live`), and nothing when any of them exists already, unless
    `options.force`. Reads the workloads list once, then GETs each workload; no API write."""
    from reconciler import export as exporting

    if not out_dir.strip():
        raise errors.ReconcileError("--out: an empty folder name (give . for this folder); "
                                    "nothing was written")
    if os.path.lexists(out_dir) and not os.path.isdir(out_dir):
        raise errors.ReconcileError(f"--out {out_dir}: not a folder (a file, or a link to "
                                    "none); nothing was written")
    found, skipped = asyncio.run(_read_for_export(connect, options))
    docs: dict[str, dict] = {}
    ids: dict[str, tuple[str, str]] = {}  # relative path -> (address, workload id)
    for item, live, kind, project_name in found:
        doc = exporting.spec_from_live(kind.name, live, project_name=project_name,
                                       include_secrets=options.include_secrets)
        rel = exporting.relative_path(doc)
        docs[rel] = doc
        ids[rel] = (exporting.address(doc, str(live.get("projectId"))), item["id"])
    shared: dict[str, dict] = {}
    intended = docs
    if options.defaults:
        docs, shared = exporting.factor_defaults(docs, folders=_own_folders(out_dir, docs))
    _refuse_foreign_defaults(out_dir, intended, docs, shared)
    files: dict[str, str] = {}
    exported: list[Exported] = []
    for rel, doc in docs.items():
        address, workload_id = ids[rel]
        path = os.path.join(out_dir, rel)
        secrets = exporting.withheld(doc)
        note = [f"Exported by runai-reconcile export: {address} (workload {workload_id})."]
        if secrets:
            note.append("Withheld secrets (validate refuses the placeholder; supply a secret "
                        "reference or the value): " + ", ".join(secrets))
        files[path] = exporting.to_yaml(doc, comment="\n".join(note))
        exported.append(Exported(address, path, workload_id, secrets))
    for rel, doc in shared.items():
        files[os.path.join(out_dir, rel)] = exporting.to_yaml(doc, comment=(
            "Exported by runai-reconcile export --defaults: what every spec at or below this "
            "folder shares\n(merged into each of them; a spec's own value wins)."))
    # A file with a secret's value in it is for its owner's eyes only.
    write_all(files, force=options.force, mode=0o600 if options.include_secrets else 0o644)
    return ExportResult(out_dir, sorted(exported, key=lambda e: e.path), skipped,
                        sorted(os.path.join(out_dir, rel) for rel in shared))


def _own_folders(out_dir: str, docs: dict[str, dict]) -> list[str]:
    """The folders (relative to `out_dir`, "" the top) holding no spec file but those of
    `docs`: only there may a `_defaults.yaml` go without changing another spec."""
    import pathlib

    from reconciler import export as exporting

    foreign: set[str] = set()
    root = pathlib.Path(out_dir)
    if root.is_dir():
        for path in root.rglob("*"):
            rel = path.relative_to(root).as_posix()
            if (path.suffix.lower() in (".yaml", ".yml", ".json") and rel not in docs
                    and path.name != exporting.DEFAULTS_FILE):
                foreign.add(rel)
    folders = {"/".join(rel.split("/")[:n]) for rel in docs for n in range(rel.count("/") + 1)}
    return sorted(f for f in folders
                  if not any(f == "" or rel.startswith(f + "/") for rel in foreign))


def _refuse_foreign_defaults(out_dir: str, intended: dict[str, dict], docs: dict[str, dict],
                             shared: dict[str, dict]) -> None:
    """Refuse when a `_defaults.yaml` in `out_dir` that this export does not write (the
    user's, or a stale one of an earlier export) would merge into an exported spec what
    the live workload does not have: its next plan would show a change. `intended` are
    the specs as exported, `docs` as written beside the new defaults `shared`."""
    import pathlib

    import yaml

    from reconciler import export as exporting
    from reconciler.desired import defaults as folder_defaults

    on_disk: dict[str, Any] = {}
    for rel, doc in docs.items():
        folders = rel.split("/")[:-1]
        merged: dict = {}
        foreign = []
        for n in range(len(folders) + 1):
            name = "/".join([*folders[:n], exporting.DEFAULTS_FILE])
            if name not in shared and name not in on_disk:
                try:
                    on_disk[name] = yaml.safe_load(pathlib.Path(out_dir, name).read_text())
                except (OSError, UnicodeDecodeError, yaml.YAMLError):
                    on_disk[name] = None  # none, or broken: validate says so
            layer = shared.get(name, on_disk.get(name))
            if isinstance(layer, dict):
                merged = folder_defaults.merge(layer, merged, {})
                if name not in shared:
                    foreign.append((os.path.join(out_dir, name), layer))
        if foreign and not exporting.same_workload(
                folder_defaults.merge(doc, merged, {}), intended[rel]):
            # The files that add something on their own, else all of them together.
            blamed = [path for path, layer in foreign if not exporting.same_workload(
                folder_defaults.merge(intended[rel], layer, {}), intended[rel])]
            blamed = blamed or [path for path, _ in foreign]
            raise errors.ReconcileError(
                f"{' and '.join(blamed)} would add to {os.path.join(out_dir, rel)} fields "
                "its live workload does not have (the next plan would change it); nothing "
                f"was written: move {'it' if len(blamed) == 1 else 'them'} away, or export "
                "into another folder")


async def _read_for_export(connect: ClientFactory, options: ExportOptions):
    """([(list item, live body, kind, project name or None)], skipped counts): the live
    workloads that `options` select, read with at most `parallelism` GETs in flight."""
    import fnmatch

    from reconciler import export as exporting
    from reconciler import kinds as kinds_mod

    wanted_kinds = {kinds_mod.get(k) for k in options.kinds} or set(kinds_mod.KINDS.values())
    skipped = {"deleted": 0, "completed": 0}
    async with connect() as client:
        listed, deleted = await asyncio.gather(client.iter_workloads(),
                                               client.iter_workloads(deleted=True))
        items = [i for i in listed if isinstance(i, dict) and i.get("id") and i.get("name")]
        projects = await _export_projects(client, items, options.projects)
        names = _project_names(items)

        def selected(item: dict) -> tuple[bool, Any]:
            """Whether the filters keep `item`, and its kind when the list says it."""
            kind = exporting.kind_of_list_type(item.get("type"))
            return (not (projects is not None and str(item.get("projectId")) not in projects)
                    and not (options.names and not any(
                        fnmatch.fnmatchcase(str(item.get("name")), g) for g in options.names))
                    and (kind in wanted_kinds or kind is None)), kind

        # The deleted ones are only counted (their kind, when the list does not say it,
        # taken as selected), each once: one may move to the deleted list between the reads.
        gone = {str(i.get("id")) for i in deleted if isinstance(i, dict) and selected(i)[0]}
        chosen = []
        for item in items:
            keep, kind = selected(item)
            if keep:
                chosen.append((item, [kind] if kind else sorted(wanted_kinds,
                                                                key=lambda k: k.name)))
        sem = asyncio.Semaphore(max(1, options.parallelism))

        async def read(item, candidates):
            async with sem:
                return await get_any(client, item["id"], candidates)

        answers = await asyncio.gather(*(read(item, c) for item, c in chosen))
    found = []
    for (item, _), answer in zip(chosen, answers):
        reason = "deleted" if answer is None else exporting.skip_reason(answer[0].name, answer[1])
        if reason == "deleted":  # being deleted, or gone since it was listed
            gone.add(item["id"])
        elif reason:
            skipped[reason] += 1
        if reason:
            continue
        kind, live = answer
        if not _safe_file_name(str(live.get("name"))):
            raise errors.ReconcileError(
                f"workload {item['id']} is named {live.get('name')!r}, which cannot be a file "
                "name; leave it out with --name")
        found.append((item, live, kind, names.get(str(live.get("projectId")))))
    skipped["deleted"] = len(gone)
    return found, skipped


async def get_any(client, workload_id: str, candidates):
    """(kind, live body) of the workload, trying each candidate kind's endpoint in turn;
    None when none has it (another error than a 404 is raised)."""
    from reconciler.api import errors as api_errors

    for kind in candidates:
        try:
            return kind, await client.get(kind, workload_id)
        except api_errors.NotFound:
            continue
    return None


async def _export_projects(client, items: list[dict], wanted: Sequence[str]) -> set[str] | None:
    """The project ids `--project` values (ids or names) select; None for all. A value that
    names no project is an error (with the closest known names)."""
    import difflib

    from reconciler.api import errors as api_errors

    if not wanted:
        return None
    ids: set[str] = set()
    for value in wanted:
        if not value.strip():  # a name filter of nothing is the API's 400
            raise errors.ReconcileError("--project: an empty value; give a project's id or name")
        hit = {str(i.get("projectId")) for i in items
               if value in (str(i.get("projectId")), i.get("projectName"))}
        if not hit and value.isdigit():
            try:
                await client.get_project(value)
                hit = {value}
            except api_errors.NotFound:
                pass
        elif not hit:
            clusters = sorted({str(i["clusterId"]) for i in items if i.get("clusterId")})
            for answer in await asyncio.gather(*(client.find_projects(value, c)
                                                 for c in clusters)):
                hit |= {str(p["id"]) for p in answer if p.get("id") is not None}
        if not hit:
            known = sorted({str(i["projectName"]) for i in items if i.get("projectName")})
            close = difflib.get_close_matches(value, known, n=3)
            hint = f" (did you mean {' or '.join(close)}?)" if close else ""
            raise errors.ReconcileError(f"--project {value}: no such project{hint}")
        ids |= hit
    return ids


def _project_names(items: list[dict]) -> dict[str, str]:
    """Project id -> name, for the names that are valid in a spec and name one project."""
    import re

    ids_of: dict[str, set[str]] = {}
    for i in items:
        name = i.get("projectName")
        if isinstance(name, str) and re.fullmatch(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?", name):
            ids_of.setdefault(name, set()).add(str(i.get("projectId")))
    return {next(iter(ids)): name for name, ids in ids_of.items() if len(ids) == 1}


def _safe_file_name(name: str) -> bool:
    return bool(name) and name not in (".", "..") and not any(c in name for c in "/\\\0")
