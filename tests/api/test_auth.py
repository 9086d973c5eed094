"""Client-credentials tokens: exchange, expiry from the JWT, renewal ahead of expiry and
after a 401, one renewal at a time, and secrets kept out of errors and logs."""

from __future__ import annotations

import asyncio
import json
import logging

import httpx
import pytest

from reconciler import kinds
from reconciler.api import errors
from reconciler.api.auth import jwt_expiry
from tests.helpers.api import CLIENT_ID, CLIENT_SECRET, json_response, make_jwt

pytestmark = pytest.mark.anyio

DT = kinds.DISTRIBUTED_TRAINING
WID = "0b6f2a4e-5d1c-4c47-9b67-3f1e2d7a9c11"


class TokenServer:
    """A handler issuing JWTs valid for `ttl` seconds of the fake wall clock, and
    accepting only the newest one (or any unexpired one with `accept_all`)."""

    def __init__(self, fake_time, ttl=3600, expires_in=None, jwt=True):
        self.t, self.ttl, self.expires_in, self.jwt = fake_time, ttl, expires_in, jwt
        self.issued: list[str] = []
        self.token_bodies: list[dict] = []
        self.api_calls = 0
        self.reject_next = 0

    async def __call__(self, request: httpx.Request):
        await asyncio.sleep(0)  # let concurrent callers interleave
        if request.url.path == "/api/v1/token":
            body = json.loads(request.content)
            self.token_bodies.append(body)
            if body.get("clientSecret") != CLIENT_SECRET:
                return json_response(401, {"code": 401, "message": "invalid client credentials"})
            n = len(self.issued)
            token = make_jwt(self.t.wall() + self.ttl, n=n) if self.jwt else f"opaque-{n}"
            self.issued.append(token)
            answer = {"accessToken": token}
            if self.expires_in is not None:
                answer["expiresIn"] = self.expires_in
            return json_response(200, answer)
        self.api_calls += 1
        auth = request.headers.get("Authorization", "")
        if self.reject_next:
            self.reject_next -= 1
            return json_response(401, {"code": 401, "message": "token expired"})
        if not self.issued or auth != f"Bearer {self.issued[-1]}":
            return json_response(401, {"code": 401, "message": "token expired"})
        return json_response(200, {"workloadId": WID})


def creds(**kw):
    return {"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, **kw}


async def test_client_credentials_are_exchanged_for_a_token_once(make_client, fake_time):
    server = TokenServer(fake_time)
    async with make_client(server, **creds()) as client:
        for _ in range(3):
            await client.get(DT, WID)
        assert client.request_count == 4
    assert server.token_bodies == [{"grantType": "client_credentials", "clientID": CLIENT_ID,
                                    "clientSecret": CLIENT_SECRET}]


async def test_the_token_is_renewed_ahead_of_its_jwt_expiry(make_client, fake_time):
    server = TokenServer(fake_time, ttl=3600, expires_in=999999)  # exp wins over expiresIn
    async with make_client(server, **creds()) as client:
        await client.get(DT, WID)
        fake_time.advance(3600 - 61)
        await client.get(DT, WID)
        assert len(server.issued) == 1
        fake_time.advance(2)  # now within 60 s of expiry
        await client.get(DT, WID)
        assert len(server.issued) == 2
    assert server.api_calls == 3  # renewed before use, no 401 round trip


async def test_a_short_token_is_renewed_at_ten_percent_of_its_lifetime(make_client, fake_time):
    server = TokenServer(fake_time, ttl=100)
    async with make_client(server, **creds()) as client:
        await client.get(DT, WID)
        fake_time.advance(89)
        await client.get(DT, WID)
        assert len(server.issued) == 1
        fake_time.advance(2)
        await client.get(DT, WID)
        assert len(server.issued) == 2


async def test_expires_in_is_used_when_the_token_is_no_jwt(make_client, fake_time):
    server = TokenServer(fake_time, jwt=False, expires_in=600)
    async with make_client(server, **creds()) as client:
        await client.get(DT, WID)
        fake_time.advance(530)
        await client.get(DT, WID)
        assert len(server.issued) == 1
        fake_time.advance(20)
        await client.get(DT, WID)
        assert len(server.issued) == 2


async def test_many_concurrent_requests_with_an_expired_token_cause_one_token_request(make_client, fake_time):
    server = TokenServer(fake_time, ttl=3600)
    async with make_client(server, **creds()) as client:
        await client.get(DT, WID)
        fake_time.advance(7200)
        await asyncio.gather(*(client.get(DT, WID) for _ in range(50)))
    assert len(server.token_bodies) == 2
    assert server.api_calls == 51


async def test_a_401_renews_the_token_once_and_retries(make_client, fake_time):
    server = TokenServer(fake_time)
    async with make_client(server, **creds()) as client:
        await client.get(DT, WID)
        server.reject_next = 1  # e.g. the token was revoked
        assert await client.get(DT, WID) == {"workloadId": WID}
    assert len(server.issued) == 2 and server.api_calls == 3


async def test_a_second_401_after_renewal_is_unauthorized(make_client, fake_time):
    server = TokenServer(fake_time)
    async with make_client(server, **creds()) as client:
        await client.get(DT, WID)
        server.reject_next = 2
        with pytest.raises(errors.Unauthorized, match="token expired"):
            await client.get(DT, WID)
    assert len(server.issued) == 2


async def test_concurrent_401s_share_one_renewal(make_client, fake_time):
    server = TokenServer(fake_time)
    async with make_client(server, **creds()) as client:
        await client.get(DT, WID)
        server.issued.append("revoked-everything")  # the server no longer accepts ours
        await asyncio.gather(*(client.get(DT, WID) for _ in range(20)))
    assert len(server.token_bodies) == 2


async def test_wrong_credentials_are_unauthorized_without_the_secret(make_client, fake_time, caplog):
    server = TokenServer(fake_time)
    with caplog.at_level(logging.DEBUG, logger="reconciler.api"):
        async with make_client(server, client_id=CLIENT_ID, client_secret="wrong-secret-123") as client:
            with pytest.raises(errors.Unauthorized) as ei:
                await client.get(DT, WID)
    text = str(ei.value)
    assert "invalid client credentials" in text and "RUNAI_CLIENT_SECRET" in text
    assert "POST /api/v1/token" in text
    assert "wrong-secret-123" not in text and "wrong-secret-123" not in caplog.text
    assert server.api_calls == 0


async def test_a_token_answer_without_an_access_token_is_a_clear_error(make_client):
    def handler(request):
        return json_response(200, {"expiresIn": 10})
    async with make_client(handler, **creds()) as client:
        with pytest.raises(errors.PermanentError, match="without an accessToken"):
            await client.get(DT, WID)


async def test_the_token_request_is_retried_when_the_server_is_busy(make_client, fake_time):
    server = TokenServer(fake_time)
    busy = [json_response(503, {"code": 503, "message": "busy"})]

    async def handler(request):
        if request.url.path == "/api/v1/token" and busy:
            return busy.pop()
        return await server(request)
    async with make_client(handler, **creds()) as client:
        assert await client.get(DT, WID) == {"workloadId": WID}
        assert client.request_count == 3


def test_jwt_expiry_reads_exp_and_tolerates_garbage():
    assert jwt_expiry(make_jwt(12345)) == 12345.0
    assert jwt_expiry("not-a-jwt") is None
    assert jwt_expiry("a.!!!.c") is None
    assert jwt_expiry("a.eyJmb28iOjF9.c") is None  # {"foo":1}: no exp
