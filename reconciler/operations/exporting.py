"""Export: one spec file per live workload (`export`), read from the API and written all
or nothing (`specfiles.write_all`); what a spec holds is `reconciler.export`'s (pure).

The reads are `reconciler.live`'s (the lists, the `--project` lookups, the bounded GETs).
Caller: `reconciler.cli`, through `reconciler.operations`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reconciler import errors
from reconciler.operations import running
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


def export(out_dir: str, connect: ClientFactory, options: ExportOptions,
           store=None) -> ExportResult:
    """Write one spec file per live workload, `<out_dir>/<project>/<kind>/<name>.yaml`
    (`export.spec_from_live`), the organisation's types under `<out_dir>/organisation/`
    (`export.relative_path`), and nothing when any of them exists already, unless
    `options.force`. Reads the workloads list once, then GETs each workload; no API write.
    `store` (the state, read only) gives the paths each workload's record marks sensitive."""
    from reconciler import export as exporting

    if not out_dir.strip():
        raise errors.ReconcileError("--out: an empty folder name (give . for this folder); "
                                    "nothing was written")
    if os.path.lexists(out_dir) and not os.path.isdir(out_dir):
        raise errors.ReconcileError(f"--out {out_dir}: not a folder (a file, or a link to "
                                    "none); nothing was written")
    sensitive: dict[str, list[str]] = {}  # workload id -> the state's sensitive paths
    if store is not None:
        for record in store.read().resources.values():
            if record.workload_id and record.sensitive:
                sensitive[str(record.workload_id)] = list(record.sensitive)
    found, skipped, units = running.run(_read_for_export(connect, options))
    made = []
    for item, live, kind, project_name in found:
        doc = exporting.spec_from_live(kind.name, live, project_name=project_name,
                                       include_secrets=options.include_secrets,
                                       sensitive=sensitive.get(str(item["id"]), ()))
        made.append((kind, doc, exporting.address(doc, str(live.get("projectId")),
                                                  live.get("name")), item["id"]))
    # The organisation's specs sit beside the units they belong to (a folder per
    # department): where each unit goes, from the units exported and those read to place.
    folders = exporting.unit_folders([*units, *((kind, doc) for kind, doc, _, _ in made)])
    docs: dict[str, dict] = {}
    ids: dict[str, tuple[str, str]] = {}  # relative path -> (address, workload id)
    for kind, doc, address, workload_id in made:
        rel = exporting.relative_path(doc, folders)
        if rel in ids:
            raise errors.ReconcileError(
                f"{address} and {ids[rel][0]} would both be written to "
                f"{os.path.join(out_dir, rel)}; nothing was written: export them apart "
                "(--kind or --name)")
        docs[rel] = doc
        ids[rel] = (address, workload_id)
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
    the specs as exported, `docs` as written beside the new defaults `shared`.

    Each is read as `validate` and `plan` read it (`desired.defaults.read`: a duplicate
    key or a runaway alias refused, numbers and booleans as YAML 1.2 reads them, `8:` a
    key "8"), not as a bare YAML 1.1 load would; one the loader refuses is refused here
    too, with its file and line, before anything is written."""
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
                on_disk[name] = _read_defaults(os.path.join(out_dir, name))
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


def _read_defaults(path: str) -> dict | None:
    """The fields of the `_defaults.yaml` at `path` as the spec loader reads them, None
    when there is none; `errors.ReconcileError` with its problems when it is broken."""
    import pathlib

    from reconciler.desired import defaults as folder_defaults

    if not os.path.isfile(path):
        return None
    doc, problems = folder_defaults.read(pathlib.Path(path), path)
    if problems:
        raise errors.ReconcileError(
            "; ".join(map(str, problems)) + "; nothing was written: mend it (validate reads "
            "it into every spec below its folder), move it away, or export into another "
            "folder")
    return doc.data if doc is not None and isinstance(doc.data, dict) else None


async def _read_for_export(connect: ClientFactory, options: ExportOptions):
    """([(list item, live body, kind, project name or None)], skipped counts, [(kind, flat
    body)] of the units read only to place the others): the live workloads that `options`
    select, read with at most `parallelism` GETs in flight."""
    import fnmatch

    from reconciler import export as exporting
    from reconciler import kinds as kinds_mod
    from reconciler.live import projects as live_projects
    from reconciler.live import reads, workloads

    # The types in no project (the organisation's: units, access rules) are exported when
    # --kind asks for them; the rest by default.
    wanted_kinds = {kinds_mod.get(k) for k in options.kinds} or {
        k for k in kinds_mod.KINDS.values() if k.address_scope == "project"}
    skipped = {"deleted": 0, "completed": 0}
    async with connect() as client:
        items, deleted = await workloads.list_all(client, {k.name for k in wanted_kinds})
        projects = await live_projects.select_projects(client, options.projects, items)
        names = live_projects.names_by_id(items)

        def selected(item: dict) -> tuple[bool, Any]:
            """Whether the filters keep `item`, and its kind when the list says it."""
            kind = exporting.kind_of_list_type(item.get("type"))
            return (not (projects is not None and str(item.get("projectId")) not in projects)
                    and not (options.names and not any(
                        fnmatch.fnmatchcase(str(item.get("name")), g) for g in options.names))
                    and (kind in wanted_kinds or kind is None)), kind

        # The deleted ones are only counted (their kind, when the list does not say it,
        # taken as selected), each once: one may move to the deleted list between the reads.
        gone = {str(i.get("id")) for i in deleted if selected(i)[0]}
        chosen = []
        for item in items:
            keep, kind = selected(item)
            if keep:
                chosen.append((item, [kind] if kind else sorted(wanted_kinds,
                                                                key=lambda k: k.name)))
        reader = reads.Reader(client, options.parallelism)
        # The specs placed beside organisation units (access rules, Run:ai policies) need
        # the units' folders, also when the units themselves are not exported: their
        # collections are read for that alone.
        placing = [k for k in sorted(kinds_mod.KINDS.values(), key=lambda k: k.name)
                   if k.hooks.export_units and k not in wanted_kinds] if any(
            k.address_scope != "project" and not k.hooks.export_units
            for k in wanted_kinds) else []
        answers, collections = await asyncio.gather(
            asyncio.gather(*(reader.get_any(item["id"], c) for item, c in chosen)),
            asyncio.gather(*(client.iter_collection(k) for k in placing)))
    units = [(k, body) for k, bodies in zip(placing, collections) for body in bodies
             if isinstance(body, dict)]
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
    return found, skipped, units


def _safe_file_name(name: str) -> bool:
    return bool(name) and name not in (".", "..") and not any(c in name for c in "/\\\0")
