"""The API client's network transport: an `httpx.AsyncBaseTransport` over aiohttp's pool.

Caller: `reconciler.api.client.RunaiClient`, which puts it under its `httpx.AsyncClient`
when no transport is given and no proxy is set in the environment (then httpx's own
transport, which honours it). It is a peer of the ASGI transport the simulator is
reached through (`--sim`, tests) and of `httpx.MockTransport`: the client code above the
seam is the same for all three. aiohttp parses HTTP in C and keeps up to `size`
connections alive; docs/performance.md ("What each speed device buys") says what it buys over
httpx's own transport.

The client's own requests (those without query parameters: creates, GETs by id, writes,
the token) skip httpx's models: `exchange` takes the method, URL, headers and body the
client would have handed httpx and returns an `Answer`, the part of an `httpx.Response`
the client reads (status, headers, bytes, reason; text and JSON for an error's message,
through an httpx.Response made then). The same aiohttp call and the same translation of
failures serve both ways in; docs/performance.md says what skipping httpx buys.

aiohttp's failures are raised as the httpx exceptions that say what they mean for a
retry, chained to what they wrap (a socket.gaierror, an ssl.SSLCertVerificationError):
refused or not resolved, nothing was sent (`ConnectError`); dropped after sending, the
request may have been performed (`RemoteProtocolError`, `ReadError`, `ReadTimeout`).
Bodies are passed through undecoded; httpx decodes them (an `Answer` whose body is
encoded is an httpx.Response instead, which decodes it).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from typing import Any

import httpx
import yarl

# aiohttp builds two default TLS contexts as it is imported, each reading the system's CA
# certificates (about 40 ms of CPU, in every command that sends a request, even to an
# http URL). This transport never uses them: an https URL's requests carry the context
# httpx would use (`_start`), and --insecure's verify nothing; so the certificates are
# not read for them.
_read_certificates = ssl.SSLContext.set_default_verify_paths
ssl.SSLContext.set_default_verify_paths = lambda self: None  # type: ignore[method-assign]
try:
    import aiohttp
finally:
    ssl.SSLContext.set_default_verify_paths = _read_certificates  # type: ignore[method-assign]


class AiohttpTransport(httpx.AsyncBaseTransport):
    """Up to `size` kept-alive connections; `keepalive_expiry` seconds idle before one closes."""

    def __init__(self, *, size: int, verify: bool = True, keepalive_expiry: float = 30.0):
        if size < 1:
            raise ValueError("size must be at least 1")
        self.size = size
        self._verify = verify
        self._keepalive_expiry = keepalive_expiry
        self._session: aiohttp.ClientSession | None = None  # made in the running loop
        self.opened = 0  # sockets made for connections so far (tests)
        # (pool, connect, read) -> its aiohttp.ClientTimeout (a request's are the client's)
        self._timeouts: dict[tuple, aiohttp.ClientTimeout] = {}

    def _start(self, https: bool) -> aiohttp.ClientSession:
        def new_socket(addr_info: Any) -> socket.socket:
            # Counted where aiohttp makes a connection's socket: a trace config would
            # make aiohttp build its trace objects for every request.
            self.opened += 1
            family, type_, proto, _, _ = addr_info
            return socket.socket(family=family, type=type_, proto=proto)

        # The CA certificates httpx trusts (certifi, or SSL_CERT_FILE / SSL_CERT_DIR),
        # loaded only when the URL is https.
        tls: Any = False
        if self._verify:
            tls = httpx.create_ssl_context(verify=True) if https else True
        connector = aiohttp.TCPConnector(limit=self.size, limit_per_host=self.size, ssl=tls,
                                         keepalive_timeout=self._keepalive_expiry,
                                         socket_factory=new_socket)
        # httpx sets every header (User-Agent, Accept-Encoding, ...) and keeps the
        # cookies: aiohttp adds no header, keeps no cookie and decodes nothing.
        return aiohttp.ClientSession(connector=connector, auto_decompress=False,
                                     cookie_jar=aiohttp.DummyCookieJar(),
                                     skip_auto_headers=("User-Agent", "Accept-Encoding"))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeout = request.extensions.get("timeout") or {}
        resp, content = await self._send(request.method, str(request.url),
                                         request.headers.multi_items(), request.content,
                                         timeout.get("pool"), timeout.get("connect"),
                                         timeout.get("read"), request)
        return _response(resp, content, request)

    async def exchange(self, method: str, url: str, headers: dict[str, str],
                       content: bytes | None, timeout: float, *,
                       query: str | None = None) -> "Answer | httpx.Response":
        """One request as `RunaiClient` sends it without httpx's models: `timeout` seconds
        for the pool, the connection and each read (as `httpx.Timeout(timeout)`); `query`
        (already encoded, as httpx encodes it) sent as it is. Fails with the same httpx
        exceptions as `handle_async_request`."""
        if query is not None:
            url += "?" + query
        resp, body = await self._send(method, url, headers, content, timeout, timeout,
                                      timeout, None, encoded=query is not None)
        if "Content-Encoding" in resp.headers:  # not asked for (identity): httpx decodes it
            return _response(resp, body, httpx.Request(method, url))
        return Answer(resp.status, resp.headers, body, resp.reason or "", resp.raw_headers)

    async def _send(self, method: str, url: str, headers: Any, content: bytes | None,
                    pool: float | None, connect: float | None, read: float | None,
                    request: httpx.Request | None, *,
                    encoded: bool = False) -> tuple[aiohttp.ClientResponse, bytes]:
        if self._session is None:
            self._session = self._start(url.startswith("https:"))
        key = (pool, connect, read)
        limits = self._timeouts.get(key)
        if limits is None:
            limits = self._timeouts[key] = aiohttp.ClientTimeout(
                total=None, connect=pool, sock_connect=connect, sock_read=read)
        try:
            # An encoded URL is sent as it is (yarl would spell some escapes its own way).
            async with self._session.request(method, yarl.URL(url, encoded=True) if encoded
                                             else url, headers=headers,
                                             data=content or None, allow_redirects=False,
                                             timeout=limits) as resp:
                body = await resp.read()
        except asyncio.CancelledError:
            raise
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            # Chained to what a connection failure wraps (socket.gaierror,
            # ssl.SSLCertVerificationError, ...): the client reads the cause from there.
            cause = (getattr(exc, "certificate_error", None) or getattr(exc, "os_error", None)
                     or exc)
            raise _translate(exc, request or httpx.Request(method, url)) from cause
        return resp, body

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()


class Answer:
    """What `RunaiClient` reads of an answer: `status_code`, `headers` (case-insensitive
    `get`), `content` (bytes) and `reason_phrase` as an httpx.Response has them; `json()`
    and `text` (an error's message) from an httpx.Response made when first asked."""

    __slots__ = ("status_code", "headers", "content", "reason_phrase", "_raw", "_full")

    def __init__(self, status: int, headers: Any, content: bytes, reason: str, raw: Any):
        self.status_code, self.headers, self.content = status, headers, content
        self.reason_phrase, self._raw = reason, raw
        self._full: httpx.Response | None = None

    def _response(self) -> httpx.Response:
        if self._full is None:
            self._full = httpx.Response(self.status_code, headers=self._raw,
                                        content=self.content)
        return self._full

    def json(self) -> Any:
        return self._response().json()

    @property
    def text(self) -> str:
        return self._response().text


def _response(resp: aiohttp.ClientResponse, content: bytes,
              request: httpx.Request) -> httpx.Response:
    return httpx.Response(resp.status, headers=resp.raw_headers, content=content,
                          request=request,
                          extensions={"http_version": b"HTTP/1.1",
                                      "reason_phrase": (resp.reason or "").encode()})


def _translate(exc: BaseException, request: httpx.Request) -> httpx.TransportError:
    """The httpx exception a failure of aiohttp's stands for (most specific first)."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(text, request=request)
    if isinstance(exc, (aiohttp.SocketTimeoutError, asyncio.TimeoutError)):
        return httpx.ReadTimeout(text, request=request)
    if isinstance(exc, aiohttp.ClientConnectorError):
        # Refused, unreachable, a name that does not resolve, a TLS failure: nothing was sent.
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
