"""Run the CLI with speed devices turned off, to time it A B A B against the CLI as shipped.

    RUNAI_RECONCILE_DEVICES_OFF=children,indexer,gc python benchmarks/device_off.py plan specs/

- children: specs loaded in this process, not in forked loader children (it also keeps the
  spec cache's indexer child from starting: both start from `MIN_FILES` files);
- indexer: the spec cache's work (hashing, reading the cache, loading what it lacks) done
  in this process, not in the indexer child;
- gc: the cycle collector left as Python sets it (no pause while loading and planning, no
  freeze): the CLI's `main` without `entry`'s hooks.

Anything else in the variable is refused. Every device off must still make the same plan:
tests/perf/test_device_off.py checks it. docs/performance.md ("Under load") has figures.
"""

from __future__ import annotations

import os
import sys

NAMES = {"children", "indexer", "gc"}


def _off(*_args, **_kwargs):
    raise OSError("the indexer child is turned off")


def main() -> None:
    off = set(filter(None, os.environ.get("RUNAI_RECONCILE_DEVICES_OFF", "").split(",")))
    if off - NAMES:
        sys.exit(f"RUNAI_RECONCILE_DEVICES_OFF: unknown {sorted(off - NAMES)}; "
                 f"known: {sorted(NAMES)}")
    from reconciler.desired import background

    if "children" in off:
        background.MIN_FILES = 10 ** 9
    if "indexer" in off:
        background._start_indexing = _off  # the caller falls back to the work in process
    from reconciler import cli

    if "gc" in off:
        cli.main()
    else:
        cli.entry()


if __name__ == "__main__":
    main()
