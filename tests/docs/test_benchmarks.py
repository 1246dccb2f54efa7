"""The README's benchmark table is one run's: every figure in it is that run's output.

``bench/RESULTS_README.md`` is the output of the run (``python -m bench``); the README's
table copies its good requests per second, p50, p99 and ratios. The users' page stays
short (the run history lives in ``bench/``).
"""

from __future__ import annotations

import re

from tests.support.services import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
RUN = (ROOT / "bench" / "RESULTS_README.md").read_text(encoding="utf-8")

#: README row label -> the run's variant names (first request, replay)
ROWS = {
    "bare write / no-op (the references)": ("bare", "noop"),
    "`DatabaseStore`, atomic (default)": ("db-atomic", "db-atomic"),
    "`DatabaseStore`, lease": ("db-lease", "db-lease"),
    "`RedisStore`": ("redis", "redis"),
    "database + Redis response cache": ("db-redis-cache", "db-redis-cache"),
    "django-idempotency-key 1.3.0 (peer, Redis)": ("django-idempotency-key",) * 2,
    "drf-idempotency 1.0.0 (peer, database)": ("drf-idempotency-db",) * 2,
    "drf-idempotency 1.0.0 (peer, Redis)": ("drf-idempotency-redis",) * 2,
}


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def measured() -> dict[tuple[str, str], tuple[str, str, str, str]]:
    """(variant, path) -> (good req/s, p50, p99, ratio) of the run's steady table."""
    found = {}
    for line in RUN.split("## Steady paths", 1)[1].split("\n## ", 1)[0].splitlines():
        row = cells(line)
        if len(row) == 9 and row[1] in ("first", "replay"):
            ratio = row[6].split(" ", 1)[0]
            found[(row[0], row[1])] = (row[3], row[4], row[5], ratio)
    return found


def readme_rows() -> dict[str, list[str]]:
    section = README.split("## Benchmarks in brief", 1)[1].split("\n## ", 1)[0]
    return {
        row[0]: row
        for line in section.splitlines()
        if line.startswith("| ") and not line.startswith("| variant")
        for row in [cells(line)]
    }


def rounded(milliseconds: str) -> str:
    return str(round(float(milliseconds)))


def test_every_figure_of_the_readme_table_is_the_runs() -> None:
    run = measured()
    rows = readme_rows()
    assert set(rows) == set(ROWS)
    for label, (first, replay) in ROWS.items():
        row = rows[label]
        for path, variant, (rps, latency, ratio) in (
            ("first", first, row[1:4]),
            ("replay", replay, row[4:7]),
        ):
            good, p50, p99, expected_ratio = run[(variant, path)]
            assert (rps, latency, ratio) == (
                good,
                f"{rounded(p50)} / {rounded(p99)}",
                expected_ratio,
            ), (label, path)


def test_the_readme_names_the_machine_and_the_users_page_stays_short() -> None:
    section = README.split("## Benchmarks in brief", 1)[1].split("\n## ", 1)[0]
    assert "2-CPU AMD EPYC" in section and "2-CPU AMD EPYC" in RUN.split("Command:")[0]
    assert re.search(r"Machine: 2 CPUs, AMD EPYC", RUN)
    assert "this release" not in README
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert len(page.splitlines()) <= 150
