"""What every renderer says the same way about GPUs: amounts, changes, quotas (pure).

Reads a `plans.GpuImpact` (a finished plan's `gpu_impact`) or `plans.Gpus` pairs (a
drift report's). An amount is its GPUs (`2..8` for an autoscaled Inference's fewest and
most pods) and, apart, the GPU memory of memory-type requests; `unknown` where a value
could not be read (`8 + unknown`). A plan shows the block
only when apply moves some workload's GPUs, changes a project's quota, or a project it
acts in is over its quota. Quotas: a project's before -> after where the plan changes it
(`quota 24 -> 12`), per node pool (`node pool a100: deserved 8 -> 4, limit none`), and
the plan's quota warnings (`QuotaWarning`).
Callers: `render.text`, `render.markdown`, `render.json`, `render.drift`.
"""

from __future__ import annotations

from typing import Any

from reconciler.plans import (NO_GPUS, Action, GpuImpact, Gpus, PoolQuota, ProjectImpact,
                              QuotaChange, QuotaWarning, WorkloadGpus, project_words, tidy)

TITLE = "GPU impact"
# What the numbers are, said once under the title.
MEANING = "GPUs held while running, before -> after apply"
OVER_QUOTA = "over quota"

_UNITS = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def number(x: float) -> int | float:
    """`x` as JSON writes it: 8, not 8.0 (a saved plan's numbers come back as floats)."""
    return int(x) if float(x).is_integer() else x


def _n(x: float) -> str:
    return f"{number(x):.12g}" if isinstance(number(x), float) else str(number(x))


def _span(low: float, high: float, fmt=_n) -> str:
    return fmt(low) if low == high else f"{fmt(low)}..{fmt(high)}"


def _bytes(x: float) -> str:
    for unit, size in _UNITS:
        if x >= size:
            return f"{round(x / size, 2):.12g} {unit}"
    return f"{_n(x)} B"


UNKNOWN = "unknown"


def amount(g: Gpus) -> str:
    """`8`, `2..8`, or `1 (20 GiB GPU memory)` with memory-type requests; `unknown`, or
    `8 + unknown`, when some value could not be read (never counted as 0)."""
    if g.unknown and not g.high and not g.memory_high:
        return UNKNOWN
    out = _span(g.low, g.high)
    if g.memory_high:
        out += f" ({_span(g.memory_low, g.memory_high, _bytes)} GPU memory)"
    return f"{out} + {UNKNOWN}" if g.unknown else out


def _signed(x: float) -> str:
    return f"+{_n(x)}" if x > 0 else _n(x)


def ends(low: float, high: float, fmt=_n) -> str:
    """A number that may differ at the fewest pods and the most: `16`, or `min 16, max 11`.
    Never `16..11`: a difference of two ranges is not a range (docs/plan-format.md)."""
    return fmt(low) if low == high else f"min {fmt(low)}, max {fmt(high)}"


def change(before: Gpus, after: Gpus) -> str:
    """The GPUs apply takes (`+16`) or frees (`-8`), `0` for none; at each end when they
    differ: `90..100 -> 106..111` is `min +16, max +11` (as `gpus.difference`)."""
    if before.unknown or after.unknown:
        return UNKNOWN
    low, high = tidy(after.low - before.low), tidy(after.high - before.high)
    return ends(low, high, _signed)


def moves(before: Gpus, after: Gpus, arrow: str = "->") -> str:
    """`24 -> 40 (+16)`."""
    return f"{amount(before)} {arrow} {amount(after)} ({change(before, after)})"


def quota(p: ProjectImpact, quotas_read: bool) -> str:
    """`quota 24`, `quota 24 -> 12` where the plan changes it, `quota unknown`."""
    if p.quota_changes:
        return f"quota {_gpu_quota(p.quota_before)} -> {_gpu_quota(p.quota)}"
    if p.quota is not None:
        return f"quota {_n(p.quota)}"
    return "quota unknown" if quotas_read else "quota not read"


NO_QUOTA = "none"
BELOW_HELD = "below the GPUs its workloads hold"


def _gpu_quota(x: float | None) -> str:
    return NO_QUOTA if x is None else _n(x)


def _pair(before: float | None, after: float | None, arrow: str) -> str:
    if before == after:
        return _gpu_quota(after)
    return f"{_gpu_quota(before)} {arrow} {_gpu_quota(after)}"


def deserved(q: PoolQuota, arrow: str = "->") -> str:
    """A node pool's deserved GPUs: `8`, or `16 -> 4` where the plan changes them."""
    return _pair(q.deserved_before, q.deserved_after, arrow)


def limit(q: PoolQuota, arrow: str = "->") -> str:
    """A node pool's GPU limit: `none` when not given, `24 -> 6` where it changes."""
    return _pair(q.limit_before, q.limit_after, arrow)


def pool(q: PoolQuota) -> str:
    """`node pool default: deserved 16 -> 4, limit 24 -> 6`."""
    return f"node pool {q.pool}: deserved {deserved(q)}, limit {limit(q)}"


def quota_changes(found: GpuImpact) -> list[QuotaChange]:
    """The organisation units whose GPU quota the plan changes, by address."""
    return list(found.quotas)


def warnings(found: GpuImpact) -> list[QuotaWarning]:
    return list(found.warnings)


def quota_doc(q: PoolQuota) -> dict[str, Any]:
    """The JSON of one node pool's quota (docs/plan-format.md)."""
    def n(x):
        return None if x is None else number(x)
    return {"node_pool": q.pool,
            "deserved": {"before": n(q.deserved_before), "after": n(q.deserved_after)},
            "limit": {"before": n(q.limit_before), "after": n(q.limit_after)}}


def over_by(p: ProjectImpact) -> str:
    """`over quota by 8` (at the most pods) for a project over its quota."""
    return f"{OVER_QUOTA} by {_n(tidy(p.after.high - (p.quota or 0)))}"


def project_label(p: ProjectImpact) -> str:
    return project_words(p.project_id, p.project_name)


def workloads(impact: GpuImpact) -> list[WorkloadGpus]:
    """The workloads whose GPUs apply changes, by address."""
    return [w for w in impact.workloads if w.moves]


def projects(impact: GpuImpact) -> list[ProjectImpact]:
    """The projects to show: their GPUs or their quota change, or they are over quota and
    the plan acts on one of their workloads or on the project (a project the plan leaves
    alone is not its news)."""
    acted = {w.project_id for w in impact.workloads if w.action is not Action.NOOP}
    return [p for p in impact.projects if p.moves or p.quota_changes or (
        p.over_quota and (p.project_id in acted or p.planned_by))]


def total(listed: list[ProjectImpact]) -> tuple[Gpus, Gpus]:
    before, after = NO_GPUS, NO_GPUS
    for p in listed:
        before += p.before
        after += p.after
    return before, after


def gpus_doc(g: Gpus) -> dict[str, Any]:
    """The JSON of an amount (docs/plan-format.md): GPUs and GPU memory in bytes, at the
    fewest and the most pods."""
    out = {"min": number(g.low), "max": number(g.high),
           "memory_bytes_min": number(g.memory_low), "memory_bytes_max": number(g.memory_high)}
    if g.unknown:  # some value could not be read: the numbers leave it out
        out["unknown"] = True
    return out
