"""Errors of the Run:ai API client, one hierarchy for every endpoint.

    ReconcileError (reconciler.errors)   the CLI prints these as is and exits 1
    ├── ConfigError                      no URL, no credentials, a malformed URL
    └── ApiError                         .status .message .method .path .details
        ├── BadRequest          400      .issues: [{"field": ..., "details": ...}]
        ├── Unauthorized        401/403  (after one token renewal on a 401)
        ├── NotFound            404
        ├── Conflict            409      e.g. the name is taken in the project
        ├── PermanentError               any other answer that retrying cannot fix
        └── RetryableError               gave up within the retry budget; .ambiguous .final
            ├── ServerError     429/500/502/503/504
            ├── TransportError  connection refused, dropped, timed out
            └── NotSent         the command's budget (--timeout) was spent before it was sent

`final` is True when the command's retry budget (`--timeout`) is spent: nothing more will
be sent by this client, so the caller should not try again in this command.
`ambiguous` is True when a write may have been performed although no success was
seen (a 500/502/504, a timeout or a dropped connection after the request was sent).
The executor must look the workload up before it tries again.

Raised by `reconciler.api.client.RunaiClient`; caught by the executor (retry later or
give up, per workload) and by the CLI (one clear message). Messages quote the API's
own message and name the method and path; they never hold a token or a secret.
"""

from __future__ import annotations

from reconciler.errors import ReconcileError


class ConfigError(ReconcileError):
    """The client cannot be built: the URL or the credentials are missing or malformed."""


class ApiError(ReconcileError):
    """The API answered with an error, or could not be reached."""

    def __init__(self, message: str, *, status: int | None = None, method: str = "",
                 path: str = "", details: str | None = None, api_message: str | None = None):
        super().__init__(message)
        self.status = status
        self.method = method
        self.path = path
        self.details = details
        # The API's own `message` field (or the whole text when it sent no JSON).
        self.message = api_message if api_message is not None else message


class BadRequest(ApiError):
    """400: the API rejected the body; `issues` lists its field-level complaints."""

    def __init__(self, message: str, *, issues: list[dict] | None = None, **kw):
        super().__init__(message, **kw)
        self.issues = list(issues or [])


class Unauthorized(ApiError):
    """401 or 403: the token is missing, expired, wrong, or lacks the permission."""


class NotFound(ApiError):
    """404: no such workload (or endpoint)."""


class Conflict(ApiError):
    """409: the request conflicts with the live state, e.g. a duplicate name."""


class PermanentError(ApiError):
    """An answer that retrying cannot change (an unexpected status or body)."""


class RetryableError(ApiError):
    """The API stayed unavailable until the retry budget ran out; try again later."""

    def __init__(self, message: str, *, ambiguous: bool = False, attempts: int = 1,
                 final: bool = False, **kw):
        super().__init__(message, **kw)
        self.ambiguous = ambiguous
        self.attempts = attempts
        self.final = final


class ServerError(RetryableError):
    """429 or a 5xx that a retry may cure."""


class TransportError(RetryableError):
    """No HTTP answer: connection refused or dropped, or a timeout."""


class NotSent(RetryableError):
    """Not sent at all: the command had already given up on the API (its budget ran out).
    `gave_up_on` is the failure that spent the budget: what a command ending on this
    error says (once, not nested in this one's message)."""

    gave_up_on: ApiError | None = None


__all__ = [
    "ApiError", "BadRequest", "ConfigError", "Conflict", "NotFound", "NotSent", "PermanentError",
    "RetryableError", "ServerError", "TransportError", "Unauthorized",
]
