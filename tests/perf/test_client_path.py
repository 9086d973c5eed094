"""The API client's requests over the network without httpx's models
(`AiohttpTransport.exchange`): no httpx request or response is built for a create or a
GET by id, and the server receives what httpx would have sent (the client's headers, the
JSON body encoded as httpx encodes it) and its answers are read as before (an encoded
body decoded, an error's message quoted)."""

from __future__ import annotations

import asyncio
import gzip
import json

import httpx
import pytest

from reconciler import __version__, kinds
from reconciler.api import errors as api_errors
from reconciler.api.client import RunaiClient

pytestmark = pytest.mark.http

DT = kinds.DISTRIBUTED_TRAINING
BODY = {"name": "café-ddp", "projectId": "7", "clusterId": "c1",
        "spec": {"image": "nvcr.io/nvidia/pytorch:24.05-py3", "numWorkers": 2,
                 "annotations": [{"name": "note", "value": "naïve ✓"}]}}


def _answer(status: str, body: bytes, *extra: str) -> bytes:
    head = [f"HTTP/1.1 {status}", "content-type: application/json",
            f"content-length: {len(body)}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def _serve(replies: list[bytes], seen: list[tuple[bytes, bytes]]):
    """A keep-alive server answering each request with the next reply; each request's
    head and body are appended to `seen`."""
    async def handle(reader, writer):
        try:
            while replies:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                seen.append((head, await reader.readexactly(length)))
                writer.write(replies.pop(0))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


def _exchange(replies: list[bytes], call, monkeypatch):
    """Run `call(client)` against a server giving `replies`: (its result or the error it
    raised, the requests the server saw, the httpx requests the client sent)."""
    sent: list[httpx.Request] = []
    real_send = httpx.AsyncClient.send

    async def counting_send(self, request, **kwargs):
        sent.append(request)
        return await real_send(self, request, **kwargs)

    monkeypatch.setattr(httpx.AsyncClient, "send", counting_send)
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    seen: list[tuple[bytes, bytes]] = []

    async def run():
        server = await _serve(replies, seen)
        port = server.sockets[0].getsockname()[1]
        try:
            async with RunaiClient(f"http://127.0.0.1:{port}", token="tkn-1",
                                   max_attempts=1) as client:
                try:
                    return await call(client)
                except api_errors.ApiError as exc:
                    return exc
        finally:
            server.close()
            await server.wait_closed()

    return asyncio.run(run()), seen, sent


def _headers(head: bytes) -> dict[str, str]:
    lines = head.decode().split("\r\n")[1:]
    return {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines if ln)}


def test_a_create_sends_the_headers_and_bytes_httpx_sends_without_an_httpx_request(monkeypatch):
    live = json.dumps({**BODY, "workloadId": "w-1", "desiredPhase": "Running"}).encode()
    result, seen, sent = _exchange([_answer("202 Accepted", live)] * 3,
                                   lambda c: _three_creates(c), monkeypatch)
    assert [r["workloadId"] for r in result] == ["w-1"] * 3
    assert sent == []  # not one request through httpx's client
    head, body = seen[0]
    assert head.startswith(b"POST /api/v1/workloads/distributed HTTP/1.1\r\n")
    assert body == json.dumps(BODY, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    headers = _headers(head)
    assert {k: headers[k] for k in ("accept", "accept-encoding", "user-agent", "authorization",
                                    "content-type", "content-length")} == {
        "accept": "application/json", "accept-encoding": "identity",
        "user-agent": f"runai-reconcile/{__version__}", "authorization": "Bearer tkn-1",
        "content-type": "application/json", "content-length": str(len(body))}


async def _three_creates(client: RunaiClient) -> list[dict]:
    return [await client.create(DT, BODY) for _ in range(3)]


def test_an_encoded_answer_is_decoded(monkeypatch):
    live = {**BODY, "workloadId": "w-2"}
    reply = _answer("200 OK", gzip.compress(json.dumps(live).encode()), "content-encoding: gzip")
    result, _, _ = _exchange([reply], lambda c: c.get(DT, "w-2"), monkeypatch)
    assert result["workloadId"] == "w-2"
    assert result["spec"]["annotations"][0]["value"] == "naïve ✓"


def test_an_error_answer_is_quoted_with_its_reason_and_message(monkeypatch):
    reply = _answer("400 Bad Request", json.dumps(
        {"code": 400, "message": "spec.numWorkers: must be at least 1"}).encode())
    error, _, sent = _exchange([reply], lambda c: c.create(DT, BODY), monkeypatch)
    assert isinstance(error, api_errors.BadRequest)
    assert str(error) == ("POST /api/v1/workloads/distributed: 400 Bad Request: "
                          "spec.numWorkers: must be at least 1")
    assert sent == []


def test_a_body_orjson_would_spell_otherwise_is_encoded_or_refused_as_httpx_does(monkeypatch):
    live = json.dumps({**BODY, "workloadId": "w-3"}).encode()

    async def creates(client: RunaiClient):
        sent = await client.create(DT, {**BODY, "spec": {**BODY["spec"], "limit": None,
                                                         "big": 2 ** 70}})
        with pytest.raises(ValueError, match="not JSON compliant"):
            await client.create(DT, {**BODY, "spec": {"ratio": float("nan")}})
        return sent

    result, seen, _ = _exchange([_answer("202 Accepted", live)], creates, monkeypatch)
    assert result["workloadId"] == "w-3"
    assert len(seen) == 1  # the NaN body was never sent
    assert seen[0][1].endswith(b'"limit":null,"big":1180591620717411303424}}')


def test_a_list_page_goes_out_with_the_query_httpx_would_send(monkeypatch):
    """A page of the workload list (what a watch cycle sends most) takes the same path:
    its query as httpx writes it (`filterBy`'s `==` and `,` escaped), no httpx request."""
    page = json.dumps({"workloads": [{"id": "w-1", "name": "a", "phase": "Running"}],
                       "next": 0}).encode()

    async def listing(client: RunaiClient):
        return await client.list_workloads(filter_by=["projectId==7", "clusterId==c 1"],
                                            offset=500)

    result, seen, sent = _exchange([_answer("200 OK", page)], listing, monkeypatch)
    assert result["workloads"] == [{"id": "w-1", "name": "a", "phase": "Running"}]
    assert sent == []
    wanted = httpx.URL("http://h/api/v1/workloads", params={
        "limit": 500, "offset": 500, "filterBy": "projectId==7,clusterId==c 1"}).raw_path
    assert seen[0][0].startswith(b"GET " + wanted + b" HTTP/1.1\r\n")
    assert wanted.endswith(b"filterBy=projectId%3D%3D7%2CclusterId%3D%3Dc+1")
