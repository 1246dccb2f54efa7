"""How the report's table cells spell numbers, ranges and status counts."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.summaries import Summary


def statuses(counts: dict[int, int]) -> str:
    """``201×40, 409×2``."""
    return ", ".join(f"{s}×{n}" for s, n in sorted(counts.items()))


def num(value: float | None, digits: int = 2) -> str:
    """``value`` with ``digits`` decimals, or ``–`` when there is none."""
    return "–" if value is None else f"{value:.{digits}f}"


def int_range(values: list[int]) -> str:
    """``1`` when every value is 1, ``1–3`` otherwise, ``–`` for none."""
    if not values:
        return "–"
    low, high = min(values), max(values)
    return f"{low}" if low == high else f"{low}–{high}"


def with_spread(summary: Summary) -> str:
    """``0.71 (rounds 0.64–0.76)``: the median ratio and its per-round range."""
    if summary.ratio is None:
        return "–"
    if summary.spread is None or summary.rounds < 2:
        return f"{summary.ratio:.2f}"
    low, high = summary.spread
    return f"{summary.ratio:.2f} (rounds {low:.2f}–{high:.2f})"
