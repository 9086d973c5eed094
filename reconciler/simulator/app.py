"""The simulated Run:ai control plane as a Starlette app: its state, and the routes the
other modules define, put together.

Callers: `create_app` is used by tests (through httpx's ASGI transport), by the CLI's
`--sim` mode and by `runai-reconcile sim serve` (uvicorn, `command.py`). The route
modules take the `Simulator` their handlers act on:

    tokens      POST /api/v1/token                     client_credentials, app_token
    listing     GET  /api/v1/workloads                 and /api/v1/workloads/{id}
    workloads   each kind's routes under its path      (`kinds.KINDS`)
    projects    GET  /api/v1/org-unit/projects         and .../{id}; POST /_sim/projects
    org         departments, projects made through the API, node pools, priorities, ranks
    access      GET  /api/v1/authorization/roles;      access rules (no update)
    policies    /api/v2/policy/{kind}                  PUT, PATCH (validateOnly), GET, DELETE
                /api/v2/policy                         GET (the list)
    admin       /_sim/requests, /_sim/workloads, /_sim/faults, /_sim/workload-types,
                forced phases

Every API route but the token route needs a bearer token (`Simulator.auth`). Requests go
through `faults.FaultMiddleware` (log, latency, errors) and then Starlette's router;
an `errors.ApiError` from any handler, and the router's own 404 and 405, are answered in
the API's `Error` shape.
"""

from __future__ import annotations

import asyncio
import collections
import pathlib
import random
import time
import uuid
from dataclasses import replace
from typing import Any, Awaitable, Callable, Sequence

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request

from reconciler.simulator import (access, admin, listing, manifests, org, policies, projects,
                                  tokens, workloads)
from reconciler.simulator.errors import ApiError, api_error, http_error
from reconciler.simulator.faults import Faults, FaultMiddleware, SimulatedConnectionDrop
from reconciler.simulator.kinds import KINDS, Kind
from reconciler.simulator.store import Record, SimulatorDataError, Store

DEFAULT_CLIENT_ID = "runai-sim"
DEFAULT_CLIENT_SECRET = "runai-sim-secret"
REQUEST_LOG_SIZE = 200_000
# The Run:ai versions the simulator behaves as: NVIDIA's files here are 2.24's; 3.0 ranks
# organisation units in their place (CONTRACT.md §13, `org`).
CONTROL_PLANES = ("2.24", "3.0")
DEFAULT_CONTROL_PLANE = "2.24"


class Simulator:
    """The state of one simulated control plane (`app.state.sim`): its workloads,
    projects and organisation, faults, request log, clock and random sources."""

    def __init__(self, *, data_path, client_id, client_secret, phase_seconds, faults, clock,
                 seed, sleep, kinds, control_plane=DEFAULT_CONTROL_PLANE):
        self.client_id, self.client_secret = client_id, client_secret
        self.control_plane = control_plane  # the version it behaves as (CONTROL_PLANES)
        self.kinds: dict[str, Kind] = {k.type: k for k in kinds}
        self.faults = faults if faults is not None else Faults()
        self.start_faults = replace(self.faults)  # what DELETE /_sim/faults puts back
        self.clock = clock
        self.sleep = sleep
        self.rand = random.Random(seed)  # ids, name suffixes, generated values
        self.fault_rand = random.Random(None if seed is None else seed + 1)
        self.signer = tokens.Signer(client_secret)
        self.store = Store(clock=clock, phase_seconds=phase_seconds,
                           data_path=pathlib.Path(data_path) if data_path is not None else None,
                           kinds=frozenset(self.kinds))
        self.store.load()
        self.projects = projects.Projects()
        for saved in self.store.projects.values():  # defined before, kept in the data file
            definition = dict(saved)
            try:
                self.projects.define(definition, str(definition.pop("created")))
            except (KeyError, ValueError) as exc:
                raise SimulatorDataError(f"cannot read simulator data {data_path}: project "
                                         f"{saved.get('id')!r}: {exc}") from None
        self.org = org.Organisation(self)  # departments, projects made, rules, policies
        self.workload_types = manifests.WorkloadTypes()  # what /api/v1/workload-types lists
        self.requests: collections.deque = collections.deque(maxlen=REQUEST_LOG_SIZE)
        self.api_routes: list = []  # set by create_app; names the log's routes

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rand.getrandbits(128), version=4))

    def suffix(self, n: int = 5) -> str:
        return "".join(self.rand.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(n))

    def auth(self, request: Request) -> dict:
        """The claims of the request's bearer token; `ApiError` 401 without a valid one."""
        return tokens.claims(self.signer, request, self.clock())

    def live(self, workload_id: str, kind: str | None = None) -> Record:
        """The live workload of that id (and kind, if given); `ApiError` 404 if none."""
        rec = self.store.live.get(workload_id)
        if rec is None or (kind is not None and rec.kind != kind):
            raise ApiError(404, f"Workload {workload_id} not found")
        return rec


def create_app(data_path: str | pathlib.Path | None = None, *,
               client_id: str = DEFAULT_CLIENT_ID, client_secret: str = DEFAULT_CLIENT_SECRET,
               phase_seconds: float = 0.0, faults: Faults | None = None,
               clock: Callable[[], float] = time.time, seed: int | None = None,
               sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
               kinds: Sequence[Kind] = KINDS,
               control_plane: str = DEFAULT_CONTROL_PLANE) -> Starlette:
    """A simulated control plane. `app.state.sim` is its `Simulator` (state, faults, log).
    `kinds` are the workload kinds it serves (tests may pass a table of their own).
    `control_plane` is the Run:ai version it behaves as (`CONTROL_PLANES`): "3.0" ranks
    its organisation units (a quota's `rank`, no priorities route), "2.24" does not.

    Raises `store.SimulatorDataError` when `data_path` exists but cannot be read.
    """
    if control_plane not in CONTROL_PLANES:
        raise ValueError(f"control_plane: one of {', '.join(CONTROL_PLANES)}")
    if len({k.type for k in kinds}) != len(kinds) or len({k.path for k in kinds}) != len(kinds):
        raise ValueError("each kind needs a type and a path of its own")
    sim = Simulator(data_path=data_path, client_id=client_id, client_secret=client_secret,
                    phase_seconds=phase_seconds, faults=faults, clock=clock, seed=seed,
                    sleep=sleep, kinds=kinds, control_plane=control_plane)
    listed, by_id = listing.routes(sim)
    project_api, project_admin = projects.routes(sim)
    # Order matters: a kind's path would otherwise be taken for a workload id.
    api_routes = [*tokens.routes(sim), *listed,
                  *(route for kind in kinds for route in (
                      kind.custom(sim, kind) if callable(kind.custom)
                      else manifests.routes(sim, kind) if kind.custom
                      else workloads.routes(sim, kind))),
                  *by_id, *project_api, *org.routes(sim), *access.routes(sim),
                  *policies.routes(sim)]
    app = Starlette(
        routes=api_routes + admin.routes(sim) + project_admin,
        middleware=[Middleware(FaultMiddleware, sim=sim)],
        exception_handlers={ApiError: api_error, HTTPException: http_error},
    )
    sim.api_routes = api_routes
    app.state.sim = sim
    return app


__all__ = ["create_app", "CONTROL_PLANES", "Faults", "Simulator", "SimulatedConnectionDrop",
           "DEFAULT_CLIENT_ID", "DEFAULT_CLIENT_SECRET"]
