"""The report of ``manage.py retry_storm``: what the client did, what the database holds,
and a verdict drawn only from what was measured (see :mod:`payments.storm`)."""

from __future__ import annotations

from decimal import Decimal

from payments.storm import NAIVE, PROTECTED, Side


def table(sides: dict[str, Side]) -> list[str]:
    """The report: what the client did, then what the database says."""
    rows = [
        ("payments wanted", "payments"),
        ("requests sent", "requests"),
        ("timeouts", "timeouts"),
        ("retries", "retries"),
        ("409 in progress", "in_progress"),
        ("5xx / refused", "server_errors"),
        ("replayed answers", "replays"),
        ("payments answered 2xx", "paid"),
        ("client timeout (s)", "timeout"),
        ("charges in the ledger", "charges"),
        ("orders charged", "charged_orders"),
        ("charges beyond one", "double_charges"),
        ("amount charged", "charged"),
        ("balance (ledger says)", "balance_expected"),
        ("balance (account row)", "balance"),
    ]
    names = list(sides)
    width = max(len(label) for label, _ in rows)
    lines = [f"{'':<{width}}  " + "  ".join(f"{n:>12}" for n in names)]
    for label, attr in rows:
        cells = "  ".join(f"{getattr(sides[n], attr)!s:>12}" for n in names)
        lines.append(f"{label:<{width}}  {cells}")
    return lines


def verdict(sides: dict[str, Side], amount: Decimal) -> list[str]:
    """One line per endpoint, from the database: double charges and lost updates are
    what it holds; "exactly once" only when every payment was answered and charged,
    "inconclusive" when answers did not come."""
    lines = []
    for side in sides.values():
        parts = [f"{side.name}: {side.payments} payments, {side.charges} charges"]
        if side.double_charges > 0:
            parts.append(
                f"{side.double_charges} double charges ({side.double_charges * amount} too much)"
            )
        if side.balance != side.balance_expected:
            parts.append(
                f"lost updates: the balance row says {side.balance}, the ledger "
                f"{side.balance_expected}"
            )
        if not side.conclusive:
            parts.append(
                f"inconclusive: {side.gave_up} payments got no answer in {side.payments} "
                f"and {side.payments - side.charged_orders} orders were never charged, so "
                "the retries were not put to the test"
            )
        elif side.double_charges == 0 and side.balance == side.balance_expected:
            parts.append("every payment charged exactly once, books balanced")
        lines.append("; ".join(parts) + ".")
    return lines


def summary(sides: dict[str, Side], seconds: float) -> str:
    """The last line: the comparison, or why there is none."""
    naive, protected = sides[NAIVE], sides[PROTECTED]
    if not (naive.conclusive and protected.conclusive):
        return (
            "Verdict: inconclusive. Answers did not come (the machine is too slow for these "
            "timeouts, or the server is stuck): nothing was measured about retries. Run "
            f"again on a quieter machine or with a longer --timeout ({seconds:.1f} s)."
        )
    return (
        f"Verdict: with the same timeouts and retries, the naive endpoint charged "
        f"{naive.charges} times for {naive.payments} payments; with an Idempotency-Key, "
        f"{protected.charges} times for {protected.payments} ({seconds:.1f} s)."
    )
