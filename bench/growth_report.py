"""The report's table of :mod:`bench.growth`: claim latency at two table sizes and right
after a purge, and the purge's rate."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.growth import Growth


def growth_table(g: Growth) -> list[str]:
    lines = [
        "## Growth (in-process, DatabaseStore on PostgreSQL)\n",
        "| existing records | atomic first request: lookup + insert + commit, median ms "
        "(p99) | lease claim: INSERT … ON CONFLICT, median ms (p99) |",
        "| ---: | ---: | ---: |",
    ]
    for label, c in (
        (f"{g.small.records:,}", g.small),
        (f"{g.large.records:,}", g.large),
        ("0, right after purging the rest (dead rows not yet vacuumed)", g.after_purge),
    ):
        lines.append(
            f"| {label} | {c.atomic_ms:.3f} ({c.atomic_p99_ms:.3f}) | "
            f"{c.lease_ms:.3f} ({c.lease_p99_ms:.3f}) |"
        )
    pr = g.purge
    lines += [
        f"| ratio {g.large.records:,} / {g.small.records:,} | "
        f"{g.large.atomic_ms / g.small.atomic_ms:.2f} | "
        f"{g.large.lease_ms / g.small.lease_ms:.2f} |",
        "",
        f"Purge (`purge_expired_records`, default batch size): {pr.deleted:,} expired "
        f"records in {pr.seconds:.2f} s = **{pr.rows_per_second:,.0f} rows/s**, "
        f"{pr.batches} batches, longest batch {pr.longest_batch_seconds * 1000:.0f} ms. "
        f"Seeding took {g.seed_seconds:.1f} s.\n",
    ]
    return lines
