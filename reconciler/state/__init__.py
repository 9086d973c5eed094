"""The reconciler's record of what it applied, one module per concern:

- `model`: the state itself (`State`, `ResourceState`), plain data that pure logic reads;
- `store`: the state file and the in-memory store (`LocalFileStore`, `MemoryStore`) and
  the `StateStore` protocol; `postgres`: the PostgreSQL store; `backends.open_store`:
  a store from a `--state` path or URL;
- `locking`, `journal`, `election`, `folders`: the write lock, the journal of intents,
  the watch's controller lock, the state's own folder.

Importing the package loads none of them: `from reconciler.state.model import State` in
pure logic brings no store, lock, socket or `fcntl` with it. The names below are
importable from the package too, each loaded from its module on first use.

Callers: the CLI (opens a store with `backends.open_store`), the planner (reads
`State`), the executor (writes).
"""

from __future__ import annotations

import importlib

_HOMES = {
    "STATE_VERSION": "model", "ResourceState": "model", "State": "model",
    "LocalFileStore": "store", "MemoryStore": "store", "StateStore": "store",
    "LockInfo": "locking", "open_store": "backends",
}

__all__ = ["STATE_VERSION", "LocalFileStore", "LockInfo", "MemoryStore", "ResourceState",
           "State", "StateStore", "open_store"]


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
