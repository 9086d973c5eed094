"""The Run:ai API client: `RunaiClient` and its `errors`.

Callers: the executor and the planner's refresh (through `RunaiClient`), the CLI
(`RunaiClient.from_env`, and `errors` to report failures).
"""

from reconciler.api import errors
from reconciler.api.client import RunaiClient

__all__ = ["RunaiClient", "errors"]
