"""Desired state: the spec files under a directory, validated, as `DesiredWorkload`s.

    from reconciler.desired import load_specs
    workloads = load_specs("specs")   # raises reconciler.errors.SpecError with every problem
    pending = start_loading("specs")  # the same, in forked children when that pays
    workloads = pending.result()      # or `await pending.wait()`

Modules: `sources` (files → raw documents with line numbers), `parsing` (YAML and JSON
text → raw documents, imported once a file is read), `defaults` (folder defaults merged
into the specs below them), `fields` and `models` (the pydantic models of each kind's
create body), `loader` (validation and error messages), `types` (DesiredWorkload,
Lifecycle; shared with the planner), `background` (start_loading: load_specs in child
processes while the caller works).
Callers: the CLI and the planner's tests.
"""

from reconciler.desired.types import DesiredWorkload, Lifecycle

__all__ = ["DesiredWorkload", "Lifecycle", "PendingSpecs", "load_specs", "start_loading"]


def __getattr__(name: str):
    # The pydantic models take long to build: import them only when specs are loaded,
    # so that `sim serve`, `state list` and the planner's importers start fast.
    if name == "load_specs":
        from reconciler.desired.loader import load_specs

        return load_specs
    if name in ("start_loading", "PendingSpecs"):
        from reconciler.desired import background

        return getattr(background, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
