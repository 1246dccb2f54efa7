"""The protocol's Promela model checked by SPIN (model/protocol.pml, model/check.py).

The model verifies clean in atomic and lease mode; without lease mode's assumptions
SPIN finds the documented rerun; and each mutant (one plausible bug) yields a
counterexample to the property it breaks, not to some other one. Every search is
exhaustive (no bitstate): a check that holds reports the whole state space, complete.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from model import check as spin
from tests.support.services import ROOT, missing

#: What each property's assertions say in protocol.pml: a counterexample to a property
#: must quote one of them (only the targeted property's assertions are compiled in).
ASSERTIONS = {
    "P1": ("runs<=1", "committed<=1"),
    "P2": ("completions==0",),
    "P3": ("cur_owner==",),
    "P4": ("first_resp",),
    "P5": ("promised",),
    "P6": ("rec_fence==i", "rec_resp==i"),
    "live": ("acceptance cycle",),
}
CHECKS = {check.name: check for check in spin.CHECKS}


@pytest.fixture(scope="module")
def results(request: pytest.FixtureRequest) -> dict[str, spin.Result]:
    """Every selected check's result, searched two at a time (two CPUs)."""
    problem = spin.spin_available()
    if problem:
        missing(f"SPIN cannot run ({problem}): apt-get install spin gcc")
    names = {
        item.callspec.params["name"]
        for item in request.session.items
        if item.path == request.path and hasattr(item, "callspec")
    }
    selected = [check for name, check in CHECKS.items() if name in names]
    return {r.check.name: r for r in spin.run_checks(selected, jobs=2)}


@pytest.mark.parametrize("name", [c.name for c in spin.CHECKS if c.expect == "holds"])
def test_the_model_verifies_clean(name: str, results: dict[str, spin.Result]) -> None:
    result = results[name]
    assert result.errors == 0, result.output
    assert result.complete, result.output  # exhaustive: the search ran to its end
    assert result.states > 1000 and result.depth > 50, result.output
    assert result.outcome == "holds"


@pytest.mark.parametrize("name", [c.name for c in spin.CHECKS if c.expect == "fails"])
def test_spin_finds_the_counterexample(name: str, results: dict[str, spin.Result]) -> None:
    result = results[name]
    (target,) = result.check.properties
    assert result.errors >= 1, result.output
    assert any(text in result.violation for text in ASSERTIONS[target]), result.violation
    assert result.outcome == "fails"


def test_every_mutant_breaks_a_property_the_clean_model_keeps() -> None:
    """A mutant's counterexample means something only where the same configuration of
    the correct model verifies that property clean."""
    clean = {(c.config, p) for c in spin.CHECKS if c.expect == "holds" for p in c.properties}
    mutants = [c for c in spin.CHECKS if c.mutant]
    assert len({c.mutant for c in mutants}) >= 8
    for mutant in mutants:
        (target,) = mutant.properties
        assert (mutant.config, target) in clean, mutant.name
        assert f"MUTANT_{mutant.mutant}" in spin.MODEL.read_text(), mutant.name


def test_an_incomplete_search_is_not_reported_as_holding() -> None:
    """pan cut short by a depth bound reports no error; the runner must not call that a
    proof."""
    problem = spin.spin_available()
    if problem:
        missing(f"SPIN cannot run ({problem})")
    result = spin.verify(CHECKS["lease-safety"], depth=20)
    assert result.errors == 0
    assert not result.complete
    assert result.outcome == "inconclusive"


def test_the_docs_list_every_check() -> None:
    page = (Path(ROOT) / "docs" / "explanation" / "model.md").read_text()
    assert [name for name in CHECKS if f"`{name}`" not in page] == []
    for mutant in {c.mutant for c in spin.CHECKS if c.mutant}:
        assert f"`MUTANT_{mutant}`" in page, mutant


def test_a_counterexample_reads_as_steps_of_the_requests() -> None:
    problem = spin.spin_available()
    if problem:
        missing(f"SPIN cannot run ({problem})")
    text = spin.trail(CHECKS["mutant-no-fence-on-complete"])
    steps = text.splitlines()
    # two requests own the key in turn: the second takes the first's lapsed lease over
    owners = [line.split()[1:3] for line in steps if line.endswith("cur_owner = i")]
    assert len(owners) == 2 and owners[0] != owners[1], text
    # and the first, stale, completes: SPIN stops at the violated fence check
    assert "assertion violated" in text and steps[-1].endswith("assert((cur_owner==i))"), text
