"""Drift: what changed live behind the reconciler's back, for `drift`.

Caller: `reconciler.cli`, through `reconciler.operations`.
"""

from __future__ import annotations

from reconciler import errors
from reconciler.desired.types import DesiredWorkload
from reconciler.operations import running
from reconciler.operations.planning import (
    ClientFactory,
    interrupted,
    loading,
    resolved_without_refresh,
)
from reconciler.operations.states import never_written


def drift(specs_dir: str, store, connect: ClientFactory, *, parallelism: int, progress=None,
          refresh_mode: str = "full"):
    """What changed live behind the reconciler's back (`drift.DriftReport`): a refresh of
    the workloads the state knows, compared with the state; never writes anything (nor
    recovers: the workloads a killed apply was deleting or creating, from the journal's
    open intents, are reported as an interrupted apply, not as drift).

    A state that was never written is an error naming the store: a scheduled check
    pointed at the wrong (or an empty) state must not pass forever with "no drift".

    `refresh_mode` "full" (the default: drift's job is to be exact) GETs every workload;
    "auto" GETs only those whose list entry moved since the state last saw them."""
    from reconciler import drift as drifts

    with loading(specs_dir, connect=connect) as specs:
        state, pending = store.read_with_pending()
        if never_written(store, state):
            raise errors.ReconcileError(
                f"no state at {store.where}: nothing has been applied with it, so "
                "nothing can drift. Point --state at the state your applies write.")
        if not state.resources:
            return drifts.find_drift(running.run(resolved_without_refresh(specs, connect)),
                                     state, {})

        async def run() -> tuple[dict, list]:
            from reconciler import refresh
            from reconciler.live import projects

            async with connect() as client:
                resolved: list[DesiredWorkload] = []

                async def specs_in() -> list[DesiredWorkload]:
                    resolved.extend(await projects.resolve_projects(client, await specs.wait()))
                    return resolved

                if refresh_mode == "full":
                    live = await refresh.read_live(client, specs_in(), state,
                                                   parallelism=parallelism,
                                                   only=set(state.resources),
                                                   progress=progress)
                    return live, resolved
                got = await refresh.read_listed(client, specs_in(), state,
                                                parallelism=parallelism,
                                                only=set(state.resources), progress=progress)
                # What the list vouches for has not moved since it was last seen as
                # recorded: live is the state's record there.
                return got.live, resolved

        live, desired = running.run(run())
    return drifts.find_drift(list(desired), state, live, interrupted=interrupted(pending))
