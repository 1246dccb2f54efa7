"""The Redis durability figures of the docs are the measured run's.

``chaos/results/aof-window.md`` is the output of ``python -m chaos.aof_window``; the
reliability page and the stores how-to copy its totals and ranges. The recommendation
they give (AOF with ``appendfsync everysec`` or ``always``) is what system check W007
holds a Redis to (``tests/test_checks.py``).
"""

from __future__ import annotations

from tests.support.services import ROOT

RUN = (ROOT / "chaos" / "results" / "aof-window.md").read_text(encoding="utf-8")
RELIABILITY = (ROOT / "docs" / "explanation" / "reliability.md").read_text(encoding="utf-8")
STORES = (ROOT / "docs" / "howto" / "stores.md").read_text(encoding="utf-8")


def runs(mode: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in RUN.splitlines()
        if line.startswith(f"| {mode} |")
    ]


def number(value: int) -> str:
    return f"{value:,}"


def test_the_durability_figures_are_the_runs() -> None:
    everysec, always = runs("everysec"), runs("always")
    assert len(everysec) == len(always) == 5  # "five runs of each"
    pages = " ".join((RELIABILITY + STORES).split())  # a figure may straddle a line break
    for mode in (everysec, always):
        claims = sum(int(row[2].split("/")[0]) for row in mode)
        completions = sum(int(row[2].split("/")[1]) for row in mode)
        assert all(row[3] == "0 / 0" for row in mode)  # nothing lost to a SIGKILL
        assert f"0 of {number(claims)} " in pages and f" {number(completions)} " in pages
    at_risk = [int(row[4]) for row in everysec]
    oldest = max(int(row[5]) for row in everysec)
    longest = max(int(row[6].split("/")[1]) for row in everysec)
    medians = [int(row[6].split("/")[0]) for row in everysec]
    assert f"{number(min(at_risk))} to {number(max(at_risk))}" in pages
    assert f"up to {number(oldest)} ms earlier" in pages
    assert f"up to {number(longest)} ms" in pages
    assert f"median {min(medians)}–{max(medians)} ms" in pages
    assert all(row[4] == "0" for row in always)  # always: nothing outside an fsync
