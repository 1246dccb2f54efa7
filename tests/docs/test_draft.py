"""What the docs say about the IETF Idempotency-Key draft: its version, its state, and
what it asks (a retry gets the previous result, success or error)."""

from __future__ import annotations

from tests.support.services import ROOT

CONTRACT = (ROOT / "docs" / "explanation" / "contract.md").read_text(encoding="utf-8")


def row(table_text: str, first_cell: str) -> list[str]:
    for line in table_text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if cells and cells[0] == first_cell:
            return cells
    raise AssertionError(f"no row {first_cell!r}")


def test_the_contract_names_the_draft_version_and_its_state() -> None:
    assert "draft-ietf-httpapi-idempotency-key-header-07" in CONTRACT
    assert "expired in April 2026 without becoming an RFC" in CONTRACT


def test_the_draft_keeps_the_previous_result_success_or_error() -> None:
    kept = row(CONTRACT, "which results are kept")
    assert kept[1] != "not specified"
    assert "previously completed operation, success or an error" in kept[1]


def test_the_expiry_and_the_problem_link_are_where_the_draft_asks() -> None:
    assert "x-idempotency-key-expires-after" in row(CONTRACT, "how long")[3]
    assert "W041" in row(CONTRACT, "errors' format")[3]
