"""`runai-reconcile sim serve`: the simulated control plane over real HTTP (uvicorn).

Callers: `reconciler.cli` adds the `sim` group to the main command. The command only
turns flags into `create_app` arguments and runs uvicorn; behaviour lives in `app`
and the route modules.
"""

from __future__ import annotations

import errno
import logging
import socket

import click

from reconciler.simulator import datalock
from reconciler.simulator.app import (CONTROL_PLANES, DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET,
                                      DEFAULT_CONTROL_PLANE, create_app)
from reconciler.simulator.faults import Faults, SimulatedConnectionDrop
from reconciler.simulator.store import SimulatorDataError


class _DropFilter(logging.Filter):
    """Turn uvicorn's traceback for an injected connection drop into one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, SimulatedConnectionDrop):
            record.msg, record.args, record.exc_info = (
                "injected commit failure: connection dropped after the write", (), None)
        return True


@click.group()
def sim() -> None:
    """The Run:ai control-plane simulator."""


@sim.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on.")
@click.option("--client-id", default=DEFAULT_CLIENT_ID, show_default=True,
              help="Client id accepted by POST /api/v1/token (also as appID).")
@click.option("--client-secret", default=DEFAULT_CLIENT_SECRET, show_default=True,
              help="Client secret accepted by POST /api/v1/token (also as appSecret).")
@click.option("--data", "data_path", type=click.Path(dir_okay=False),
              help="JSON file holding the workloads, written atomically after every write "
                   "and loaded at start. Default: in memory only.")
@click.option("--phase-seconds", default=0.0, show_default=True, type=click.FloatRange(0),
              help="How long each transitional phase (Creating, Initializing, Stopping, "
                   "Resuming, Deleting) lasts; 0 (the default) makes the next read see the "
                   "final phase. Try 2 for a demo that shows phases moving.")
@click.option("--latency-ms", default=0.0, show_default=True, type=click.FloatRange(0),
              help="Latency added to each API request, milliseconds.")
@click.option("--jitter-ms", default=0.0, show_default=True, type=click.FloatRange(0),
              help="Random extra latency per API request, uniform in [0, N] ms.")
@click.option("--error-rate", default=0.0, show_default=True, type=click.FloatRange(0, 1),
              help="Share of API requests answered 503 or 429 (with Retry-After), not performed.")
@click.option("--error-path", "error_paths", multiple=True, metavar="PREFIX",
              help="Inject --error-rate only on the API paths starting with PREFIX "
                   "(repeatable; e.g. /api/v1/org-unit/projects). Default: every path.")
@click.option("--error-status", type=click.Choice(["429", "500", "502", "503", "504"]),
              help="The status of every injected error. Default: 503 or 429 at random.")
@click.option("--commit-fail-rate", default=0.0, show_default=True, type=click.FloatRange(0, 1),
              help="Share of writes that are performed, then answered 500 or with the "
                   "connection dropped.")
@click.option("--commit-fail-mode", default="random", show_default=True,
              type=click.Choice(["random", "500", "drop"]),
              help="How a commit failure shows: a 500, a dropped connection, or either.")
@click.option("--retry-after", default=1, show_default=True, type=click.IntRange(0),
              help="Retry-After seconds on injected 503/429 answers.")
@click.option("--token-ttl", default=3600, show_default=True, type=click.IntRange(1),
              help="Lifetime of issued access tokens, seconds.")
@click.option("--no-token-faults", is_flag=True,
              help="Exempt POST /api/v1/token from injected latency and errors.")
@click.option("--control-plane", default=DEFAULT_CONTROL_PLANE, show_default=True,
              type=click.Choice(CONTROL_PLANES),
              help="The Run:ai version to behave as: 3.0 ranks organisation units (a "
                   "quota's rank, no priorities route).")
@click.option("--seed", type=int, help="Random seed for ids, name suffixes and faults.")
@click.option("--quiet", is_flag=True,
              help="No log line per request (benchmarks: at hundreds of requests a second "
                   "the log costs more CPU than the API).")
def serve(host, port, client_id, client_secret, data_path, phase_seconds, latency_ms, jitter_ms,
          error_rate, error_paths, error_status, commit_fail_rate, commit_fail_mode, retry_after,
          token_ttl, no_token_faults, control_plane, seed, quiet) -> None:
    """Serve the simulated control plane over HTTP until interrupted (Ctrl-C).

    Logs one line per request. Get a token with

        POST /api/v1/token {"grantType": "client_credentials",
                            "clientID": "runai-sim", "clientSecret": "runai-sim-secret"}

    (the default credentials; see --client-id / --client-secret). The admin surface
    under /_sim/ (request log, drift, forced phases, fault settings) needs no token
    and is never subject to injected faults.
    """
    import uvicorn

    faults = Faults(latency_ms=latency_ms, jitter_ms=jitter_ms, error_rate=error_rate,
                    commit_fail_rate=commit_fail_rate, commit_fail_mode=commit_fail_mode,
                    retry_after_seconds=retry_after, token_ttl=token_ttl,
                    token_faults=not no_token_faults, error_paths=list(error_paths),
                    error_status=int(error_status) if error_status else None)
    try:
        if data_path is not None:
            datalock.hold(data_path)  # for as long as this process serves it
        app = create_app(data_path, client_id=client_id, client_secret=client_secret,
                         phase_seconds=phase_seconds, faults=faults, seed=seed,
                         control_plane=control_plane)
    except SimulatorDataError as exc:
        raise click.ClickException(str(exc)) from None
    sock = _listen(host, port)
    port = sock.getsockname()[1]  # the one the system chose, for --port 0
    logging.getLogger("uvicorn.error").addFilter(_DropFilter())
    click.echo(f"runai-sim: serving on http://{host}:{port} "
               f"(client id {client_id!r}; admin surface at /_sim/)", err=True)
    # No proxy-header rewriting: nothing sits in front of a simulator, and it is a
    # layer of work on every request.
    config = uvicorn.Config(app, log_level="warning" if quiet else "info",
                            access_log=not quiet, proxy_headers=False)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: a stop asked for (uvicorn.run's way)
        pass


def _listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound here rather than by uvicorn, so that a port in use (or
    an address that is not this machine's) is one line and exit 1, not uvicorn's log of
    its start-up and shut-down around the error, and exit 3."""
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        sock.bind(addr)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise click.ClickException(f"port {port} on {host} is in use (another "
                                       "`sim serve`?): pick another with --port") from None
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock
