"""The fake Run:ai control plane: an ASGI app (Starlette) speaking the workloads API and
the organisation's (projects, departments, node pools, access rules, policies).

Callers: tests (in process through `httpx.ASGITransport`), the CLI's `--sim` mode, and
`runai-reconcile sim serve` (uvicorn). Clients get a token with POST /api/v1/token
using `DEFAULT_CLIENT_ID` / `DEFAULT_CLIENT_SECRET`.

    app = create_app(data_path=None, phase_seconds=0.0, faults=Faults(error_rate=0.1),
                     clock=time.time, seed=7)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sim")

Modules, by concern (each module's docstring lists its routes and the choices it makes
where the API spec is silent):

    app         create_app: the Simulator's state, and every module's routes put together
    workloads   each kind's routes: create, get, delete, PATCH, suspend/resume
    listing     GET /api/v1/workloads (filters, pages) and GET /api/v1/workloads/{id}
    tokens      POST /api/v1/token, and the bearer token check
    projects    the project routes (and POST /_sim/projects)
    org         departments, projects made through the API, node pools, priorities,
                ranks: the table of org-unit types (`org.UNITS`)
    access      roles and access rules
    policies    the workload policies, one table entry per kind (`policies.POLICY_KINDS`)
    admin       /_sim/: request log, drift, forced phases, fault settings
    faults      the Faults settings, the middleware that injects them and logs requests
    errors      error answers, reading a JSON body
    queries     filterBy, limit/offset, sortBy/sortOrder
    store       records, phases on the clock, the JSON data file
    kinds       the table of kinds, and their cross-field rules
    schema      each kind's request bodies, and the organisation's
    defaults    the server-side defaults filled into a created body
    validator   the body description language, and its validator
    command     `sim serve`

How to add a kind (nothing else names one; the routes, handlers, list items, data file
and tests follow the table):

1. `schema.py`: its create body (and PATCH body, if it has PATCH) in `validator`'s
   description language, after the shared parts, as NVIDIA's OpenAPI file has them.
2. `defaults.py`: a `fill_<kind>(body, rand)` filling the server-side defaults
   (CONTRACT.md §5) into a created body.
3. `kinds.py`: any cross-field rules beyond the schema, then one `Kind` entry (path,
   bodies, rules, error shape, suspends or not, list `type` and `category`, where its
   containers sit if not at `spec`, OpenAPI file and component names, `fill`) appended to `KINDS`.
4. tests/helpers/simulator.py: a sample create body (and PATCH body) for it; the
   tests then check its routes and answers against the OpenAPI file its entry names.
"""

from reconciler.simulator.app import DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, Simulator, create_app
from reconciler.simulator.faults import Faults, SimulatedConnectionDrop
from reconciler.simulator.store import SimulatorDataError

__all__ = ["create_app", "Faults", "Simulator", "SimulatedConnectionDrop", "SimulatorDataError",
           "DEFAULT_CLIENT_ID", "DEFAULT_CLIENT_SECRET"]
