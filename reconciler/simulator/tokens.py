"""Access tokens of the simulated control plane: HS256 JWTs carrying `sub`, `iat`, `exp`.

Callers: `reconciler.simulator.app` (POST /api/v1/token issues them, every other API
route verifies them). The signing key derives from the client secret, so tokens stay
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
