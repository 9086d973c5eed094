"""The watch's HTTP endpoint: metrics, probes, a JSON status and a page, read-only.

`serve(board, "HOST:PORT")` starts a Starlette app under uvicorn in a background thread
and returns a `Server` handle (`.url`, `.port`, `.close()`). Every answer is made from
the `StatusBoard`'s latest snapshot, which the loop has masked; nothing else of the
process (its environment, its options, a token) goes into any answer (the state's
location is the store's own `where`, which has no password). Routes (docs/watch.md, "HTTP endpoint"):

- `/metrics`: Prometheus' text format through prometheus-client, one registry per server;
  counters are summed from each cycle the board publishes (a listener on the board, and
  again at every scrape for a cycle it has not counted), gauges read the latest snapshot;
- `/healthz`: 200 while the loop beats (a cycle finished within a few intervals), 503 when
  it stopped beating or is stopping; `/readyz`: 200 once the first cycle is done;
- `/api/status`: the last cycle as one JSON document;
- `/`: the status page, server-rendered from a Jinja2 template shipped with the package;
  it needs no JavaScript, and `/status.js` (a static file shipped beside the template, the
  only script the page's Content-Security-Policy lets it run) updates it in place until
  the reader pauses it.

The port is bound before the thread starts, so a port in use is one clear error at once.
Callers: the watch loop (operations), tests.
"""

from __future__ import annotations

import errno
import importlib.resources
import socket
import threading
import time
from typing import Any

import jinja2
import orjson
import prometheus_client
import uvicorn
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from reconciler import errors, kinds, plans
from reconciler.watch import events as ev
from reconciler.watch import status as st

DEFAULT_LISTEN = "127.0.0.1:9090"
PREFIX = "runai_reconcile"
DURATION_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, float("inf"))
CYCLE_RESULTS = ("ok", "failed", "standby")
# The values of the metrics' closed label sets, each listed in its metric's HELP text (so
# that a reader of a scrape learns them all, the ones no sample shows yet included).
ACTIONS = tuple(a.value for a in plans.Action if a is not plans.Action.NOOP)
ACTION_RESULTS = ("ok", "failed", "skipped", "deferred")


def _values(words) -> str:
    return ", ".join(words)
# Rows of the page's tables at most (the rest are counted; /api/status has them all).
PAGE_ROWS = 500


def parse_listen(listen: str) -> tuple[str, int]:
    """`HOST:PORT` (`[::1]:9090`, `0.0.0.0:9090`, `:9090` for every address) as a pair;
    a ReconcileError naming the flag when it is not one."""
    text = listen.strip()
    host, sep, port_text = text.rpartition(":")
    if not sep:
        raise errors.ReconcileError(f"--listen {listen!r}: give HOST:PORT, as in "
                                    f"{DEFAULT_LISTEN}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise errors.ReconcileError(f"--listen {listen!r}: write an IPv6 address in "
                                    "brackets, as in [::1]:9090")
    try:
        port = int(port_text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise errors.ReconcileError(f"--listen {listen!r}: the port must be a number "
                                    "from 0 to 65535")
    return host or "0.0.0.0", port


class Server:
    """A running endpoint: where it listens, and `close()` to stop it."""

    def __init__(self, server: uvicorn.Server, thread: threading.Thread, sock: socket.socket):
        self._server = server
        self._thread = thread
        self._sock = sock
        addr = sock.getsockname()
        self.host, self.port = addr[0], addr[1]

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        if host in ("0.0.0.0", "[::]"):
            host = "127.0.0.1" if host == "0.0.0.0" else "[::1]"
        return f"http://{host}:{self.port}"

    def close(self, timeout: float = 5.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(1.0)
        self._sock.close()

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def serve(board: st.StatusBoard, listen: str = DEFAULT_LISTEN, *, version: str | None = None,
          refresh_s: float | None = None, start_timeout: float = 10.0) -> Server:
    """Serve `board` on `listen` (HOST:PORT; port 0 picks a free one) from a background
    thread; returns once it answers. A port in use is a ReconcileError."""
    host, port = parse_listen(listen)
    sock = _bind(host, port, listen)
    app = build_app(board, version=version, refresh_s=refresh_s)
    # log_config=None: uvicorn installs no handler of its own, so its lines go through the
    # process's logging (one JSON object a line under the watch's --log-format json).
    config = uvicorn.Config(app, log_config=None, log_level="warning", access_log=False,
                            lifespan="off", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]},
                              name="watch http", daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            sock.close()
            raise errors.ReconcileError(f"--listen {listen}: the HTTP endpoint did not start")
        time.sleep(0.01)
    return Server(server, thread, sock)


def _bind(host: str, port: int, listen: str) -> socket.socket:
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror as exc:
        raise errors.ReconcileError(f"--listen {listen}: no such address ({exc.strerror})") \
            from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise errors.ReconcileError(
                f"--listen {listen}: port {port} is in use (another watch, or another "
                "program, listens there); give another with --listen HOST:PORT") from None
        raise errors.ReconcileError(f"--listen {listen}: {exc.strerror or exc}") from None
    return sock


# --- metrics -------------------------------------------------------------------------


class Metrics:
    """The server's own registry: counters summed over the cycles seen, gauges read from
    the latest snapshot at each scrape."""

    def __init__(self, board: st.StatusBoard, *, version: str | None = None) -> None:
        self.board = board
        # The *_created series double every counter's lines and say nothing a watch needs.
        prometheus_client.disable_created_metrics()
        self.registry = prometheus_client.CollectorRegistry(auto_describe=True)
        self._lock = threading.Lock()
        self._counted = 0  # the highest cycle number counted
        r = self.registry
        self.cycles = prometheus_client.Counter(
            f"{PREFIX}_cycles", f"Watch cycles finished, by result ({_values(CYCLE_RESULTS)}).",
            ["result"], registry=r)
        for result in CYCLE_RESULTS:
            self.cycles.labels(result)
        self.duration = prometheus_client.Histogram(
            f"{PREFIX}_cycle_duration_seconds", "How long a watch cycle took.",
            buckets=DURATION_BUCKETS, registry=r)
        self.drift_found = prometheus_client.Counter(
            f"{PREFIX}_drift_found", "Workloads found drifted (live moved away from what "
            "was applied), summed over cycles.", registry=r)
        self.healed = prometheus_client.Counter(
            f"{PREFIX}_drift_healed", "Drifted workloads the watch healed.", registry=r)
        self.actions = prometheus_client.Counter(
            f"{PREFIX}_actions", "Actions the watch took or wanted to, by action "
            f"({_values(ACTIONS)}) and result ({_values(ACTION_RESULTS)}: skipped by a "
            "policy, preventDestroy or sync without --prune; deferred by --max-actions).",
            ["action", "result"], registry=r)
        self.requests = prometheus_client.Counter(
            f"{PREFIX}_api_requests", "HTTP requests sent to the Run:ai API, by status "
            "(the answer's HTTP status code, or error when none came).", ["status"], registry=r)
        r.register(_Latest(board, version))
        board.subscribe(self.absorb)

    def absorb(self, snapshot: st.Snapshot) -> None:
        """Count each cycle of `snapshot` not counted yet (by its number)."""
        with self._lock:
            for cycle in snapshot.cycles:
                if cycle.number <= self._counted:
                    continue
                self._counted = cycle.number
                self.cycles.labels(cycle.result).inc()
                self.duration.observe(max(0.0, cycle.duration_s))
                self.drift_found.inc(max(0, cycle.drift_found))
                self.healed.inc(max(0, cycle.healed))
                for key, n in cycle.actions.items():
                    action, _, result = key.partition("/")
                    self.actions.labels(action, result or "ok").inc(max(0, n))
                for status, n in cycle.requests_by_status.items():
                    self.requests.labels(str(status)).inc(max(0, n))

    def exposition(self) -> bytes:
        self.absorb(self.board.snapshot)
        return prometheus_client.generate_latest(self.registry)


class _Latest(Collector):
    """Gauges of the latest snapshot, made afresh at each scrape."""

    def __init__(self, board: st.StatusBoard, version: str | None) -> None:
        self._board = board
        self._version = version or ""

    def describe(self):
        return []

    def collect(self):
        s = self._board.snapshot
        workloads = GaugeMetricFamily(
            f"{PREFIX}_workloads", f"Workloads by kind ({_values(kinds.KINDS)}), project (the "
            f"project's id), sync ({_values(st.SYNCS)}) and health ({_values(st.HEALTHS)}).",
            labels=["kind", "project", "sync", "health"])
        counts: dict[tuple[str, str, str, str], int] = {}
        for w in s.workloads:
            key = (w.kind, w.project, w.sync, w.health)
            counts[key] = counts.get(key, 0) + 1
        for key, n in sorted(counts.items()):
            workloads.add_metric(list(key), n)
        yield workloads
        labels = ["project", "project_name"]
        by = " By project (its id) and project_name (its name, empty when unknown)."
        held = GaugeMetricFamily(f"{PREFIX}_project_gpus_held",
                                 "GPUs the project's workloads hold now." + by, labels=labels)
        planned = GaugeMetricFamily(f"{PREFIX}_project_gpus_planned",
                                    "GPUs the project's workloads would hold as the specs "
                                    "say." + by, labels=labels)
        quota = GaugeMetricFamily(f"{PREFIX}_project_gpu_quota",
                                  "The project's GPU quota (absent when unknown)." + by,
                                  labels=labels)
        for p in s.projects:
            names = [p.project, p.name or ""]
            held.add_metric(names, p.gpus_held)
            planned.add_metric(names, p.gpus_planned)
            if p.quota is not None:
                quota.add_metric(names, p.quota)
        yield held
        yield planned
        yield quota
        yield GaugeMetricFamily(f"{PREFIX}_active", "1 when this process is the active "
                                "watch (holds the state's lock), 0 on standby.",
                                value=1 if s.role == st.ACTIVE else 0)
        yield GaugeMetricFamily(f"{PREFIX}_backoff_seconds", "The wait before the next "
                                "cycle after cycles that failed in a row (0: none failed).",
                                value=s.backoff_s if s.failed_in_row else 0.0)
        info = GaugeMetricFamily(f"{PREFIX}_info", "Always 1: the git commit the last cycle "
                                 f"planned at, the mode ({_values(st.MODES)}) and the "
                                 "version.", labels=["commit", "mode", "version"])
        info.add_metric([s.commit or "", s.mode, self._version], 1)
        yield info
        if s.last_success_at is not None:
            yield GaugeMetricFamily(f"{PREFIX}_last_success_timestamp_seconds",
                                    "When the last successful cycle ended (Unix time).",
                                    value=s.last_success_at)


# --- JSON ----------------------------------------------------------------------------


def status_document(board: st.StatusBoard) -> dict[str, Any]:
    """/api/status: the last cycle, per workload and per project (docs/watch.md)."""
    s = board.snapshot
    now = board.now()
    return {
        "generated_at": ev.iso(now),
        "mode": s.mode,
        "role": s.role,
        "commit": s.commit,
        "specs_dir": s.specs_dir,
        "state": s.state,
        "interval_s": s.interval_s,
        "ready": s.ready,
        "alive": board.alive(),
        "stopping": board.stopping,
        "last_success_at": ev.iso(s.last_success_at),
        "failed_in_row": s.failed_in_row,
        "backoff_s": round(s.backoff_s, 3),
        "counts": {"sync": _counts(s, "sync", st.SYNCS),
                   "health": _counts(s, "health", st.HEALTHS)},
        "last_cycle": _cycle_json(s.cycles[-1]) if s.cycles else None,
        "workloads": [_workload_json(w) for w in sorted(s.workloads, key=lambda w: w.address)],
        "projects": [{"project": p.project, "name": p.name, "gpus_held": p.gpus_held,
                      "gpus_planned": p.gpus_planned, "quota": p.quota,
                      "quota_why": p.quota_why} for p in s.projects],
        "cycles": [_cycle_json(c) for c in s.cycles],
    }


def _counts(s: st.Snapshot, attr: str, words: tuple[str, ...]) -> dict[str, int]:
    out = {w: 0 for w in words}
    for w in s.workloads:
        value = getattr(w, attr)
        out[value] = out.get(value, 0) + 1
    return out


def _workload_json(w: st.WorkloadStatus) -> dict[str, Any]:
    return {"address": w.address, "kind": w.kind, "project": w.project, "name": w.name,
            "sync": w.sync, "health": w.health, "phase": w.phase, "gpus": w.gpus,
            "reason": w.reason, "error": w.error, "blocked_by": w.blocked_by,
            "action": w.acted, "changed_at": ev.iso(w.changed_at)}


def _cycle_json(c: st.CycleSummary) -> dict[str, Any]:
    return {"number": c.number, "started_at": ev.iso(c.started_at),
            "duration_s": round(c.duration_s, 3), "result": c.result, "error": c.error,
            "refresh": c.refresh, "commit": c.commit, "actions": dict(c.actions),
            "drift_found": c.drift_found, "healed": c.healed,
            "requests_by_status": dict(c.requests_by_status)}


# --- the page ------------------------------------------------------------------------

# The page runs its own script (from this server) and nothing else: no inline script, no
# other origin. Styles stay inline (the page's one <style> and its bars' widths).
PAGE_CSP = ("default-src 'none'; script-src 'self'; connect-src 'self'; "
            "style-src 'unsafe-inline'; img-src 'self'; base-uri 'none'; form-action 'none'; "
            "frame-ancestors 'none'")
_SCRIPT = importlib.resources.files("reconciler.watch").joinpath("static/status.js").read_bytes()

_templates = jinja2.Environment(
    loader=jinja2.PackageLoader("reconciler.watch", "templates"),
    autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def page_html(board: st.StatusBoard, *, refresh_s: float | None = None,
              version: str | None = None) -> str:
    s = board.snapshot
    now = board.now()
    ordered = sorted(s.workloads, key=ev.urgency)
    attention = [w for w in ordered if not _fine(w)]
    fine = [w for w in ordered if _fine(w)]
    refresh = refresh_s if refresh_s is not None else min(max(s.interval_s / 2, 5.0), 30.0)
    return _templates.get_template("status.html").render(
        s=s, now=now, version=version, refresh=int(round(refresh)),
        alive=board.alive(), stopping=board.stopping, ready=s.ready,
        last=s.cycles[-1] if s.cycles else None,
        state=s.state,
        sync_counts=_counts(s, "sync", st.SYNCS), health_counts=_counts(s, "health", st.HEALTHS),
        projects=[_bar(p) for p in s.projects],
        attention=attention[:PAGE_ROWS], attention_more=max(0, len(attention) - PAGE_ROWS),
        fine=fine[:PAGE_ROWS], fine_more=max(0, len(fine) - PAGE_ROWS), fine_count=len(fine),
        cycles=list(reversed(s.cycles))[:20], ago=lambda t: _ago(now, t),
        clock=ev.iso, number=_number)


def _fine(w: st.WorkloadStatus) -> bool:
    return ev.is_fine(w)  # Suspended as its spec asks is fine too


def _bar(p: st.ProjectStatus) -> dict[str, Any]:
    """Widths (percent of the longest of held, planned and quota) for the project's bar."""
    top = max(p.gpus_held, p.gpus_planned, p.quota or 0.0, 1.0)
    over = p.quota is not None and max(p.gpus_held, p.gpus_planned) > p.quota
    if not over:
        said = ""
    elif p.gpus_held > p.quota:
        said = f"holds {_number(p.gpus_held - p.quota)} over quota"
    else:
        said = f"planned {_number(p.gpus_planned - p.quota)} over quota"
    return {"p": p, "held": 100 * p.gpus_held / top, "planned": 100 * p.gpus_planned / top,
            "quota": None if p.quota is None else 100 * p.quota / top, "over": over,
            "held_over": p.quota is not None and p.gpus_held > p.quota,
            "planned_over": p.quota is not None and p.gpus_planned > p.quota,
            "over_text": said}


def _number(x: float | None) -> str:
    if x is None:
        return "?"
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:,.1f}"


def _ago(now: float, then: float | None) -> str:
    if then is None:
        return "never"
    d = max(0.0, now - then)
    if d < 60:
        return f"{d:.0f} s ago"
    if d < 3600:
        return f"{d / 60:.0f} min ago"
    if d < 86400:
        return f"{d / 3600:.1f} h ago"
    return f"{d / 86400:.1f} days ago"


# --- the app -------------------------------------------------------------------------


def build_app(board: st.StatusBoard, *, version: str | None = None,
              refresh_s: float | None = None) -> Starlette:
    metrics = Metrics(board, version=version)

    async def metrics_route(request: Request) -> Response:
        return Response(metrics.exposition(), media_type=prometheus_client.CONTENT_TYPE_LATEST)

    async def healthz(request: Request) -> Response:
        if board.stopping:
            return PlainTextResponse("stopping\n", status_code=503)
        if not board.alive():
            age = board.now() - board.last_beat_at
            return PlainTextResponse(f"stalled: the loop last beat {age:.0f} s ago\n",
                                     status_code=503)
        return PlainTextResponse("ok\n")

    async def readyz(request: Request) -> Response:
        if board.stopping:
            return PlainTextResponse("stopping\n", status_code=503)
        if not board.snapshot.ready:
            return PlainTextResponse("not ready: the first cycle is not done\n",
                                     status_code=503)
        return PlainTextResponse("ready\n")

    async def api_status(request: Request) -> Response:
        return Response(orjson.dumps(status_document(board), option=orjson.OPT_INDENT_2),
                        media_type="application/json")

    async def page(request: Request) -> Response:
        return HTMLResponse(page_html(board, refresh_s=refresh_s, version=version),
                            headers={"Content-Security-Policy": PAGE_CSP,
                                     "Cache-Control": "no-store"})

    async def script(request: Request) -> Response:
        return Response(_SCRIPT, media_type="text/javascript",
                        headers={"Cache-Control": "no-cache"})

    routes = [Route("/", page, methods=["GET"]),
              Route("/status.js", script, methods=["GET"]),
              Route("/metrics", metrics_route, methods=["GET"]),
              Route("/healthz", healthz, methods=["GET"]),
              Route("/readyz", readyz, methods=["GET"]),
              Route("/api/status", api_status, methods=["GET"])]
    app = Starlette(routes=routes)
    app.state.metrics = metrics
    return app
