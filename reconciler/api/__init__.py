"""The Run:ai API client: `RunaiClient` and its `errors`; `early`, the token asked for as
a command starts.

Callers: the executor and the planner's refresh (through `RunaiClient`), the CLI
(`RunaiClient.from_env`, `early.start`, and `errors` to report failures).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.api import errors

if TYPE_CHECKING:
    from reconciler.api.client import RunaiClient

__all__ = ["RunaiClient", "errors"]


def __getattr__(name: str) -> Any:
    # The client (httpx) is loaded when it is asked for, so that `api.early` goes without it.
    if name == "RunaiClient":
        from reconciler.api.client import RunaiClient

        return RunaiClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
