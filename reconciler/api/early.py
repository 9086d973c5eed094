"""The token asked for as a command starts: `POST /api/v1/token` sent by a thread with the
standard library's `http.client` while the command imports its HTTP stack (aiohttp, httpx),
reads its state and loads its specs, so that its first API request does not wait one
more round trip for a token (TLS's handshake included, over https).

Its answer, whatever it is (a token, a refusal, a 503), is the client's first attempt at
the token (`RunaiClient._request`): read, counted, logged, retried or reported as the
client's own answer would be. Without one (no route, a timeout, a certificate it does not
trust: nothing is reported from the thread) the client asks itself, as it always did. It
is asked for only where it would be asked the same way: client credentials,
no proxy in the environment (httpx's own transport honours one; this does not), and over
https the certificates httpx trusts by default (certifi's; not when SSL_CERT_FILE or
SSL_CERT_DIR names others, nor with --insecure).

Callers: `reconciler.cli` (`start`, for the commands that read the API at once) and
`reconciler.api.client` (`EarlyToken.answer`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
from collections.abc import Mapping
from urllib.parse import urlsplit

from reconciler import __version__, timeline

TOKEN_PATH = "/api/v1/token"
USER_AGENT = f"runai-reconcile/{__version__}"  # the client's too
Answer = tuple[int, list[tuple[str, str]], bytes]  # status, headers, body
# How long a client that needs the token waits for this one before asking itself, and
# the thread's own bound on its request (it is then given up).
WAIT_S = TIMEOUT_S = 5.0


class EarlyToken:
    """One token request in flight on a thread; `answer()` is its HTTP answer, once."""

    def __init__(self, base_url: str, client_id: str, client_secret: str):
        self.client_id = client_id
        self._future: concurrent.futures.Future[Answer | None] = concurrent.futures.Future()
        self._taken = False
        body = json.dumps({"grantType": "client_credentials", "clientID": client_id,
                           "clientSecret": client_secret}, separators=(",", ":")).encode()
        threading.Thread(target=self._ask, args=(base_url, body),
                         name="early-token", daemon=True).start()

    def _ask(self, base_url: str, body: bytes) -> None:
        answer = None
        try:
            answer = _post(base_url, body)
        except BaseException:  # noqa: BLE001 - never reported: the client asks itself
            answer = None
        finally:
            self._future.set_result(answer)

    async def answer(self) -> Answer | None:
        """(status, headers, body) the token endpoint answered, the first time it is asked
        for and when it came within `WAIT_S`; None otherwise (the client asks itself)."""
        if self._taken:
            return None
        self._taken = True
        if not self._future.done():  # waited for in a thread: nothing to cancel
            try:
                await asyncio.to_thread(self._future.result, WAIT_S)
            except concurrent.futures.TimeoutError:
                return None
        return self._future.result()


def start(base_url: str | None, env: Mapping[str, str], *, verify: bool) -> EarlyToken | None:
    """The token request sent now for the client `RunaiClient.from_env(base_url)` will
    make, when it will use client credentials and this request would go the same way;
    None (nothing sent) otherwise."""
    url = base_url or env.get("RUNAI_URL")
    client_id, secret = env.get("RUNAI_CLIENT_ID"), env.get("RUNAI_CLIENT_SECRET")
    if not url or not client_id or not secret or env.get("RUNAI_TOKEN") or not verify \
            or proxy_configured(env):
        return None
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a malformed port raises here: the client says so
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc \
            or parts.query or parts.fragment:
        return None
    if parts.scheme == "https" and (env.get("SSL_CERT_FILE") or env.get("SSL_CERT_DIR")):
        return None
    return EarlyToken(url, client_id, secret)


def proxy_configured(env: Mapping[str, str]) -> bool:
    """A proxy is set in `env`: then the client uses httpx's own transport, which honours
    it (and nothing is sent early, which would not)."""
    return any(k.lower() in ("http_proxy", "https_proxy", "all_proxy") and v
               for k, v in env.items())


def _post(base_url: str, body: bytes) -> Answer:
    import http.client

    parts = urlsplit(base_url)
    if parts.scheme == "https":
        import ssl

        import certifi

        context = ssl.create_default_context(cafile=certifi.where())
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            parts.hostname, parts.port, timeout=TIMEOUT_S, context=context)
    else:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=TIMEOUT_S)
    try:
        timeline.request_sent()
        conn.request("POST", parts.path.rstrip("/") + TOKEN_PATH, body=body,
                     headers={"Content-Type": "application/json",
                              "Accept": "application/json", "Accept-Encoding": "identity",
                              "User-Agent": USER_AGENT})
        resp = conn.getresponse()
        return resp.status, resp.getheaders(), resp.read()
    finally:
        conn.close()
