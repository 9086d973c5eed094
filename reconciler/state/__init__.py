"""The reconciler's record of what it applied: model, stores, lock.

    from reconciler.state import LocalFileStore, MemoryStore, State, StateStore, open_store

Callers: the CLI (opens a store with `open_store`), the planner (reads `State`), the
executor (writes).
"""

from reconciler.state.backends import open_store
from reconciler.state.locking import LockInfo
from reconciler.state.model import STATE_VERSION, ResourceState, State
from reconciler.state.store import LocalFileStore, MemoryStore, StateStore

__all__ = ["STATE_VERSION", "LocalFileStore", "LockInfo", "MemoryStore", "ResourceState",
           "State", "StateStore", "open_store"]
