"""Fault injection and the request log: the `Faults` settings, the middleware every API
request passes through, and commit-then-fail answers.

Callers: `app` puts `FaultMiddleware` in front of the routes and keeps the `Faults` in
`Simulator.faults`; `workloads` answers each performed write through `committed`;
`admin` reads the log and sets the faults (GET|PUT|DELETE /_sim/faults); `command`
turns `sim serve`'s flags into a `Faults`.

For a request under /api/ the middleware logs it, adds the latency, answers the share
`error_rate` with a 503 or 429 (Retry-After; or `error_status` alone) without performing
it (only on the paths starting with one of `error_paths`, when any are given), moves finished
deletions out of the store, then hands it to Starlette's router. Faults (latency, error
rate) also apply to the token route unless `token_faults` is off; they never apply to
/_sim/, which is not logged either.

Commit-then-fail ("the write happens, the client sees an error"): the write is done and
persisted, then the answer is a 500 `Error`, or a dropped connection. A drop is the app
raising `SimulatedConnectionDrop` (an `httpx.RemoteProtocolError`) after the response
headers went out: through httpx's ASGI transport the client receives that exception;
under uvicorn the server closes the connection mid-response and the client sees a
`RemoteProtocolError` of its own.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

import httpx
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

if TYPE_CHECKING:
    from reconciler.simulator.app import Simulator

_SECRET_KEY = re.compile(r"secret|password|token", re.IGNORECASE)


@dataclass
class Faults:
    """Injected faults. JSON names (GET/PUT /_sim/faults) are the camelCase forms."""

    latency_ms: float = 0.0  # added to each API request
    jitter_ms: float = 0.0  # plus uniform(0, jitter_ms)
    error_rate: float = 0.0  # share of API requests answered 503 or 429 (not performed)
    commit_fail_rate: float = 0.0  # share of writes performed, then answered 500 or dropped
    token_ttl: int = 3600  # lifetime of issued tokens, seconds
    retry_after_seconds: int = 1  # Retry-After of injected 503/429
    commit_fail_mode: str = "random"  # "random" | "500" | "drop"
    token_faults: bool = True  # latency and error_rate also apply to POST /api/v1/token
    # The paths error_rate applies to (prefixes, e.g. /api/v1/org-unit/projects); empty: all.
    error_paths: list = field(default_factory=list)
    error_status: int | None = None  # the status of an injected error; None: 503 or 429

    _JSON = {"latency_ms": "latencyMs", "jitter_ms": "jitterMs", "error_rate": "errorRate",
             "commit_fail_rate": "commitFailRate", "token_ttl": "tokenTtl",
             "retry_after_seconds": "retryAfterSeconds", "commit_fail_mode": "commitFailMode",
             "token_faults": "tokenFaults", "error_paths": "errorPaths",
             "error_status": "errorStatus"}
    _ERROR_STATUSES = (429, 500, 502, 503, 504)

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """ValueError naming the first bad setting."""
        for f in fields(self):
            v = getattr(self, f.name)
            name = self._JSON[f.name]
            if f.name == "commit_fail_mode":
                if v not in ("random", "500", "drop"):
                    raise ValueError(f"{name} must be one of random, 500, drop")
            elif f.name == "token_faults":
                if not isinstance(v, bool):
                    raise ValueError(f"{name} must be a boolean")
            elif f.name == "error_paths":
                if not isinstance(v, list) or not all(
                        isinstance(p, str) and p.startswith("/api/") for p in v):
                    raise ValueError(f"{name} must be a list of paths starting with /api/")
            elif f.name == "error_status":
                if v is not None and (isinstance(v, bool) or v not in self._ERROR_STATUSES):
                    raise ValueError(f"{name} must be one of "
                                     f"{', '.join(map(str, self._ERROR_STATUSES))}, or null")
            elif isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{name} must be a number")
            elif f.name in ("error_rate", "commit_fail_rate") and not 0 <= v <= 1:
                raise ValueError(f"{name} must be between 0 and 1")
            elif f.name == "token_ttl" and v < 1:
                raise ValueError(f"{name} must be at least 1 second")
            elif v < 0:
                raise ValueError(f"{name} must not be negative")

    def to_json(self) -> dict:
        return {self._JSON[k]: v for k, v in asdict(self).items()}

    def updated(self, patch: Any) -> "Faults":
        """A copy with the camelCase keys of `patch` applied; ValueError when invalid."""
        if not isinstance(patch, dict):
            raise ValueError("the body must be a JSON object")
        by_json = {v: k for k, v in self._JSON.items()}
        unknown = sorted(set(patch) - set(by_json))
        if unknown:
            raise ValueError(f"unknown fault setting(s): {', '.join(unknown)}; "
                             f"known: {', '.join(by_json)}")
        values = asdict(self)
        values.update({by_json[k]: v for k, v in patch.items()})
        return Faults(**values)


# --- commit-then-fail ----------------------------------------------------------------


class SimulatedConnectionDrop(httpx.RemoteProtocolError):
    """Raised by the app to drop the connection after a committed write."""


class _DroppedResponse(Response):
    async def __call__(self, scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 202,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", b"4096")]})
        raise SimulatedConnectionDrop("simulated failure: connection dropped after the write")


def committed(sim: Simulator, response: Response) -> Response:
    """The answer to a write that has been performed: as is, or a commit failure."""
    f = sim.faults
    if f.commit_fail_rate > 0 and sim.fault_rand.random() < f.commit_fail_rate:
        mode = f.commit_fail_mode
        if mode == "random":
            mode = sim.fault_rand.choice(("500", "drop"))
        if mode == "500":
            return JSONResponse({"code": 500, "message": "Something went wrong."},
                                status_code=500)
        return _DroppedResponse()
    return response


# --- the request log -----------------------------------------------------------------


class Logged:
    """One API request in the log. Its body is kept as received and parsed (secrets
    masked), like its route, only when the log is read: most entries never are."""

    __slots__ = ("method", "path", "query", "raw", "time", "status", "done")

    def __init__(self, method: str, path: str, query: bytes, raw: bytes, time: float):
        self.method, self.path, self.query, self.raw, self.time = method, path, query, raw, time
        self.status: int | None = None
        self.done: float | None = None  # when the answer's last byte was handed on

    def to_json(self, routes: list[Route]) -> dict:
        return {"method": self.method, "path": self.path, "query": self.query.decode("latin-1"),
                "status": self.status, "body": _log_body(self.raw),
                "route": _route_of(routes, self.path), "time": self.time, "done": self.done}


def _route_of(routes: list[Route], path: str) -> str:
    for r in routes:
        if r.path_regex.match(path):
            return r.path
    return path


def _log_body(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    if isinstance(body, dict):
        body = {k: ("***" if _SECRET_KEY.search(str(k)) and k.lower() != "granttype" else v)
                for k, v in body.items()}
    return body


# --- the middleware ------------------------------------------------------------------


class FaultMiddleware:
    """ASGI middleware: for /api/ requests, log, inject latency and errors, settle
    deletions, then route (Starlette's router); other paths go straight to the router."""

    def __init__(self, app, sim: Simulator):
        self.app, self.sim = app, sim

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/api/"):
            await self.app(scope, receive, send)
            return
        sim = self.sim
        chunks = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        raw = b"".join(chunks)
        path = scope["path"]
        entry = Logged(scope["method"], path, scope.get("query_string", b""), raw, sim.clock())
        sim.requests.append(entry)

        f = sim.faults
        faultable = f.token_faults or path != "/api/v1/token"
        if faultable and (f.latency_ms or f.jitter_ms):
            await sim.sleep((f.latency_ms + sim.fault_rand.uniform(0, f.jitter_ms)) / 1000)
        if (faultable and f.error_rate > 0
                and (not f.error_paths or path.startswith(tuple(f.error_paths)))
                and sim.fault_rand.random() < f.error_rate):
            status = f.error_status or sim.fault_rand.choice((503, 429))
            message = {503: "Please try again in few minutes.", 429: "Too many requests."}.get(
                status, "Something went wrong.")
            response = JSONResponse({"code": status, "message": message}, status_code=status,
                                    headers={"Retry-After": str(int(f.retry_after_seconds))})
            entry.status = status
            await response(scope, receive, send)
            entry.done = sim.clock()
            return

        sim.store.settle()
        sim.org.settle()
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": raw, "more_body": False}
            return await receive()

        async def logged(message):
            if message["type"] == "http.response.start":
                entry.status = message["status"]
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                entry.done = sim.clock()

        try:
            await self.app(scope, replay, logged)
        except SimulatedConnectionDrop:
            entry.status = None
            raise
