"""A keep-alive connection pool for the API client: O(1) per request, sized to parallelism.

Caller: `reconciler.api.client.RunaiClient` (when no transport is given and no proxy
applies). httpcore's own pool re-scans every connection for every queued request, and
with a syscall per idle connection (has_expired); at 32 requests in flight that cost
more CPU than the requests themselves (profiled: 70% of a 1,000-workload refresh), and
its default of 20 kept-alive connections closed and re-opened connections at
parallelism 32. This pool keeps up to `size` HTTP/1.1 connections to the one origin,
hands an idle one out (last in, first out; one liveness check) or opens a new one, and
puts it back when the response has been read. Requests beyond `size` wait their turn.

It is an `httpx.AsyncBaseTransport`, a peer of httpx's own transport: httpcore's
exceptions are translated to httpx's exactly as httpx does, so callers see no
difference.
"""

from __future__ import annotations

import asyncio
import ssl

import httpcore
import httpx

_EXCEPTIONS: list[tuple[type[Exception], type[httpx.HTTPError]]] = [
    # Most specific first: the first match wins.
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
]


def _translate(exc: Exception, request: httpx.Request) -> Exception:
    for core, mapped in _EXCEPTIONS:
        if isinstance(exc, core):
            return mapped(str(exc), request=request)
    return exc


class KeepAlivePool(httpx.AsyncBaseTransport):
    """Up to `size` kept-alive connections; `keepalive_expiry` seconds idle before one closes."""

    def __init__(self, *, size: int, verify: bool = True, keepalive_expiry: float = 30.0):
        if size < 1:
            raise ValueError("size must be at least 1")
        self.size = size
        self._verify = verify
        self._ssl: ssl.SSLContext | None = None  # made on the first https connection
        self._keepalive_expiry = keepalive_expiry
        self._idle: list[httpcore.AsyncHTTPConnection] = []
        self._slots: asyncio.Semaphore | None = None  # made in the running loop
        self.opened = 0  # connections opened so far (tests, benchmarks)

    async def _take(self, origin: httpcore.Origin) -> httpcore.AsyncHTTPConnection:
        while self._idle:
            conn = self._idle.pop()
            if conn.can_handle_request(origin) and conn.is_idle() and not conn.has_expired():
                return conn
            await conn.aclose()
        self.opened += 1
        if origin.scheme == b"https" and self._ssl is None:
            self._ssl = httpx.create_ssl_context(verify=self._verify)
        return httpcore.AsyncHTTPConnection(origin=origin, ssl_context=self._ssl,
                                            keepalive_expiry=self._keepalive_expiry)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.size)
        url = request.url
        origin = httpcore.Origin(url.raw_scheme, url.raw_host, url.port or
                                 (443 if url.raw_scheme == b"https" else 80))
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port,
                             target=url.raw_path),
            headers=request.headers.raw, content=request.stream, extensions=request.extensions)
        async with self._slots:
            conn = await self._take(origin)
            try:
                response = await conn.handle_async_request(core_request)
                body = b"".join([chunk async for chunk in response.stream])
                await response.aclose()
            except asyncio.CancelledError:
                await conn.aclose()
                raise
            except Exception as exc:
                await conn.aclose()
                raise _translate(exc, request) from exc
            if conn.is_idle():
                self._idle.append(conn)
            else:
                await conn.aclose()
        return httpx.Response(status_code=response.status, headers=response.headers,
                              content=body, extensions=response.extensions)

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.aclose()
