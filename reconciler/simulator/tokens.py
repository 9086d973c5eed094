"""Access tokens of the simulated control plane: HS256 JWTs carrying `sub`, `iat`, `exp`,
issued by POST /api/v1/token (client_credentials, or app_token) and checked on every
other API route.

Callers: `app` adds `routes(sim)` and checks a request's bearer token with `claims`
(`Simulator.auth`, which every API handler calls first). The signing key derives from the client secret, so tokens stay
valid across restarts of `sim serve` with the same credentials, as they would against
a real control plane that keeps running. A token whose signature has been checked once
is remembered (a client sends the same token with every request): later requests check
only its expiry.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from reconciler.simulator.errors import ApiError, read_json

if TYPE_CHECKING:
    from reconciler.simulator.app import Simulator


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TokenError(Exception):
    """The token is malformed, forged or expired; the message says which (never the token)."""


_REMEMBERED = 256  # verified tokens kept; more distinct tokens than this start over


class Signer:
    def __init__(self, secret: str):
        self._key = hashlib.sha256(("runai-sim:" + secret).encode()).digest()
        self._verified: dict[str, tuple[dict, float]] = {}  # token -> (claims, exp)

    def _sign(self, signing_input: str) -> str:
        return _b64(hmac.new(self._key, signing_input.encode("ascii"), hashlib.sha256).digest())

    def issue(self, subject: str, now: float, ttl: int) -> str:
        header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        payload = _b64(json.dumps({"sub": subject, "iat": int(now), "exp": int(now) + ttl,
                                   "iss": "runai-sim"}).encode())
        signing_input = f"{header}.{payload}"
        return f"{signing_input}.{self._sign(signing_input)}"

    def verify(self, token: str, now: float) -> dict:
        """The claims of a valid, unexpired token; TokenError otherwise."""
        known = self._verified.get(token)
        if known is not None:
            if now >= known[1]:
                raise TokenError("token expired")
            return known[0]
        parts = token.split(".")
        if len(parts) != 3:
            raise TokenError("malformed bearer token")
        if not hmac.compare_digest(self._sign(f"{parts[0]}.{parts[1]}"), parts[2]):
            raise TokenError("issuer is not familiar (bad token signature)")
        try:
            claims = json.loads(_unb64(parts[1]))
            exp = float(claims["exp"])
        except (ValueError, KeyError, TypeError) as exc:
            raise TokenError("malformed bearer token") from exc
        if now >= exp:
            raise TokenError("token expired")
        if len(self._verified) >= _REMEMBERED:
            self._verified.clear()
        self._verified[token] = (claims, exp)
        return claims


def claims(signer: Signer, request: Request, now: float) -> dict:
    """The claims of the request's bearer token; 401 without a valid one."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(401, "a bearer token is required")
    try:
        return signer.verify(token.strip(), now)
    except TokenError as exc:
        raise ApiError(401, str(exc)) from None


def routes(sim: Simulator) -> list[Route]:
    async def token_(request):
        return await token(sim, request)

    return [Route("/api/v1/token", token_, methods=["POST"])]


async def token(sim: Simulator, request: Request) -> Response:
    """POST /api/v1/token: a token lasting the `tokenTtl` fault setting."""
    body = await read_json(request)
    if not isinstance(body, dict):
        raise ApiError(400, "The token request must be a JSON object")
    fields_ = {str(k).lower(): v for k, v in body.items()}
    grant = fields_.get("granttype")
    if grant == "client_credentials":
        cid, secret = fields_.get("clientid"), fields_.get("clientsecret")
    elif grant == "app_token":
        cid, secret = fields_.get("appid"), fields_.get("appsecret")
    elif grant is None:
        raise ApiError(400, "grantType is required")
    else:
        raise ApiError(400, f"grantType {grant!r} is not supported by the simulator; "
                            "use client_credentials or app_token")
    if cid != sim.client_id or secret != sim.client_secret:
        raise ApiError(401, "invalid client credentials")
    ttl = int(sim.faults.token_ttl)
    issued = sim.signer.issue(cid, sim.clock(), ttl)
    return JSONResponse({"accessToken": issued, "expiresIn": ttl, "idToken": issued})
