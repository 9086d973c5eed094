"""The Run:ai API client: `RunaiClient` and its `errors`.

Callers: the executor and the planner's refresh (through `RunaiClient`), the CLI
(`RunaiClient.from_env`, and `errors` to report failures).
"""

import sys

# httpx's package imports its own command line (`httpx._main`), and with it rich, click's
# helpers and pygments when they are installed: a tenth of a second at every start of a
# command that reads the API, for a command line this program never runs. Marked absent,
# httpx defines a stub in its place (docs/performance.md).
sys.modules.setdefault("httpx._main", None)

from reconciler.api import errors  # noqa: E402
from reconciler.api.client import RunaiClient  # noqa: E402

__all__ = ["RunaiClient", "errors"]
