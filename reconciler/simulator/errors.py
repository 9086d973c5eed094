"""The simulator's error answers, and reading a request's JSON body.

Callers: every route module raises `ApiError`; `app` registers `api_error` and
`http_error` with Starlette, so an `ApiError` from any handler, and Starlette's own 404
and 405, are answered in the API's `Error` shape ({"code", "message"}, plus
`complianceIssues` for the kinds whose 400 is a `SubmissionErrorV2`).
"""

from __future__ import annotations

import json
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from reconciler.simulator.validator import Issue


class ApiError(Exception):
    def __init__(self, status: int, message: str, issues: list[Issue] | None = None,
                 headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.issues, self.headers = status, message, issues, headers

    def response(self) -> JSONResponse:
        body: dict = {"code": self.status, "message": self.message}
        if self.issues is not None:
            body["complianceIssues"] = [i.as_json() for i in self.issues]
        return JSONResponse(body, status_code=self.status, headers=self.headers)


def issues_message(issues: list[Issue], what: str = "workload request") -> str:
    head = "; ".join(f"{i.field}: {i.details}" for i in issues[:5])
    more = f" (and {len(issues) - 5} more)" if len(issues) > 5 else ""
    return f"The {what} is invalid: {head}{more}"


async def read_json(request: Request, *, submission: bool = False) -> Any:
    """The body as JSON (None when empty); 400 when it is not JSON, listing the issue
    when `submission` (a create body of a kind whose errors list them)."""
    raw = await request.body()
    try:  # NaN and Infinity are not JSON (RFC 8259), nor is a number beyond a double
        return json.loads(raw, parse_constant=_not_json, parse_float=_finite) if raw else None
    except ValueError:
        issues = [Issue("body", "is not valid JSON")] if submission else None
        raise ApiError(400, "The request body is not valid JSON", issues) from None


def _not_json(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"{text} is not a finite number")
    return value


async def api_error(request: Request, exc: ApiError) -> Response:
    return exc.response()


async def http_error(request: Request, exc: HTTPException) -> Response:
    """Starlette's own refusals (no route, a method the route does not take)."""
    message = {404: "Resource not found.", 405: "Method not allowed."}.get(
        exc.status_code, str(exc.detail))
    return JSONResponse({"code": exc.status_code, "message": message},
                        status_code=exc.status_code, headers=exc.headers)
