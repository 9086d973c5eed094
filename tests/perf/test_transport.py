"""The API client's transport (reconciler.api.transport) over real sockets: connections
are reused up to the pool's size, a connection the server closed is replaced, network
failures surface as the httpx exceptions the client's retry policy reads (a create lost
after sending stays ambiguous), and a proxy set in the environment is used."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest

from reconciler import kinds
from reconciler.api import errors as api_errors
from reconciler.api.client import RunaiClient
from reconciler.api.transport import AiohttpTransport
from tests.helpers.constants import CLIENT_ID, CLIENT_SECRET

pytestmark = pytest.mark.http


def _token_body() -> dict:
    return {"grantType": "client_credentials", "clientID": CLIENT_ID, "clientSecret": CLIENT_SECRET}


def test_many_requests_reuse_at_most_size_connections(sim_server):
    async def run() -> int:
        pool = AiohttpTransport(size=4)
        async with httpx.AsyncClient(base_url=sim_server.url, transport=pool) as http:
            answers = await asyncio.gather(*(http.post("/api/v1/token", json=_token_body())
                                             for _ in range(40)))
        assert [a.status_code for a in answers] == [200] * 40
        assert all(a.json()["accessToken"] for a in answers)
        return pool.opened

    assert 1 <= asyncio.run(run()) <= 4
    assert len(sim_server.requests(api_only=False)) == 40


async def _one_shot_server(replies: list[bytes], heads: list[bytes] | None = None):
    """A server that answers each connection's first request, then closes it without
    saying so (as a server whose keep-alive timer ran out does); an empty reply closes
    the connection without answering. Request heads are appended to `heads`."""
    async def handle(reader, writer):
        head = await reader.readuntil(b"\r\n\r\n")
        if heads is not None:
            heads.append(head)
        writer.write(replies.pop(0))
        await writer.drain()
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


def test_a_connection_the_server_closed_is_replaced():
    ok = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"

    async def run() -> tuple[list[int], int]:
        server = await _one_shot_server([ok, ok])
        port = server.sockets[0].getsockname()[1]
        pool = AiohttpTransport(size=2)
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", transport=pool) as http:
                first = await http.get("/a")
                await asyncio.sleep(0.05)  # the server's close reaches us
                second = await http.get("/b")
        finally:
            server.close()
            await server.wait_closed()
        return [first.status_code, second.status_code], pool.opened

    statuses, opened = asyncio.run(run())
    assert statuses == [200, 200]
    assert opened == 2


def test_connection_refused_is_httpx_connect_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def run() -> None:
        async with httpx.AsyncClient(transport=AiohttpTransport(size=1)) as http:
            await http.get(f"http://127.0.0.1:{port}/")

    with pytest.raises(httpx.ConnectError):
        asyncio.run(run())


def test_size_must_be_positive():
    with pytest.raises(ValueError):
        AiohttpTransport(size=0)


def test_the_client_over_the_network_reads_an_html_error_page_as_one_clear_error():
    """An error page that is not JSON, from a proxy in front of the API, reads as status
    and text over the transport the client uses by default."""
    page = b"<html>upstream unavailable</html>"
    reply = (b"HTTP/1.1 403 Forbidden\r\ncontent-type: text/html\r\ncontent-length: "
             + str(len(page)).encode() + b"\r\n\r\n" + page)

    async def run() -> str:
        server = await _one_shot_server([reply])
        port = server.sockets[0].getsockname()[1]
        try:
            async with RunaiClient(f"http://127.0.0.1:{port}", token="a-long-secret-token", max_attempts=1) as client:
                with pytest.raises(api_errors.ApiError) as ei:
                    await client.get(kinds.get("DistributedTraining"),
                                     "0b6f6a4e-1d2c-4a43-9c44-3d1d5f1c9a01")
                return str(ei.value)
        finally:
            server.close()
            await server.wait_closed()

    message = asyncio.run(run())
    assert "403 Forbidden" in message and "upstream unavailable" in message


def test_a_create_dropped_after_sending_is_ambiguous_and_not_sent_again():
    """The server reads the POST and closes the connection: it may have created the
    workload, so the client must not re-send it blindly (it asks on_ambiguous, or says so)."""
    async def run() -> tuple[api_errors.ApiError, int]:
        heads: list[bytes] = []
        server = await _one_shot_server([b"", b""], heads)
        port = server.sockets[0].getsockname()[1]
        try:
            async with RunaiClient(f"http://127.0.0.1:{port}", token="a-long-secret-token") as client:
                with pytest.raises(api_errors.TransportError) as ei:
                    await client.create(kinds.get("DistributedTraining"), {"name": "bert"})
        finally:
            server.close()
            await server.wait_closed()
        return ei.value, len(heads)

    failure, posts = asyncio.run(run())
    assert failure.ambiguous is True and posts == 1
    assert "closed the connection" in str(failure)


def test_a_proxy_set_in_the_environment_is_used(monkeypatch):
    reply = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
    for var in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(var, raising=False)

    async def run() -> list[bytes]:
        heads: list[bytes] = []
        server = await _one_shot_server([reply], heads)
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")
        try:
            async with RunaiClient("http://runai.example.test", token="a-long-secret-token") as client:
                await client.get(kinds.get("DistributedTraining"), "0b6f6a4e-1d2c-4a43-9c44-3d1d5f1c9a01")
        finally:
            server.close()
            await server.wait_closed()
        return heads

    (head,) = asyncio.run(run())
    assert head.startswith(b"GET http://runai.example.test/api/v1/workloads/distributed/"
                           b"0b6f6a4e-1d2c-4a43-9c44-3d1d5f1c9a01 HTTP/1.1")


def test_insecure_skips_the_certificate_check_and_verify_refuses_it(self_signed_https):
    """--insecure (verify=False) reaches a server whose certificate nobody signed (it
    answers 501 to a GET: the TLS handshake went through); by default that certificate
    is one permanent error naming the way out."""
    async def get(verify: bool) -> api_errors.ApiError:
        async with RunaiClient(self_signed_https, token="a-long-secret-token", verify=verify,
                               max_attempts=1) as client:
            with pytest.raises(api_errors.ApiError) as ei:
                await client.get(kinds.get("DistributedTraining"),
                                 "0b6f6a4e-1d2c-4a43-9c44-3d1d5f1c9a01")
            return ei.value

    assert asyncio.run(get(False)).status == 501
    refused = asyncio.run(get(True))
    assert refused.status is None and "TLS certificate could not be verified" in str(refused)
