"""The async client for the Run:ai control plane: one method per endpoint.

Every request goes through one `httpx.AsyncClient` and one `_send`; only its transport
differs: `transport.AiohttpTransport` over the network, httpx's own when a proxy is set
in the environment, the simulator's ASGI app for `--sim`, `httpx.MockTransport` in unit
tests.

Callers: the executor (create, patch, delete, suspend, resume), the planner's refresh
(get, iter_workloads), `operations` (get_project: the quotas of a plan's projects)
and the CLI (`RunaiClient.from_env`, or a client over the
simulator's ASGI app for `--sim`). Everything the network can do wrong is translated
here into `reconciler.api.errors`; auth lives in `auth`, the retry policy in `retries`.

Every request has a timeout. At most `max_connections` requests are in flight, fewer
while the API answers 429 (`limits.AdaptiveLimit`). A host name that does not resolve and a TLS failure are
permanent (one clear line, no retries); a refused connection is retried
`retries.REFUSED_ATTEMPTS` times in all, quickly. 429, 500, 502, 503, 504 and other network
failures are retried with exponential backoff and full jitter (or the server's Retry-After), up to
`max_attempts` attempts and `retry_budget_s` seconds in all. Reads, PATCH, DELETE,
suspend and resume are safe to repeat. A create is not: after an ambiguous failure
(it may have been committed) `create` asks `on_ambiguous(kind, body)` to look the
workload up before any retry (`on_ambiguous()`), and raises
`RetryableError(ambiguous=True)` when no such callback was given. `find_live` does
that lookup: `create(kind, body, on_ambiguous=lambda: client.find_live(kind, name, project))`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import ssl
import time
import urllib.parse
from typing import Any, Awaitable, Callable, Mapping

import httpx

from reconciler import __version__
from reconciler.api import errors, retries
from reconciler.api.auth import ClientCredentials, StaticToken
from reconciler.api import limits as limits_mod
from reconciler.kinds import Kind

log = logging.getLogger("reconciler.api")
_USER_AGENT = f"runai-reconcile/{__version__}"

TOKEN_PATH = "/api/v1/token"
WORKLOADS_PATH = "/api/v1/workloads"
MAX_PAGE = 500
PROJECTS_PATH = "/api/v1/org-unit/projects"

OnAmbiguous = Callable[[], Awaitable[dict | None]]

_READ, _WRITE, _CREATE, _DELETE = "read", "write", "create", "delete"


def _check_url(url: str) -> None:
    """Refuse a URL that no request could use: no host, a bad port, a broken [IPv6]."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 (reading it checks it: out of range or not a number)
    except ValueError as exc:
        raise errors.ConfigError(f"the Run:ai URL {url!r} is malformed: {exc}") from None
    if not parts.hostname:
        raise errors.ConfigError(f"the Run:ai URL {url!r} has no host name")


class RunaiClient:
    """An async client; use `async with RunaiClient(...) as client:` or `await aclose()`.

    Give `token` (used as is) or `client_id` and `client_secret` (exchanged for a
    token, renewed before expiry). `transport` replaces the network, e.g.
    `httpx.ASGITransport(app)` for the in-process simulator; otherwise up to
    `max_connections` kept-alive connections are used (size it to the requests you keep
    in flight: `--parallelism`). `sleep`, `clock`
    (monotonic), `wall_clock` (epoch, to read a JWT's expiry) and `rng` (backoff
    jitter) are injectable so tests control time.
    """

    def __init__(self, base_url: str, *, token: str | None = None,
                 client_id: str | None = None, client_secret: str | None = None,
                 transport: httpx.AsyncBaseTransport | None = None,
                 verify: bool = True, timeout: float = 30.0, max_attempts: int = 8,
                 retry_budget_s: float = 60.0, max_connections: int = 32,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
                 clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time,
                 rng: random.Random | None = None):
        if not base_url or not base_url.startswith(("http://", "https://")):
            raise errors.ConfigError(
                f"the Run:ai URL must start with http:// or https://, got {base_url!r}")
        _check_url(base_url)
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if token:
            self._auth: StaticToken | ClientCredentials = StaticToken(token)
        elif client_id and client_secret:
            self._auth = ClientCredentials(client_id, client_secret, self._fetch_token,
                                           clock=clock, wall_clock=wall_clock)
        else:
            raise errors.ConfigError(
                "no Run:ai credentials: set RUNAI_TOKEN, or RUNAI_CLIENT_ID and RUNAI_CLIENT_SECRET")
        if not verify:
            log.warning("TLS certificate verification is off (--insecure): "
                        "the connection to %s can be intercepted", base_url)
        self.base_url = base_url.rstrip("/")
        self.max_attempts = max_attempts
        self.retry_budget_s = retry_budget_s
        self._sleep = sleep
        self._clock = clock
        self._wall_clock = wall_clock
        self._rng = rng or random.Random()
        self._said_unreachable = False
        self._requests = 0
        # Requests in flight: max_connections, halved on each round of 429s, then regained.
        self.concurrency = limits_mod.AdaptiveLimit(max_connections)
        if transport is None and not _proxy_configured():
            from reconciler.api.transport import AiohttpTransport  # aiohttp: network only

            transport = AiohttpTransport(size=max_connections, verify=verify)
        # Every request goes through this one httpx client, whatever moves the bytes: the
        # network's transport, the simulator's ASGI app, a test's MockTransport, or (None:
        # a proxy is set) httpx's own, which honours the proxy and uses `limits`.
        self.transport = transport
        limits = httpx.Limits(max_connections=max_connections,
                              max_keepalive_connections=max_connections)
        self._http = httpx.AsyncClient(transport=transport, limits=limits, verify=verify,
                                       timeout=httpx.Timeout(timeout),
                                       headers={"Accept": "application/json",
                                                "Accept-Encoding": "identity",
                                                "User-Agent": _USER_AGENT})

    @classmethod
    def from_env(cls, url: str | None = None, *, transport: httpx.AsyncBaseTransport | None = None,
                 verify: bool = True, env: Mapping[str, str] | None = None,
                 **options: Any) -> "RunaiClient":
        """A client from `url` (else RUNAI_URL) and RUNAI_TOKEN, or RUNAI_CLIENT_ID +
        RUNAI_CLIENT_SECRET; RUNAI_MAX_ATTEMPTS and RUNAI_RETRY_BUDGET (seconds) tune the
        retry policy. Raises ConfigError naming what is missing or malformed."""
        env = os.environ if env is None else env
        url = url or env.get("RUNAI_URL")
        if not url:
            raise errors.ConfigError("no Run:ai URL: pass --url or set RUNAI_URL")
        token = env.get("RUNAI_TOKEN") or None
        client_id = env.get("RUNAI_CLIENT_ID") or None
        client_secret = env.get("RUNAI_CLIENT_SECRET") or None
        if not token:
            if client_id and not client_secret:
                raise errors.ConfigError("RUNAI_CLIENT_ID is set but RUNAI_CLIENT_SECRET is not")
            if client_secret and not client_id:
                raise errors.ConfigError("RUNAI_CLIENT_SECRET is set but RUNAI_CLIENT_ID is not")
        for var, key, conv in (("RUNAI_MAX_ATTEMPTS", "max_attempts", int),
                               ("RUNAI_RETRY_BUDGET", "retry_budget_s", float)):
            raw = env.get(var)
            if raw and key not in options:
                try:
                    value = conv(raw)
                except ValueError:
                    value = -1
                if not value > 0 or value != value or value == float("inf"):
                    raise errors.ConfigError(f"{var} must be a positive number, got {raw!r}")
                options[key] = value
        return cls(url, token=token, client_id=client_id, client_secret=client_secret,
                   transport=transport, verify=verify, **options)

    async def connect(self) -> None:
        """Get a token now, ahead of the first request (the CLI does this while the specs
        load; with client credentials it opens the first connection too). A failure here
        is raised again, and reported, by the first request."""
        await self._auth.token()

    async def __aenter__(self) -> "RunaiClient":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    @property
    def request_count(self) -> int:
        """HTTP requests sent so far, every attempt and token request included."""
        return self._requests

    # --- workloads of one kind ------------------------------------------------------

    async def create(self, kind: Kind, body: dict, *, on_ambiguous: OnAmbiguous | None = None) -> dict:
        """POST the creation body; returns the 202 body (the full workload).

        After an ambiguous failure, `on_ambiguous()` is awaited before any
        retry: a workload it returns is taken as the result, None means "not created,
        send it again". Without it, or when the lookup itself fails, the failure is
        raised with `ambiguous=True`.
        """
        return await self._send("POST", kind.api_path, json=body, mode=_CREATE,
                                on_ambiguous=on_ambiguous)

    async def get(self, kind: Kind, workload_id: str) -> dict:
        """The live workload; raises errors.NotFound when it does not exist."""
        return await self._send("GET", _item(kind, workload_id))

    async def patch(self, kind: Kind, workload_id: str, body: dict) -> dict:
        """Update the workload with `body` (e.g. `{"spec": {"replicas": 3}}`) by the kind's
        `update_method` (PATCH; PUT for a kind updated by whole document); returns it."""
        if not kind.can_update:
            raise ValueError(f"{kind.name} cannot be updated in place")
        return await self._send(kind.update_method, _item(kind, workload_id), json=body,
                                mode=_WRITE)

    async def delete(self, kind: Kind, workload_id: str) -> dict:
        """Ask for deletion; returns the HttpResponse body. A 404 after an earlier
        attempt may have deleted it counts as done."""
        return await self._send("DELETE", _item(kind, workload_id, kind.delete_collection),
                                mode=_DELETE)

    async def suspend(self, kind: Kind, workload_id: str) -> dict:
        if not kind.can_suspend:
            raise ValueError(f"{kind.name} cannot be suspended")
        return await self._send("POST", _item(kind, workload_id) + "/suspend", mode=_WRITE)

    async def resume(self, kind: Kind, workload_id: str) -> dict:
        if not kind.can_suspend:
            raise ValueError(f"{kind.name} cannot be resumed")
        return await self._send("POST", _item(kind, workload_id) + "/resume", mode=_WRITE)

    # --- the workloads list ---------------------------------------------------------

    async def list_workloads(self, *, filter_by: list[str] | None = None, limit: int = MAX_PAGE,
                             offset: int = 0, deleted: bool = False) -> dict:
        """One page of `GET /api/v1/workloads`: `{"workloads": [...], "next": ...}`.

        `filter_by` items are `field<op>value` (e.g. `name==bert`), sent comma-joined.
        """
        if not 1 <= limit <= MAX_PAGE:
            raise ValueError(f"limit must be between 1 and {MAX_PAGE}, got {limit}")
        params: dict[str, Any] = {"limit": limit, "offset": offset}
        if filter_by:
            params["filterBy"] = ",".join(filter_by)
        if deleted:
            params["deleted"] = "true"
        page = await self._send("GET", WORKLOADS_PATH, params=params)
        if not isinstance(page.get("workloads"), list):
            raise errors.PermanentError(
                f"GET {WORKLOADS_PATH}: the answer has no `workloads` list",
                method="GET", path=WORKLOADS_PATH, status=200)
        return page

    async def iter_workloads(self, *, filter_by: list[str] | None = None,
                             deleted: bool = False) -> list[dict]:
        """Every workload matching `filter_by`, reading page after page."""
        found: list[dict] = []
        offset = 0
        while True:
            page = await self.list_workloads(filter_by=filter_by, limit=MAX_PAGE,
                                             offset=offset, deleted=deleted)
            items = page["workloads"]
            found.extend(items)
            if len(items) < MAX_PAGE:
                return found
            nxt = page.get("next")
            offset = nxt if isinstance(nxt, int) and nxt > offset else offset + len(items)

    async def get_workload_summary(self, workload_id: str) -> dict:
        """`GET /api/v1/workloads/{id}`: the kind-neutral view (phase, conditions, ...)."""
        return await self._send("GET", f"{WORKLOADS_PATH}/{workload_id}")

    async def find_live(self, kind: Kind, name: str, project_id: str, *,
                        include_deleting: bool = False) -> dict | None:
        """The live workload of `kind` named `name` in the project, or None: the lookup
        for `create(on_ambiguous=...)` and for recovery. A workload being deleted counts
        only with `include_deleting` (it still holds the name)."""
        items = await self.iter_workloads(filter_by=[f"name=={name}", f"projectId=={project_id}"])
        for item in items:
            if item.get("name") != name or not item.get("id"):
                continue
            try:
                live = await self.get(kind, item["id"])
            except errors.NotFound:  # another kind, or gone meanwhile
                continue
            if include_deleting or live.get("desiredPhase") != "Deleted":
                return live
        return None

    # --- projects -------------------------------------------------------------------

    async def find_projects(self, name: str, cluster_id: str) -> list[dict]:
        """Every project named `name` in the cluster (`GET /api/v1/org-unit/projects`,
        page after page): the lookup of a spec's `project:`. Names are not known to be
        unique, so the caller decides what other than one match means."""
        found: list[dict] = []
        offset = 0
        while True:
            params = {"filterBy": f"name=={name},clusterId=={cluster_id}",
                      "limit": MAX_PAGE, "offset": offset}
            page = await self._send("GET", PROJECTS_PATH, params=params)
            items = page.get("projects")
            if not isinstance(items, list):
                raise errors.PermanentError(
                    f"GET {PROJECTS_PATH}: the answer has no `projects` list",
                    method="GET", path=PROJECTS_PATH, status=200)
            # The filter is the server's; the exact match is checked here too.
            found += [p for p in items if isinstance(p, dict) and p.get("name") == name
                      and p.get("clusterId") == cluster_id]
            nxt = page.get("next")
            if len(items) < MAX_PAGE or not isinstance(nxt, int) or nxt <= offset:
                return found
            offset = nxt

    async def get_project(self, project_id: str) -> dict:
        """`GET /api/v1/org-unit/projects/{id}`: one project (its `resources` hold the GPU
        quota per node pool). `errors.NotFound` when there is no such project."""
        path = f"{PROJECTS_PATH}/{urllib.parse.quote(project_id, safe='')}"
        return await self._send("GET", path)

    # --- the one place that talks to the network ------------------------------------

    async def _fetch_token(self, body: dict) -> dict:
        return await self._send("POST", TOKEN_PATH, json=body, auth=False)

    async def _send(self, method: str, path: str, *, json: Any = None,
                    params: Mapping[str, Any] | None = None, auth: bool = True,
                    mode: str = _READ, on_ambiguous: OnAmbiguous | None = None) -> dict:
        start = self._clock()
        attempt = 0
        renewed = False
        maybe_performed = False
        while True:
            attempt += 1
            headers = {}
            token = None
            if auth:
                token = await self._auth.token()
                headers["Authorization"] = f"Bearer {token}"
            self._requests += 1
            retry_after: float | None = None
            refused = False
            sent = self._clock()
            try:
                resp = await self._request(method, path, json=json, params=params,
                                           headers=headers)
            except httpx.TransportError as exc:
                _log_request(method, path, params, f"no answer ({type(exc).__name__})",
                             self._clock() - sent)
                cause = _root_cause(exc)
                if cause is not None:
                    raise errors.PermanentError(f"{method} {path}: {cause}", method=method,
                                                path=path) from exc
                if not retries.is_retryable_transport(exc):
                    raise errors.PermanentError(
                        f"{method} {path}: {self._redact(str(exc)) or type(exc).__name__}",
                        method=method, path=path) from exc
                ambiguous = mode != _READ and retries.is_ambiguous_transport(exc)
                refused = retries.is_refused(exc)
                what = (self._refused() if refused
                        else self._redact(_describe_transport(exc)))
                failure: errors.RetryableError = errors.TransportError(
                    f"{method} {path}: {what}", method=method, path=path,
                    ambiguous=ambiguous, attempts=attempt)
                failure.__cause__ = exc
            else:
                status = resp.status_code
                _log_request(method, path, params, str(status), self._clock() - sent)
                if status == 401 and auth and self._auth.can_renew and not renewed:
                    renewed = True
                    attempt -= 1
                    await self._auth.renew(token)
                    continue
                if status < 400:
                    return self._json(resp, method, path)
                if status == 404 and mode == _DELETE and maybe_performed:
                    return {"code": 202, "message": "The workload was already gone when the "
                                                    "delete was retried."}
                if status not in retries.RETRY_STATUSES:
                    raise self._error(resp, method, path, auth)
                ambiguous = mode != _READ and retries.is_ambiguous_status(status)
                failure = self._error(resp, method, path, auth, ambiguous=ambiguous,
                                      attempts=attempt)
                retry_after = retries.retry_after(resp.headers.get("Retry-After"),
                                                  now=self._wall_clock())
            maybe_performed = maybe_performed or ambiguous
            failure.ambiguous = maybe_performed
            if ambiguous and mode == _CREATE:
                if on_ambiguous is None:
                    raise failure
                log.info("%s; looking the workload up before retrying", failure)
                try:
                    found = await on_ambiguous()
                except errors.ApiError as exc:
                    failure.args = (f"{failure.args[0]}; the lookup that would tell whether it "
                                    f"was created failed too: {exc}",)
                    raise failure from exc
                if found is not None:
                    return found
                maybe_performed = False
                failure.ambiguous = False
            delay = retry_after if retry_after is not None else retries.backoff(attempt, self._rng)
            attempts = self.max_attempts
            if refused:
                delay, attempts = retries.refused_delay(attempt), min(attempts, retries.REFUSED_ATTEMPTS)
            elapsed = self._clock() - start
            if attempt >= attempts or elapsed + delay > self.retry_budget_s:
                raise _gave_up(failure, attempt, elapsed)
            if isinstance(failure, errors.TransportError) and not refused \
                    and not self._said_unreachable:
                # Once, without -v: a control plane that does not answer should not mean
                # half a minute of silence. Each retry is logged at INFO (-v).
                self._said_unreachable = True
                log.warning("%s; retrying for up to %.0f s", failure, self.retry_budget_s)
            log.info("%s; retrying in %.1f s (attempt %d of %d)",
                     failure, delay, attempt + 1, attempts)
            await self._sleep(delay)

    async def _request(self, method: str, path: str, *, json: Any = None,
                       params: Mapping[str, Any] | None = None,
                       headers: dict[str, str]) -> httpx.Response:
        ticket = await self.concurrency.acquire()
        throttled = False
        try:
            # The whole URL: httpx parses it once (a path would be parsed, then merged).
            resp = await self._http.request(method, self.base_url + path, json=json,
                                            params=params, headers=headers)
            throttled = resp.status_code == 429
            return resp
        finally:
            self.concurrency.release(ticket, throttled=throttled)

    def _json(self, resp: httpx.Response, method: str, path: str) -> dict:
        try:
            data = resp.json()
        except ValueError:
            raise errors.PermanentError(
                f"{method} {path}: answered {resp.status_code} with a body that is not JSON",
                status=resp.status_code, method=method, path=path) from None
        if not isinstance(data, dict):
            raise errors.PermanentError(
                f"{method} {path}: answered {resp.status_code} with JSON that is not an object",
                status=resp.status_code, method=method, path=path)
        return data

    def _error(self, resp: httpx.Response, method: str, path: str, auth: bool,
               **extra: Any) -> errors.ApiError:
        status = resp.status_code
        api_message, details, issues = _parse_error_body(resp)
        api_message = self._redact(api_message)
        details = self._redact(details) if details else None
        text = f"{method} {path}: {status} {resp.reason_phrase or ''}".rstrip()
        if api_message:
            text += f": {api_message}"
        if details and details != api_message:
            text += f" ({details})"
        for issue in issues:
            line = f"{issue.get('field', '?')}: {self._redact(str(issue.get('details', '')))}"
            if line not in api_message:
                text += f"\n  {line}"
        if status in (401, 403):
            if not auth:
                text += "\n  check RUNAI_CLIENT_ID and RUNAI_CLIENT_SECRET"
            elif isinstance(self._auth, StaticToken):
                text += "\n  check RUNAI_TOKEN"
        kw = dict(status=status, method=method, path=path, details=details,
                  api_message=api_message)
        if status in retries.RETRY_STATUSES:
            return errors.ServerError(text, **kw, **extra)
        if status == 400:
            return errors.BadRequest(text, issues=issues, **kw)
        if status in (401, 403):
            return errors.Unauthorized(text, **kw)
        if status == 404:
            return errors.NotFound(text, **kw)
        if status == 409:
            return errors.Conflict(text, **kw)
        return errors.PermanentError(text, **kw)

    def _refused(self) -> str:
        where = urllib.parse.urlsplit(self.base_url)
        port = where.port or (443 if where.scheme == "https" else 80)
        host = f"[{where.hostname}]" if ":" in (where.hostname or "") else where.hostname
        if self.transport is None:  # httpx's own, for the proxy the environment sets
            # Not the proxy's URL: it may hold a password.
            return (f"cannot connect to the proxy set in the environment for {host}:{port}: "
                    "connection refused (check HTTPS_PROXY, HTTP_PROXY and ALL_PROXY)")
        return (f"cannot connect to {host}:{port}: connection refused (nothing "
                "listens there: check the URL, and that the control plane is up)")

    def _redact(self, text: str | None) -> str:
        text = text or ""
        for secret in self._auth.secrets:
            if secret:
                text = text.replace(secret, "***")
        return text


def _log_request(method: str, path: str, params: Mapping[str, Any] | None, outcome: str,
                 seconds: float) -> None:
    """One line per request at INFO (-v): method, path and query, status, time. Never a
    header or a body: they carry the token and the client secret."""
    if log.isEnabledFor(logging.INFO):
        query = "?" + "&".join(f"{k}={v}" for k, v in params.items()) if params else ""
        log.info("%s %s%s -> %s in %.0f ms", method, path, query, outcome, seconds * 1000)


def _proxy_configured() -> bool:
    """A proxy is set in the environment: then httpx's own transport, which honours it."""
    return any(k.lower() in ("http_proxy", "https_proxy", "all_proxy") and v
               for k, v in os.environ.items())


def _item(kind: Kind, workload_id: str, collection: str | None = None) -> str:
    if not workload_id or "/" in workload_id:
        raise ValueError(f"invalid workload id {workload_id!r}")
    return f"{collection or kind.api_path}/{workload_id}"


def _parse_error_body(resp: httpx.Response) -> tuple[str, str | None, list[dict]]:
    """(message, details, compliance issues) from an `Error` / `SubmissionErrorV2` body."""
    try:
        data = resp.json()
    except ValueError:
        return resp.text.strip()[:500], None, []
    if not isinstance(data, dict):
        return str(data)[:500], None, []
    message = data.get("message")
    details = data.get("details")
    issues = [{"field": i.get("field"), "details": i.get("details"),
               **({"rule": i["rule"]} if "rule" in i else {})}
              for i in data.get("complianceIssues") or [] if isinstance(i, dict)]
    return (str(message) if message is not None else "",
            str(details) if details is not None else None, issues)


def _root_cause(exc: BaseException) -> str | None:
    """A clear sentence for a connection failure that retrying cannot cure (a name that
    does not resolve, a certificate that does not verify), or None."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return (f"the control plane's TLS certificate could not be verified "
                    f"({seen.verify_message or seen.reason}); check the URL, or pass "
                    "--insecure only on a network you trust")
        if isinstance(seen, ssl.SSLError):
            return f"TLS handshake with the control plane failed ({seen.reason or seen})"
        if isinstance(seen, socket.gaierror):
            return f"cannot resolve the control plane's host name ({seen.strerror or seen})"
        seen = seen.__cause__ or seen.__context__
    return None


def _describe_transport(exc: httpx.TransportError) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out ({type(exc).__name__})"
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect ({exc or 'connection refused'})"
    return f"connection failed ({type(exc).__name__}: {exc})" if str(exc) else \
        f"connection failed ({type(exc).__name__})"


def _gave_up(failure: errors.RetryableError, attempts: int, elapsed: float) -> errors.RetryableError:
    failure.attempts = attempts
    if attempts > 1:
        failure.args = (f"{failure.args[0]} (gave up after {attempts} attempts in {elapsed:.1f} s)",)
    return failure
