"""The moments of an operation at which the program tunes the interpreter's cycle
collector, and the hooks it sets for them; by default nothing is done at any of them.

An operation's specs, state and live bodies are millions of containers, none of them
garbage, which the collector's passes walk to find nothing (docs/performance.md). What to
do about it is a process-wide choice, so the program's entry point (`cli.entry`) makes it
by setting `hooks`; the library itself (the spec loader and its children included), its
tests and any other caller in process leave the collector as they found it. A loader
child is forked after `loading`, so it inherits what the hook decided.

- `loading`: an operation starts loading its specs (`planning.loading`), or a watch cycle
  starts reading its specs, its state and the control plane (`watching`);
- `planned`: its plan is made, or it ends (`planning.resume_collector`): what it does next
  (the actions, rendering) makes garbage;
- `cycle_planned`: a watch cycle's plan is made, or the cycle failed before (what the
  cycle does next makes garbage, and what lives on is known only once the cycle went well);
- `settled`: a watch cycle that parsed the specs went well: what exists now lives as long
  as the watch.

Callers: `planning`, `applying` (through `planning.resume_collector`), `watching`; the CLI
sets the hooks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


def _nothing() -> None:
    pass


@dataclass
class Hooks:
    loading: Callable[[], None] = _nothing
    planned: Callable[[], None] = _nothing
    cycle_planned: Callable[[], None] = _nothing
    settled: Callable[[], None] = _nothing


hooks = Hooks()
