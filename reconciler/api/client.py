"""The async client for the Run:ai control plane: one method per endpoint.

Every request goes through one `_send` and the transport of one `httpx.AsyncClient`;
only the transport differs: `transport.AiohttpTransport` over the network, httpx's own
when a proxy is set in the environment, the simulator's ASGI app for `--sim`,
`httpx.MockTransport` in unit tests. Over the network, a request without query
parameters (a create, a GET by id, a write, the token) skips httpx's request and
response models: `_request` hands the headers and body httpx would have sent to
`AiohttpTransport.exchange`, which fails with the same httpx exceptions, and logs the
line httpx logs.

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
`max_attempts` attempts per request, within one budget of `retry_budget_s` seconds for the
whole client (`retries.Budget`, the CLI's --timeout): no attempt is sent, or waited for,
past it, and once a request has given up at it nothing more is sent. Reads, PATCH, DELETE,
suspend and resume are safe to repeat. A create is not: after an ambiguous failure
(it may have been committed) `create` asks `on_ambiguous(kind, body)` to look the
workload up before any retry (`on_ambiguous()`), and raises
`RetryableError(ambiguous=True)` when no such callback was given. `find_live` does
that lookup: `create(kind, body, on_ambiguous=lambda: client.find_live(kind, name, project))`.
"""

from __future__ import annotations

import asyncio
import collections
import json as jsonlib
import logging
import math
import os
import random
import socket
import ssl
import time
import urllib.parse
from typing import Any, Awaitable, Callable, Iterable, Iterator, Mapping

import httpx
import orjson

from reconciler import masking, timeline
from reconciler.api import errors, retries
from reconciler.api.auth import ClientCredentials, StaticToken
from reconciler.api import limits as limits_mod
from reconciler.api.early import TOKEN_PATH, USER_AGENT, EarlyToken, proxy_configured
from reconciler.kinds import Kind

log = logging.getLogger("reconciler.api")
_httpx_log = logging.getLogger("httpx")  # the requests that skip httpx's client log here too

WORKLOADS_PATH = "/api/v1/workloads"
MAX_PAGE = 500
PROJECTS_PATH = "/api/v1/org-unit/projects"
DEFAULT_BUDGET_S = 60.0  # the command's retry budget (--timeout): docs/api-and-retries.md

OnAmbiguous = Callable[[], Awaitable[dict | None]]

_READ, _WRITE, _CREATE, _DELETE = "read", "write", "create", "delete"


def _check_url(url: str) -> None:
    """Refuse a URL that no request could use: no host, a bad port, a broken [IPv6]; and
    one with credentials in it (they belong in the environment, never on a command line)."""
    _refuse_credentials(url)
    shown = _without_password(url)
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 (reading it checks it: out of range or not a number)
    except ValueError as exc:
        raise errors.ConfigError(f"the Run:ai URL {shown!r} is malformed: {exc}") from None
    if not parts.hostname:
        raise errors.ConfigError(f"the Run:ai URL {shown!r} has no host name")


def _refuse_credentials(url: str) -> None:
    shown = _without_password(url)
    if shown != url:
        raise errors.ConfigError(
            f"the Run:ai URL {shown!r} has credentials in it: give the URL without them, and "
            "the credentials in the environment (RUNAI_TOKEN, or RUNAI_CLIENT_ID and "
            "RUNAI_CLIENT_SECRET)")


def _without_password(url: str) -> str:
    """`url` with whatever stands before an `@` in its authority replaced by `***` (read
    as text: the URL may be one that does not parse)."""
    scheme, sep, rest = url.partition("://")
    if not sep:  # no scheme: the authority comes first
        scheme, rest = "", url
    ends = [i for i in (rest.find(c) for c in "/?#") if i >= 0]
    end = min(ends) if ends else len(rest)
    if "@" not in rest[:end]:
        return url
    return f"{scheme}{sep}***@{rest[:end].rsplit('@', 1)[1]}{rest[end:]}"


def url_password(url: str | None) -> str | None:
    """The password a URL carries (`scheme://user:PASSWORD@host`), or None."""
    if not url or "@" not in url:
        return None
    try:
        password = urllib.parse.urlsplit(url).password
    except ValueError:
        return None
    return urllib.parse.unquote(password) if password else None


class RunaiClient:
    """An async client; use `async with RunaiClient(...) as client:` or `await aclose()`.

    Give `token` (used as is) or `client_id` and `client_secret` (exchanged for a
    token, renewed before expiry). `transport` replaces the network, e.g.
    `httpx.ASGITransport(app)` for the in-process simulator; otherwise up to
    `max_connections` kept-alive connections are used (size it to the requests you keep
    in flight: `--parallelism`). `retry_budget_s` is the budget of `retries.Budget` (or
    give the command's own `budget`, shared with its other clients); `secrets` are more
    values never to show in a message. `sleep`, `clock`
    (monotonic), `wall_clock` (epoch, to read a JWT's expiry) and `rng` (backoff
    jitter) are injectable so tests control time.
    """

    def __init__(self, base_url: str, *, token: str | None = None,
                 client_id: str | None = None, client_secret: str | None = None,
                 transport: httpx.AsyncBaseTransport | None = None,
                 verify: bool = True, timeout: float = 30.0, max_attempts: int = 8,
                 retry_budget_s: float = DEFAULT_BUDGET_S, max_connections: int = 32,
                 secrets: Iterable[str] = (), budget: retries.Budget | None = None,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
                 clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time,
                 rng: random.Random | None = None, early_token: EarlyToken | None = None):
        _refuse_credentials(base_url or "")
        if not base_url or not base_url.startswith(("http://", "https://")):
            raise errors.ConfigError("the Run:ai URL must start with http:// or https://, "
                                     f"got {_without_password(base_url or '')!r}")
        _check_url(base_url)
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if not 0 < retry_budget_s < math.inf:
            raise ValueError("retry_budget_s must be a positive number of seconds")
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
        # The command's one retry budget, shared by every request (and the token's), and
        # by every client of the command when it passes one `budget` to each.
        self._budget = budget if budget is not None else retries.Budget(retry_budget_s)
        self._timeout = timeout
        # Credentials known but not necessarily used here: masked in every message too.
        self._secrets = tuple(s for s in secrets if s)
        self._sleep = sleep
        self._clock = clock
        self._wall_clock = wall_clock
        self._rng = rng or random.Random()
        self._requests = 0
        self._by_status: collections.Counter[str] = collections.Counter()
        # The token request the command sent as it started (`early`), taken by the first
        # token fetch when it answered with one.
        self._early = early_token
        # Requests in flight: max_connections, halved on each round of 429s, then regained.
        self.concurrency = limits_mod.AdaptiveLimit(max_connections)
        if transport is None and not proxy_configured(os.environ):
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
                                                "User-Agent": USER_AGENT})
        # The network's transport takes a request without httpx's models
        # (`AiohttpTransport.exchange`): the headers httpx would add are these.
        self._exchange = getattr(transport, "exchange", None)
        self._headers = {**self._http.headers}

    @classmethod
    def from_env(cls, url: str | None = None, *, transport: httpx.AsyncBaseTransport | None = None,
                 verify: bool = True, env: Mapping[str, str] | None = None,
                 also_secret: Iterable[str | None] = (), **options: Any) -> "RunaiClient":
        """A client from `url` (else RUNAI_URL) and RUNAI_TOKEN, or RUNAI_CLIENT_ID +
        RUNAI_CLIENT_SECRET; RUNAI_MAX_ATTEMPTS and RUNAI_RETRY_BUDGET (seconds, the older
        name of --timeout) tune the retry policy. Every credential of the environment
        (RUNAI_TOKEN, RUNAI_CLIENT_SECRET, PGPASSWORD) and the password of each URL in
        `also_secret` (the --state URL) is masked in the client's messages. Raises
        ConfigError naming what is missing or malformed."""
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
        known = [env.get("RUNAI_TOKEN"), env.get("RUNAI_CLIENT_SECRET"), env.get("PGPASSWORD"),
                 *(url_password(u) for u in also_secret)]
        options["secrets"] = (*options.get("secrets", ()), *(k for k in known if k))
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

    def renew_budget(self) -> None:
        """A fresh retry budget of `retry_budget_s` from now on: one per cycle of a
        long-lived `watch`, whose one client outlives many commands' worth of requests."""
        self._budget = retries.Budget(self._budget.seconds)

    @property
    def budget(self) -> retries.Budget:
        """The retry budget this client spends (give it to the command's next client)."""
        return self._budget

    @property
    def requests_by_status(self) -> dict[str, int]:
        """HTTP requests sent so far by answer: the status ("200", "429", ...), or "error"
        when none came (the watch's api_requests_total; token requests included)."""
        return dict(self._by_status)

    @property
    def request_count(self) -> int:
        """HTTP requests sent so far, every attempt and token request included."""
        return self._requests

    # --- workloads of one kind ------------------------------------------------------

    async def create(self, kind: Kind, body: dict, *, on_ambiguous: OnAmbiguous | None = None,
                     sensitive: tuple[str, ...] = ()) -> dict:
        """POST the creation body; returns the 202 body (the full workload). The values at
        `sensitive` paths (the spec's `lifecycle.sensitive`) are masked in its errors.

        After an ambiguous failure, `on_ambiguous()` is awaited before any
        retry: a workload it returns is taken as the result, None means "not created,
        send it again". Without it, or when the lookup itself fails, the failure is
        raised with `ambiguous=True`.
        """
        body = await self._resolved(kind, body)
        method, path, json = kind.codec.create_request(kind, body)
        return await self._read(kind, await self._send(
            method, path, json=json, mode=_CREATE,
            on_ambiguous=on_ambiguous, sensitive=tuple(sensitive)), path)

    async def dry_run(self, kind: Kind, body: dict) -> tuple[str, str]:
        """The server's verdict on writing `body` (`Codec.dry_run_request`: a Run:ai
        policy's PUT with `validateOnly=true`, which stores nothing): ("accepted", ""),
        ("refused", the server's message: a 400), or ("unchecked", why: a name the write
        needs names nothing yet, or the type has no dry run). Other failures raise."""
        try:
            resolved = await self._resolved(kind, body)
        except errors.PermanentError as exc:
            if exc.status == 200:  # a lookup by name found nothing
                return "unchecked", str(exc)
            raise
        request = kind.codec.dry_run_request(kind, resolved)
        if request is None:
            return "unchecked", f"{kind.name} has no dry run"
        method, path, json = request
        try:
            await self._send(method, path, json=json, mode=_WRITE)
        except errors.BadRequest as exc:
            return "refused", exc.message
        return "accepted", ""

    async def get(self, kind: Kind, workload_id: str) -> dict:
        """The live workload, as the engine's flat body (`Kind.read`: a Manifest's from its
        WorkloadV2GetResponse, a NIM service's from its envelope); raises errors.NotFound
        when it does not exist."""
        path = _item(kind, workload_id)
        return await self._read(kind, await self._send("GET", path), path)

    async def _read(self, kind: Kind, answer: Any, path: str) -> Any:
        """`answer` (to a request of `path`) as the engine's flat body, after GETting what
        names the ids it holds (`Codec.lookups`: a Run:ai policy's project or department;
        one that is gone names nothing)."""
        wanted = kind.codec.lookups(kind, answer)
        if not wanted:
            return kind.codec.read_at(kind, answer, path, {})

        async def one(p: str) -> Any:
            try:
                return await self._send("GET", p)
            except errors.NotFound:
                return None

        found = dict(zip(wanted, await asyncio.gather(*map(one, wanted))))
        return kind.codec.read_at(kind, answer, path, found)

    async def patch(self, kind: Kind, workload_id: str, body: dict, *,
                    sensitive: tuple[str, ...] = (), whole: dict | None = None) -> dict:
        """Update the workload with `body` (e.g. `{"spec": {"replicas": 3}}`) by the kind's
        `update_method` (PATCH; PUT for a kind updated by whole document), or the request
        its codec makes of it and of its `whole` desired body (`Codec.update_request`: an
        organisation unit's quotas go to their own sub-route); returns it."""
        if not kind.can_update:
            raise ValueError(f"{kind.name} cannot be updated in place")
        if whole is not None:
            whole = await self._resolved(kind, whole)
        method, path, json, reread = kind.codec.update_request(
            kind, _item(kind, workload_id), body, whole)
        answer = await self._send(method, path, json=json, mode=_WRITE,
                                  sensitive=tuple(sensitive), any_json=reread)
        return await self.get(kind, workload_id) if reread else \
            await self._read(kind, answer, path)

    async def _resolved(self, kind: Kind, body: dict) -> dict:
        """`body` with the names the API takes as ids replaced by them
        (`Codec.references`, `Codec.resolve`), each looked up in its collection; a name
        that names nothing there is an `errors.PermanentError` saying so."""
        refs = kind.codec.references(kind, body)
        if not refs:
            return body
        found = await asyncio.gather(*(self._find_id(ref) for ref in dict.fromkeys(refs)))
        return kind.codec.resolve(kind, body, dict(zip(dict.fromkeys(refs), found)))

    async def _find_id(self, ref) -> str:
        if ref.key:
            wanted = [f"name=={ref.name}"] + (
                [f"clusterId=={ref.cluster}"] if ref.cluster else [])
            page = await self._send("GET", ref.path, params={"filterBy": ",".join(wanted),
                                                              "limit": MAX_PAGE})
            items = page.get(ref.key) if isinstance(page, dict) else None
        else:  # a bare array, neither paged nor filtered (the roles)
            items = await self._send("GET", ref.path, array=True)
        for item in items if isinstance(items, list) else ():
            if isinstance(item, dict) and item.get("name") == ref.name and \
                    (not ref.cluster or item.get("clusterId") in (None, ref.cluster)):
                return str(item["id"])
        where = f" in cluster {ref.cluster}" if ref.cluster else ""
        raise errors.PermanentError(f"no {ref.what} is named {ref.name!r}{where}",
                                    method="GET", path=ref.path, status=200)

    async def workload_types(self) -> list[dict]:
        """`GET /api/v1/workload-types`: the registered workload types (`types`)."""
        answer = await self._send("GET", "/api/v1/workload-types")
        types = answer.get("types") if isinstance(answer, dict) else None
        return [t for t in types or () if isinstance(t, dict)]

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
        page = await self._send("GET", WORKLOADS_PATH, params=params, listed=True)
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

    async def iter_collection(self, kind: Kind) -> list[dict]:
        """Every item of `kind`'s own collection (`GET api_path`, page after page), as the
        engine's flat bodies (`Kind.read`): where a type the workloads list does not show
        (`Kind.listed` false) is found."""
        found: list[dict] = []
        offset = 0
        while True:
            page = await self._send("GET", kind.api_path,
                                    params={"limit": MAX_PAGE, "offset": offset})
            items = kind.codec.items(kind, page)
            found.extend(await asyncio.gather(*(self._read(kind, dict(i), kind.api_path)
                                                for i in items)))
            if len(items) < MAX_PAGE:
                return found
            offset += len(items)

    async def names_in(self, path: str, key: str, cluster: str = "") -> list[dict]:
        """Every item of the collection at `path` (its answer's list under `key`, page
        after page), of `cluster` when given (`filterBy=clusterId==...`): the node pools,
        departments or priorities a plan checks a spec's names against. `key` empty: the
        answer is a bare array, neither paged nor filtered (the roles)."""
        if not key:
            items = await self._send("GET", path, array=True)
            return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []
        found: list[dict] = []
        offset = 0
        while True:
            params: dict[str, Any] = {"limit": MAX_PAGE, "offset": offset}
            if cluster:
                params["filterBy"] = f"clusterId=={cluster}"
            page = await self._send("GET", path, params=params)
            items = page.get(key) if isinstance(page, dict) else None
            items = [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []
            found.extend(items)
            if len(items) < MAX_PAGE:
                return found
            offset += len(items)

    async def get_workload_summary(self, workload_id: str) -> dict:
        """`GET /api/v1/workloads/{id}`: the kind-neutral view (phase, conditions, ...)."""
        return await self._send("GET", f"{WORKLOADS_PATH}/{workload_id}")

    async def find_live(self, kind: Kind, name: str, project_id: str, *,
                        include_deleting: bool = False) -> dict | None:
        """The live workload of `kind` named `name` in the project, or None: the lookup
        for `create(on_ambiguous=...)` and for recovery. A workload being deleted counts
        only with `include_deleting` (it still holds the name)."""
        if kind.listed:
            items = await self.iter_workloads(
                filter_by=[f"name=={name}", f"projectId=={project_id}"])
        else:
            items = [{"id": b.get("workloadId"), "name": b.get("name")}
                     for b in await self.iter_collection(kind)
                     if str(b.get("projectId")) == str(project_id)]
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
        try:
            return await self._send("POST", TOKEN_PATH, json=body, auth=False)
        except errors.ApiError as exc:
            # Whichever request needed the token ends with this error: it names the token
            # endpoint, not that request (not sent at all: another request's failure).
            if not isinstance(exc, errors.NotSent):
                exc.args = (f"the token endpoint failed: {exc.args[0]}",)
            raise

    async def _send(self, method: str, path: str, *, json: Any = None,
                    params: Mapping[str, Any] | None = None, auth: bool = True,
                    mode: str = _READ, on_ambiguous: OnAmbiguous | None = None,
                    sensitive: tuple[str, ...] = (), any_json: bool = False,
                    array: bool = False, listed: bool = False) -> Any:
        budget = self._budget
        hidden = _BodySecrets(json, sensitive)  # found only when a message needs them
        started: float | None = None  # when this request's first attempt was sent
        attempt = 0
        renewed = False
        maybe_performed = False
        failure: errors.RetryableError | None = None  # the last attempt's
        while True:
            attempt += 1
            if budget.spent is not None:
                raise self._not_sent(method, path, attempt - 1, maybe_performed)
            headers = {}
            token = None
            if auth:
                token = await self._auth.token()
                headers["Authorization"] = f"Bearer {token}"
            sent = self._clock()
            if started is None:
                started = sent
            remaining = budget.deadline(started) - sent
            if remaining <= 0:  # other requests' failures used the time up meanwhile (or,
                # on a loaded machine, this one's back-off woke up late): say what failed
                last = f"; the last answer: {failure}" if failure is not None else ""
                budget.spend(errors.NotSent(
                    f"the API has failed for {budget.waited(started, sent):.1f} s: the "
                    f"--timeout of {_seconds(budget.seconds)} ran out{last}"))
                raise self._not_sent(method, path, attempt - 1, maybe_performed)
            self._requests += 1
            retry_after: float | None = None
            refused = False
            try:
                resp = await self._request(method, path, json=json, params=params,
                                           headers=headers,
                                           timeout=min(self._timeout, remaining))
            except httpx.TransportError as exc:
                _log_request(method, path, params, f"no answer ({type(exc).__name__})",
                             self._clock() - sent)
                cause = _root_cause(exc)
                if cause is not None:
                    raise errors.PermanentError(f"{method} {path}: {cause}", method=method,
                                                path=path) from exc
                if not retries.is_retryable_transport(exc):
                    raise errors.PermanentError(
                        f"{method} {path}: {self._redact(str(exc), hidden) or type(exc).__name__}",
                        method=method, path=path) from exc
                ambiguous = mode != _READ and retries.is_ambiguous_transport(exc)
                refused = retries.is_refused(exc)
                what = (self._refused() if refused
                        else self._redact(_describe_transport(exc), hidden))
                before = failure
                failure = errors.TransportError(
                    f"{method} {path}: {what}", method=method, path=path,
                    ambiguous=ambiguous, attempts=attempt)
                failure.__cause__ = exc
                if (before is not None and isinstance(exc, httpx.TimeoutException)
                        and remaining < self._timeout):
                    # The budget's end cut this attempt short (on a loaded machine, within
                    # a few milliseconds): what the API answered before says what failed.
                    failure = before
            else:
                status = resp.status_code
                _log_request(method, path, params, str(status), self._clock() - sent)
                if status not in retries.RETRY_STATUSES:
                    budget.answered()
                if status == 401 and auth and self._auth.can_renew and not renewed:
                    renewed = True
                    attempt -= 1
                    await self._auth.renew(token)
                    continue
                if status < 400:
                    if any_json or (status in (202, 204) and not resp.content):
                        return {}  # not the resource (a sub-route's answer), or no body
                    return self._json(resp, method, path, array=array, listed=listed)
                if status == 404 and mode == _DELETE and maybe_performed:
                    return {"code": 202, "message": "The workload was already gone when the "
                                                    "delete was retried."}
                if status not in retries.RETRY_STATUSES:
                    raise self._error(resp, method, path, auth, hidden)
                ambiguous = mode != _READ and retries.is_ambiguous_status(status)
                failure = self._error(resp, method, path, auth, hidden, ambiguous=ambiguous,
                                      attempts=attempt)
                retry_after = retries.retry_after(resp.headers.get("Retry-After"),
                                                  now=self._wall_clock())
            budget.failed(sent)
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
                    failure.final = getattr(exc, "final", False)
                    raise failure from exc
                if found is not None:
                    return found
                maybe_performed = False
                failure.ambiguous = False
            delay = retry_after if retry_after is not None else retries.backoff(attempt, self._rng)
            attempts = self.max_attempts
            if refused:
                delay, attempts = retries.refused_delay(attempt), min(attempts, retries.REFUSED_ATTEMPTS)
            now = self._clock()
            waited = budget.waited(started, now)
            if attempt >= attempts:
                raise _gave_up(failure, attempt, waited)
            if now + delay >= budget.deadline(started):
                raise _gave_up(failure, attempt, waited, budget=budget)
            if not refused and not budget.noticed:
                # Once, without -v: an API that fails or does not answer should not mean a
                # minute of silence. Each retry is logged at INFO (-v).
                budget.noticed = True
                more = attempts - attempt
                log.warning("%s; retrying at most %d more time%s, for up to %s more "
                            "(--timeout %s)", _what_failed(failure, path), more,
                            "s" if more != 1 else "", _seconds(budget.deadline(started) - now),
                            _seconds(budget.seconds))
            log.info("%s; retrying in %.1f s (attempt %d of %d)",
                     failure, delay, attempt + 1, attempts)
            await self._sleep(delay)

    def _not_sent(self, method: str, path: str, attempts: int,
                  ambiguous: bool) -> errors.RetryableError:
        """The error of a request the spent budget stops (before its first or next attempt)."""
        spent = self._budget.spent
        why = str(spent) if spent is not None else "the --timeout ran out"
        if spent is not None and str(spent).startswith(f"{method} {path}: "):
            why = str(spent)[len(f"{method} {path}: "):]
        error = errors.NotSent(f"{method} {path}: not sent, the command gave up on the API: {why}",
                               method=method, path=path, ambiguous=ambiguous,
                               attempts=attempts, final=True)
        error.gave_up_on = spent  # what a command that ends here says, alone
        return error

    async def _request(self, method: str, path: str, *, json: Any = None,
                       params: Mapping[str, Any] | None = None,
                       headers: dict[str, str], timeout: float) -> httpx.Response:
        ticket = await self.concurrency.acquire()
        throttled = False
        try:
            # The whole URL: httpx parses it once (a path would be parsed, then merged).
            timeline.request_sent()
            try:
                early = self._early_answer(method, path, json)
                query = None if params is None else _query(params)
                if early is not None and (got := await early.answer()) is not None:
                    status, answer_headers, body = got  # this attempt's answer: ahead
                    resp = httpx.Response(status, headers=answer_headers, content=body,
                                          request=httpx.Request(method, self.base_url + path))
                    if _httpx_log.isEnabledFor(logging.INFO):
                        _httpx_log.info('HTTP Request: %s %s "HTTP/1.1 %d %s"', method,
                                        self.base_url + path, status, resp.reason_phrase)
                elif self._exchange is not None and (params is None or query is not None):
                    # Over aiohttp, straight to its pool: the headers, query and body
                    # httpx would have sent, without its request and response models.
                    content = None
                    if json is not None:
                        headers = {**self._headers, **headers,
                                   "Content-Type": "application/json"}
                        content = _json_bytes(json)
                    else:
                        headers = {**self._headers, **headers}
                    resp = await self._exchange(method, self.base_url + path, headers,
                                                content, timeout, query=query)
                    if _httpx_log.isEnabledFor(logging.INFO):  # the line httpx's client logs
                        _httpx_log.info('HTTP Request: %s %s%s "HTTP/1.1 %d %s"', method,
                                        self.base_url + path, "" if query is None else "?" + query,
                                        resp.status_code, resp.reason_phrase)
                else:
                    resp = await self._http.request(method, self.base_url + path, json=json,
                                                    params=params, headers=headers,
                                                    timeout=httpx.Timeout(timeout))
            except httpx.TransportError:
                self._by_status["error"] += 1
                raise
            timeline.answer_received()
            self._by_status[str(resp.status_code)] += 1
            throttled = resp.status_code == 429
            return resp
        finally:
            self.concurrency.release(ticket, throttled=throttled)

    def _early_answer(self, method: str, path: str, body: Any) -> EarlyToken | None:
        """The token request the command sent as it started (`api.early`), for the first
        token request of this client when it asks the same thing; None otherwise."""
        early = self._early
        if early is None or path != TOKEN_PATH or method != "POST":
            return None
        self._early = None
        return early if isinstance(body, dict) and body.get("clientID") == early.client_id \
            else None

    def _json(self, resp: httpx.Response, method: str, path: str, *,
              array: bool = False, listed: bool = False) -> Any:
        """The JSON object answered (with `array`: the JSON array answered).

        Decoded by orjson (in C; a watch of a big fleet spends much of its cycle decoding
        pages: docs/performance.md), whose key cache makes every answer's keys one set of
        strings: a refresh holds a fleet's answers, each with its own copy of every key
        when decoded by `json` (its key memo is per document). orjson reads an integer
        beyond 64 bits as a float: an answer holding a run of 19 digits (the shortest such
        integer has 19) is read by `json`, which keeps it exact; `listed`, a page of the
        workload list, whose items are read for their ids, names, phases and fingerprints,
        never as a body, is not. Whatever orjson refuses (NaN, Infinity, a number too
        large for a float, a lone surrogate, text that is not JSON) goes the standard way,
        which reads it as it always did or says what is wrong as for any other answer."""
        content = resp.content or b""
        if listed or _LONG_DIGITS not in content.translate(_DIGITS):
            try:
                data = orjson.loads(content)
            except orjson.JSONDecodeError:
                pass
            else:
                if isinstance(data, list if array else dict):
                    return data
        try:
            data = jsonlib.loads(content, parse_constant=_no_constant,
                                 parse_float=_finite_float)
        except _NotFinite as exc:
            raise errors.PermanentError(
                f"{method} {path}: answered {resp.status_code} with JSON holding {exc}, "
                "which is not a finite number; nothing of it was used",
                status=resp.status_code, method=method, path=path) from None
        except ValueError:
            raise errors.PermanentError(
                f"{method} {path}: answered {resp.status_code} with a body that is not JSON",
                status=resp.status_code, method=method, path=path) from None
        if not isinstance(data, list if array else dict):
            what = "an array" if array else "an object"
            raise errors.PermanentError(
                f"{method} {path}: answered {resp.status_code} with JSON that is not {what}",
                status=resp.status_code, method=method, path=path)
        return data

    def _error(self, resp: httpx.Response, method: str, path: str, auth: bool,
               hidden: Iterable[str] = (), **extra: Any) -> errors.ApiError:
        status = resp.status_code
        api_message, details, issues = _parse_error_body(resp)
        api_message = self._redact(api_message, hidden)
        details = self._redact(details, hidden) if details else None
        text = f"{method} {path}: {status} {resp.reason_phrase or ''}".rstrip()
        if api_message:
            text += f": {api_message}"
        if details and details != api_message:
            text += f" ({details})"
        for issue in issues:
            line = (f"{self._redact(str(issue.get('field', '?')), hidden)}: "
                    f"{self._redact(str(issue.get('details', '')), hidden)}")
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

    def _redact(self, text: str | None, hidden: Iterable[str] = ()) -> str:
        """`text` with every credential this client knows, and `hidden`, masked: the token
        and the client secret in use, those of the environment it is not using, a database
        password, and the secret values of the request's body; each as it is, JSON-escaped,
        URL-encoded or in base64 (`masking.encoded_forms`)."""
        return masking.mask_text(text or "", (*self._auth.secrets, *self._secrets, *hidden))


# An answer's bytes with each digit as "0" and any other byte as a blank: 19 "0"s in a
# row are where an integer orjson would read as a float may be (2**63 has 19 digits).
# Found in C (a translation and a search: 2 us for an answer of 3 KB, a regular
# expression 30).
_DIGITS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_DIGITS = b"0" * 19


class _NotFinite(ValueError):
    """NaN, Infinity or a number too large for a float, in an API answer."""


def _no_constant(name: str) -> Any:
    raise _NotFinite(name)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(text if len(text) <= 20 else text[:20] + "...")
    return value


def _json_bytes(value: Any) -> bytes:
    """A request's JSON body as httpx encodes it (`httpx._content.encode_json`: compact,
    UTF-8, no NaN), written by orjson, which spells only some floats differently (1e-7
    for 1e-07). What orjson refuses (an integer beyond 64 bits, a key that is no string,
    a date) and a text holding a null (where orjson writes NaN and infinities) are
    encoded as httpx does, which refuses what it refused."""
    try:
        out = orjson.dumps(value, option=_PASS_THROUGH)
    except orjson.JSONEncodeError:
        out = b"null"
    if b"null" in out:
        return jsonlib.dumps(value, ensure_ascii=False, separators=(",", ":"),
                             allow_nan=False).encode("utf-8")
    return out


# Types orjson would write and the standard encoder refuses, handed back to be refused.
_PASS_THROUGH = (orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
                 | orjson.OPT_PASSTHROUGH_SUBCLASS)


def _query(params: Mapping[str, Any]) -> str | None:
    """The query string httpx sends for `params` (`QueryParams`: `urlencode`, then every
    character it writes left as it is) when each value is a string or an integer (None:
    any other, which httpx spells its own way: left to httpx)."""
    for value in params.values():
        if type(value) is not str and type(value) is not int:
            return None
    return urllib.parse.urlencode(params)


def _log_request(method: str, path: str, params: Mapping[str, Any] | None, outcome: str,
                 seconds: float) -> None:
    """One line per request at INFO (-v): method, path and query, status, time. Never a
    header or a body: they carry the token and the client secret."""
    if log.isEnabledFor(logging.INFO):
        query = "?" + "&".join(f"{k}={v}" for k, v in params.items()) if params else ""
        log.info("%s %s%s -> %s in %.0f ms", method, path, query, outcome, seconds * 1000)


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


def _gave_up(failure: errors.RetryableError, attempts: int, waited: float, *,
             budget: retries.Budget | None = None) -> errors.RetryableError:
    """`failure`, saying how many attempts and how long the command really waited; with
    `budget`, the --timeout ran out: it is spent, and the error is final."""
    failure.attempts = attempts
    tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
    if budget is not None:
        failure.final = True
        why = ("ran out" if waited >= budget.seconds - 0.05
               else "would run out before the next")
        failure.args = (f"{failure.args[0]} (gave up after {tries} in {waited:.1f} s: "
                        f"the --timeout of {_seconds(budget.seconds)} {why})",)
        budget.spend(failure)
    elif attempts > 1:
        failure.args = (f"{failure.args[0]} (gave up after {tries} in {waited:.1f} s)",)
    return failure


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s".replace(".0 s", " s")


def _what_failed(failure: errors.RetryableError, path: str) -> str:
    """The first line of `failure`, the token endpoint named as such."""
    text = str(failure).splitlines()[0]
    if path == TOKEN_PATH:
        return f"the token endpoint failed: {text}"
    return text


class _BodySecrets:
    """The values in a request body that the API may quote back and must not be shown:
    those `masking` never shows (an environment variable whose name looks like a secret,
    a path of the spec's `lifecycle.sensitive`). Iterated, they are found on first use:
    only a message about a failure reads them, and finding them walks the whole body."""

    __slots__ = ("_body", "_sensitive", "_found")

    def __init__(self, body: Any, sensitive: tuple[str, ...] = ()):
        self._body, self._sensitive = body, sensitive
        self._found: tuple[str, ...] | None = None

    def __iter__(self) -> Iterator[str]:
        if self._found is None:
            self._found = (tuple(masking.secret_values(self._body, self._sensitive))
                           if isinstance(self._body, dict) else ())
        return iter(self._found)
