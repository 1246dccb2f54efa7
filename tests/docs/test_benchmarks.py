"""The README's benchmark table is one run's: every ratio in it is that run's output.

``bench/RESULTS_README.md`` is the output of the run (``python -m bench``); the README's
table copies its ratios and links to it. The README holds no dated run and the users'
page stays short (the run history lives in ``bench/``).
"""

from __future__ import annotations

import re

from tests.support.services import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
RUN = (ROOT / "bench" / "RESULTS_README.md").read_text(encoding="utf-8")

#: README row label -> the run's variant names (first request, replay)
ROWS = {
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


def measured() -> dict[tuple[str, str], str]:
    """(variant, path) -> the ratio of the run's steady table."""
    found = {}
    for line in RUN.split("## Steady paths", 1)[1].split("\n## ", 1)[0].splitlines():
        row = cells(line)
        if len(row) == 9 and row[1] in ("first", "replay"):
            found[(row[0], row[1])] = row[6].split(" ", 1)[0]
    return found


def readme_rows() -> dict[str, list[str]]:
    section = README.split("## Benchmarks in brief", 1)[1].split("\n## ", 1)[0]
    return {
        row[0]: row
        for line in section.splitlines()
        if line.startswith("| ") and not line.startswith("| variant")
        for row in [cells(line)]
    }


def test_every_ratio_of_the_readme_table_is_the_runs() -> None:
    run = measured()
    rows = readme_rows()
    assert set(rows) == set(ROWS)
    for label, (first, replay) in ROWS.items():
        assert rows[label][1:3] == [run[(first, "first")], run[(replay, "replay")]], label


def test_the_readme_holds_no_dated_run_and_the_users_page_stays_short() -> None:
    section = README.split("## Benchmarks in brief", 1)[1].split("\n## ", 1)[0]
    assert "bench/RESULTS_README.md" in section
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", README)
    assert re.search(r"Machine: 2 CPUs, AMD EPYC", RUN)
    assert "this release" not in README
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert len(page.splitlines()) <= 150
