"""The fake Run:ai control plane: an ASGI app speaking the workloads API.

Callers: tests (in process through `httpx.ASGITransport`), the CLI's `--sim` mode, and
`runai-reconcile sim serve` (uvicorn). Clients get a token with POST /api/v1/token
using `DEFAULT_CLIENT_ID` / `DEFAULT_CLIENT_SECRET`; see `app` for routes and choices, and
`kinds` for the workload kinds it serves (and how to add one).

    app = create_app(data_path=None, phase_seconds=0.0, faults=Faults(error_rate=0.1),
                     clock=time.time, seed=7)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sim")
"""

from reconciler.simulator.app import (DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, Faults,
                                      SimulatedConnectionDrop, Simulator, create_app)
from reconciler.simulator.store import SimulatorDataError

__all__ = ["create_app", "Faults", "Simulator", "SimulatedConnectionDrop", "SimulatorDataError",
           "DEFAULT_CLIENT_ID", "DEFAULT_CLIENT_SECRET"]
