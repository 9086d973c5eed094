"""Adoption: `import ADDRESS ID` and `import --all`, which record live workloads in the
state without any API write (what is recorded: `reconciler.adoption`).

Caller: `reconciler.cli`, through `reconciler.operations`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from reconciler import errors
from reconciler.desired.types import DesiredWorkload
from reconciler.operations import running
from reconciler.operations.planning import ClientFactory, loading, validate
from reconciler.operations.states import refuse_pending
from reconciler.state.model import State


_UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")


@dataclass
class ImportResult:
    adopted: list[tuple[str, str]]  # (address, workload id) now in the state
    serial: int  # the state's serial after the write (unchanged when nothing was adopted)
    not_found: list[str]  # addresses of specs with no live workload (import --all)
    skipped: list[tuple[str, str]]  # (address, why not) of specs found but not adopted
    known: int = 0  # specs whose address the state holds already
    warnings: list[str] = field(default_factory=list)  # for stderr: what to do before apply


def import_workload(store, connect: ClientFactory, address: str,
                    workload_id: str) -> ImportResult:
    """Record the live workload `workload_id` under `address` without any API write.

    Refused (`errors.ReconcileError`, nothing written): a malformed address, one the
    state holds already (or a workload it holds under another address), an id no kind
    knows, a workload whose kind, project or name is not the address's, one being
    deleted, and a state whose journal holds an interrupted apply's actions."""
    from reconciler import adoption, kinds, phases

    try:
        kind_name = kinds.parse_address(address)[0]
    except ValueError as exc:
        raise errors.ReconcileError(str(exc)) from None
    # The API's workloadId is a UUID (format: uuid); anything else would be sent as a path
    # ("", "a/b", "..": another endpoint, or none).
    if not _UUID.fullmatch(workload_id):
        raise errors.ReconcileError(
            f"workload id {workload_id!r}: expected a workload's UUID, as the API's workload "
            "list gives it (e.g. 3f2504e0-4f89-41d3-9a0c-0305e82c3301); nothing was written")
    with store.lock("import"):
        state, pending = store.read_with_pending()
        refuse_pending(store, pending, "import")
        _refuse_known(state, address, workload_id)

        async def run() -> tuple[kinds.Kind, dict]:
            from reconciler.live.reads import Reader

            async with connect() as client:
                return await _live_by_id(Reader(client, 1), kinds.get(kind_name), workload_id)

        found_kind, live = running.run(run())
        problems = adoption.mismatches(address, found_kind.name, live)
        if problems:
            raise errors.ReconcileError(
                f"workload {workload_id} does not match {address}: " + "; ".join(problems)
                + "; nothing was written")
        if phases.live_gone(live):
            raise errors.ReconcileError(f"workload {workload_id} is being deleted; nothing "
                                        "was written")
        record = adoption.record(found_kind, live,
                                 key=lambda: state.secret_key(create=True))
        state.set(record)
        store.write(state)
    return ImportResult(adopted=[(address, workload_id)], serial=state.serial, not_found=[],
                        skipped=[], warnings=_unnamed(store, state, record, workload_id))


def _unnamed(store, state: State, record, workload_id: str) -> list[str]:
    """A warning when no spec of the state's specs folder (the one it was last applied
    from; else specs/) names the imported workload: the next apply of it would delete
    what was just adopted."""
    import os

    from reconciler.state import folders

    address = record.address
    recorded = state.specs_folder
    folder = folders.locate(recorded, store.local_file) if recorded else (
        "specs" if os.path.isdir("specs") else None)
    fix = (f"`runai-reconcile export --project {record.project_id} --kind {record.kind} "
           f"--name {record.name} --out DIR` writes its spec")
    if folder is None:
        where = (f"the specs folder {folders.describe(recorded)} the state was last applied "
                 "from is not found here" if recorded else
                 "the state records no specs folder and there is no specs/ here")
        return [f"no spec was checked for {address} ({where}): an apply of a folder without "
                f"its spec deletes workload {workload_id}; {fix}"]
    try:
        desired = validate(folder)
    except errors.SpecError as exc:
        return [f"could not check that a spec of {folder} names {address}: its specs have "
                f"{len(exc.problems)} problem{'s' if len(exc.problems) != 1 else ''} "
                f"(`runai-reconcile validate {folder}`)"]
    if any(d.kind == record.kind and d.name == record.name and (
            d.project_id == record.project_id
            or (not d.resolved and d.project_name is not None
                and d.project_name == record.project_name)) for d in desired):
        return []
    return [f"no spec in {folder} names {address}: the next apply of {folder} would delete "
            f"workload {workload_id}; {fix.replace('DIR', folder)} first"]


def _refuse_known(state: State, address: str, workload_id: str) -> None:
    held = state.resources.get(address)
    if held is not None:
        raise errors.ReconcileError(
            f"{address} is in the state already (workload {held.workload_id}); nothing was "
            f"written. `runai-reconcile state rm {address}` first to import it again")
    for other, res in state.resources.items():
        if res.workload_id == workload_id:
            raise errors.ReconcileError(
                f"workload {workload_id} is in the state already, as {other}; nothing was "
                "written")


async def _live_by_id(reader, kind, workload_id: str):
    """(its kind, the GET body) of the workload `workload_id`: asked of `kind` first, and
    when that kind does not know it, of the others (the id may be another kind's)."""
    from reconciler import kinds

    found = await reader.get_any(workload_id,
                                 [kind, *(k for k in kinds.KINDS.values() if k is not kind)])
    if found is None:
        raise errors.ReconcileError(f"no workload with id {workload_id} (no kind knows it); "
                                    "nothing was written")
    return found


def import_all(specs_dir: str, store, connect: ClientFactory, *,
               projects: Sequence[str] = (), kind_names: Sequence[str] = (),
               parallelism: int = 64) -> ImportResult:
    """Record every live workload that a spec of `specs_dir` names and the state does not
    hold, without any API write, in one state write; `projects` (ids or names) and
    `kind_names` limit the specs considered. The live workloads are found as the plan
    finds them (`live.workloads.find_by_name`: one workload list per project, pages of
    500) and read with one GET each."""
    from reconciler import adoption, kinds, phases
    from reconciler.live import reads, workloads
    from reconciler.live.projects import resolve_projects

    with loading(specs_dir) as specs, store.lock("import"):
        state, pending = store.read_with_pending()
        refuse_pending(store, pending, "import")

        async def run():
            async with connect() as client:
                desired = await resolve_projects(client, await specs.wait())
                chosen = _chosen(desired, projects, kind_names)
                wanted = [d for d in chosen if d.address not in state.resources]
                if not wanted:
                    return chosen, wanted, {}
                found = await workloads.find_by_name(client, wanted)
                reader = reads.Reader(client, parallelism)
                listed_wanted = [d for d in wanted if d.address in found]
                # None: another kind holds the name, or it is gone.
                bodies = await asyncio.gather(*(reader.get(kinds.get(d.kind), found[d.address])
                                                for d in listed_wanted))
                return chosen, wanted, {d.address: b for d, b in zip(listed_wanted, bodies)}

        chosen, wanted, live = running.run(run())
        result = ImportResult(adopted=[], serial=state.serial, not_found=[], skipped=[],
                              known=len(chosen) - len(wanted))
        for d in sorted(wanted, key=lambda d: d.address):
            body = live.get(d.address)
            if d.address not in live:
                result.not_found.append(d.address)
            elif body is None:
                result.skipped.append((d.address, "its name is taken by a workload of "
                                       "another kind"))
            elif phases.live_gone(body):
                result.skipped.append((d.address, f"workload {body.get('workloadId')} is "
                                       "being deleted"))
            else:
                state.set(adoption.record(kinds.get(d.kind), body, desired=d,
                                          key=lambda: state.secret_key(create=True)))
                result.adopted.append((d.address, str(body.get("workloadId"))))
        if result.adopted:
            store.write(state)
            result.serial = state.serial
    return result


def _chosen(desired: Sequence[DesiredWorkload], projects: Sequence[str],
            kind_names: Sequence[str]) -> list[DesiredWorkload]:
    """The specs of the projects (ids or names) and kinds asked for; a project that no
    spec names is an error (a typo must not read as "nothing to import")."""
    from reconciler.live.projects import names_project

    unknown = [p for p in projects
               if not any(names_project(p, d.project_id, d.project_name) for d in desired)]
    if unknown:
        raise errors.ReconcileError(
            "--project " + ", ".join(unknown) + ": no spec names this project (by id or "
            "name); nothing was written")
    return [d for d in desired
            if (not projects or any(names_project(p, d.project_id, d.project_name)
                                    for p in projects))
            and (not kind_names or d.kind in kind_names)]
