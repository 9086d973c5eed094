"""Bearer tokens for the Run:ai API: a fixed token, or client credentials renewed in time.

Called by `reconciler.api.client.RunaiClient` before every request (`token()`) and after
a 401 (`renew(failed_token)`).

Client credentials are exchanged at `POST /api/v1/token`. The expiry comes from the
JWT's `exp` claim, as the real clients read it, falling back to `expiresIn`. A token is
renewed ahead of expiry (10% of its lifetime, at most 60 s) and once after a 401. One
renewal runs at a time: concurrent callers wait for it under an asyncio.Lock and reuse
its result, so a burst of requests with an expired token costs one token request.
A renewal that failed (the token endpoint refused the credentials, 401 or 403, or kept
failing through the retries) is not tried again: every later caller gets the same error,
so a refusal costs one token request, a failing endpoint one round of retries, and either
is said once.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
from typing import Awaitable, Callable

from reconciler.api.errors import ApiError, PermanentError

log = logging.getLogger("reconciler.api")

RENEW_MARGIN_MAX_S = 60.0
RENEW_MARGIN_SHARE = 0.1
# Used when the token tells nothing about its lifetime.
DEFAULT_LIFETIME_S = 300.0


def jwt_expiry(token: str) -> float | None:
    """The `exp` claim (epoch seconds) of a JWT, or None when `token` is no readable JWT.

    The signature is not checked: the server does that; the client only plans renewal.
    """
    parts = token.split(".")
    if len(parts) != 3:
        return None
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload.encode("ascii")))
    except (ValueError, binascii.Error, UnicodeError):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    if isinstance(exp, (int, float)) and not isinstance(exp, bool):
        return float(exp)
    return None


class StaticToken:
    """RUNAI_TOKEN, used as is; a 401 cannot be cured by renewal."""

    can_renew = False

    def __init__(self, token: str):
        self._token = token

    async def token(self) -> str:
        return self._token

    async def renew(self, failed: str | None = None) -> str:
        return self._token

    @property
    def secrets(self) -> tuple[str, ...]:
        return (self._token,)


class ClientCredentials:
    """A token from `POST /api/v1/token` with grantType client_credentials.

    `fetch(body)` posts the token request and returns the parsed response; `clock` is
    monotonic seconds (scheduling), `wall_clock` epoch seconds (to read `exp`).
    """

    can_renew = True

    def __init__(self, client_id: str, client_secret: str,
                 fetch: Callable[[dict], Awaitable[dict]], *,
                 clock: Callable[[], float], wall_clock: Callable[[], float]):
        self._client_id = client_id
        self._client_secret = client_secret
        self._fetch = fetch
        self._clock = clock
        self._wall_clock = wall_clock
        self._token: str | None = None
        self._renew_at = 0.0
        self._lock = asyncio.Lock()
        self._failure: ApiError | None = None  # a renewal that failed for good
        self.renewals = 0

    @property
    def secrets(self) -> tuple[str, ...]:
        return tuple(s for s in (self._client_secret, self._token) if s)

    async def token(self) -> str:
        if self._failure is not None:
            raise self._failure
        if self._token is not None and self._clock() < self._renew_at:
            return self._token
        async with self._lock:
            # Another task may have renewed while this one waited for the lock.
            if self._token is not None and self._clock() < self._renew_at:
                return self._token
            return await self._renew_locked()

    async def renew(self, failed: str | None = None) -> str:
        """Renew after `failed` was refused, unless another task already replaced it."""
        async with self._lock:
            if self._token is not None and self._token != failed:
                return self._token
            return await self._renew_locked()

    async def _renew_locked(self) -> str:
        if self._failure is not None:
            raise self._failure
        try:
            body = await self._fetch({"grantType": "client_credentials",
                                      "clientID": self._client_id,
                                      "clientSecret": self._client_secret})
        except ApiError as exc:
            # Refused, or still failing after the retries: asking again at once would only
            # repeat them (each caller waiting for this renewal would, in turn).
            self._failure = exc
            raise
        token = body.get("accessToken") if isinstance(body, dict) else None
        if not isinstance(token, str) or not token:
            raise PermanentError("POST /api/v1/token answered without an accessToken",
                                 method="POST", path="/api/v1/token")
        lifetime = self._lifetime(token, body.get("expiresIn"))
        margin = min(RENEW_MARGIN_MAX_S, RENEW_MARGIN_SHARE * lifetime)
        self._token = token
        self._renew_at = self._clock() + lifetime - margin
        self.renewals += 1
        log.debug("obtained an access token valid for %.0f s", lifetime)
        return token

    def _lifetime(self, token: str, expires_in) -> float:
        exp = jwt_expiry(token)
        if exp is not None:
            return max(0.0, exp - self._wall_clock())
        if isinstance(expires_in, (int, float)) and not isinstance(expires_in, bool):
            return max(0.0, float(expires_in))
        return DEFAULT_LIFETIME_S
