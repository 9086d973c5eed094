"""The API client's network transport: aiohttp's connection pool, under httpx's names.

Caller: `reconciler.api.client.RunaiClient` (when no transport is given and no proxy
applies), which hands each request to `send` and reads the `Answer`. The client is
written against httpx (exceptions, and `httpx.AsyncClient` over the in-process simulator
or a proxy); this transport only changes what moves the bytes. httpx's own stack
(httpcore, h11 and anyio, all pure Python) cost 1.9 ms of client CPU per request in a
1,000-workload refresh; aiohttp parses HTTP in C and keeps up to `size` connections
alive: with the client calling `send` directly, 0.75-0.85 ms (docs/performance.md).
`handle_async_request` makes it an `httpx.AsyncBaseTransport` as well.

aiohttp's failures are raised as httpx's exceptions chained to what they wrap (a
socket.gaierror, an ssl.SSLCertVerificationError), so that the client can tell a name
that does not resolve or a certificate that does not verify (permanent) from a refused
or dropped connection (retried). Bodies are passed through undecoded: the client asks
for none to be compressed, and httpx decodes what comes through `handle_async_request`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson


class AiohttpTransport(httpx.AsyncBaseTransport):
    """Up to `size` kept-alive connections; `keepalive_expiry` seconds idle before one closes."""

    def __init__(self, *, size: int, verify: bool = True, keepalive_expiry: float = 30.0):
        if size < 1:
            raise ValueError("size must be at least 1")
        self.size = size
        self._verify = verify
        self._keepalive_expiry = keepalive_expiry
        self._session: Any = None  # made in the running loop, on the first request
        self.opened = 0  # connections opened so far (tests, benchmarks)

    def open(self, url: str) -> None:
        """Make the session (and import aiohttp) if not yet done; in the running loop.
        `url` (or any URL of the same scheme) tells whether TLS will be needed."""
        if self._session is None:
            self._session = self._start(url.startswith("https:"))

    def _start(self, https: bool) -> Any:
        import aiohttp  # a third of a second: only when a request is sent over the network

        async def opened(*_: Any) -> None:
            self.opened += 1

        trace = aiohttp.TraceConfig()
        trace.on_connection_create_end.append(opened)
        # The CA certificates httpx trusts (certifi, or SSL_CERT_FILE / SSL_CERT_DIR), as
        # before this transport; built only for https (a few tens of ms).
        tls: Any = False
        if self._verify:
            tls = httpx.create_ssl_context(verify=True) if https else True
        connector = aiohttp.TCPConnector(limit=self.size, limit_per_host=self.size, ssl=tls,
                                         keepalive_timeout=self._keepalive_expiry)
        # httpx sets every header (User-Agent, Accept-Encoding, ...): aiohttp adds none,
        # keeps no cookies and decodes nothing.
        return aiohttp.ClientSession(connector=connector, auto_decompress=False,
                                     cookie_jar=aiohttp.DummyCookieJar(),
                                     skip_auto_headers=("User-Agent", "Accept-Encoding"),
                                     trace_configs=[trace])

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeout = request.extensions.get("timeout") or {}
        answer = await self.send(request.method, str(request.url), request.headers.multi_items(),
                                 request.content or None, connect=timeout.get("connect"),
                                 read=timeout.get("read"), pool=timeout.get("pool"),
                                 request=request)
        return httpx.Response(status_code=answer.status_code, headers=answer.raw_headers,
                              content=answer.content, request=request,
                              extensions={"http_version": b"HTTP/1.1",
                                          "reason_phrase": answer.reason_phrase.encode()})

    async def send(self, method: str, url: str, headers: Any, body: bytes | None, *,
                   connect: float | None, read: float | None, pool: float | None,
                   request: httpx.Request | None = None) -> "Answer":
        """One exchange: the whole answer, or httpx's exception for a failure.

        The client calls this directly: httpx's request building, URL merging, cookie
        jar and response model cost half of a request's CPU and do nothing the client
        needs. `handle_async_request` wraps it for an `httpx.AsyncClient`."""
        import aiohttp

        self.open(url)
        limits = aiohttp.ClientTimeout(total=None, connect=pool, sock_connect=connect,
                                       sock_read=read)
        try:
            async with self._session.request(method, url, headers=headers, data=body,
                                             allow_redirects=False, timeout=limits) as resp:
                return Answer(resp.status, resp.reason or "", resp.headers, resp.raw_headers,
                              await resp.read())
        except asyncio.CancelledError:
            raise
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            # A connection failure is chained to what it wraps (socket.gaierror,
            # ssl.SSLCertVerificationError, ...): the client reads the cause from there.
            cause = (getattr(exc, "certificate_error", None) or getattr(exc, "os_error", None)
                     or exc)
            raise _translate(exc, request) from cause

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()


class Answer:
    """A response as the client reads it, by httpx.Response's names: `status_code`,
    `reason_phrase`, `headers` (case-insensitive `get`), `content`, `text`, `json()`.
    The body is as it came: the client asks for no compression (`Accept-Encoding:
    identity`)."""

    __slots__ = ("status_code", "reason_phrase", "headers", "raw_headers", "content")

    def __init__(self, status: int, reason: str, headers: Any, raw_headers: Any, content: bytes):
        self.status_code = status
        self.reason_phrase = reason
        self.headers = headers
        self.raw_headers = raw_headers
        self.content = content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body parsed (orjson: a third of json's time); ValueError when not JSON."""
        return orjson.loads(self.content)


def _translate(exc: BaseException, request: httpx.Request | None) -> httpx.TransportError:
    """The httpx exception a failure of aiohttp's stands for (most specific first)."""
    import aiohttp

    text = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(text, request=request)
    if isinstance(exc, (aiohttp.SocketTimeoutError, asyncio.TimeoutError)):
        return httpx.ReadTimeout(text, request=request)
    if isinstance(exc, aiohttp.ClientConnectorError):
        # Refused, unreachable, a name that does not resolve, a TLS failure: nothing was
        # sent. The cause (socket.gaierror, ssl.SSLError) is chained for the client.
        return httpx.ConnectError(text, request=request)
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return httpx.RemoteProtocolError("the server closed the connection without answering",
                                         request=request)
    if isinstance(exc, (aiohttp.ClientPayloadError, aiohttp.ClientResponseError)):
        return httpx.RemoteProtocolError(text, request=request)
    if isinstance(exc, aiohttp.InvalidURL):
        return httpx.UnsupportedProtocol(text, request=request)
    if isinstance(exc, (aiohttp.ClientOSError, OSError)):
        return httpx.ReadError(text, request=request)
    return httpx.NetworkError(text, request=request)
