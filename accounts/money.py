"""Money and identifier rules shared by the sample apps.

Amounts are :class:`~decimal.Decimal` with two places and at most twelve digits,
the shape of every ``DecimalField(max_digits=12, decimal_places=2)`` column.
Identifiers chosen by clients (request ids, references, pay numbers) are short
strings of ``[A-Za-z0-9_.:-]``: safe in URLs, logs and every database.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

CENT = Decimal("0.01")
MIN_AMOUNT = CENT
MAX_AMOUNT = Decimal("9999999999.99")

IDENTIFIER_CHARS = r"[A-Za-z0-9_.:-]"


def identifier_pattern(max_length: int) -> re.Pattern[str]:
    """A pattern that matches a whole identifier of 1..``max_length`` allowed characters."""
    return re.compile(rf"\A{IDENTIFIER_CHARS}{{1,{max_length}}}\Z")


class InvalidAmount(ValueError):
    """An amount that is not a positive decimal with at most two places and twelve digits."""


def require_amount(amount: Decimal) -> Decimal:
    """Return ``amount`` with exactly two places, or raise :class:`InvalidAmount`."""
    if not isinstance(amount, Decimal) or not amount.is_finite():
        raise InvalidAmount(f"amount must be a finite Decimal, not {amount!r}")
    try:
        quantized = amount.quantize(CENT)
    except InvalidOperation as exc:
        raise InvalidAmount(f"amount {amount} is out of range") from exc
    if quantized != amount:
        raise InvalidAmount(f"amount {amount} has more than two decimal places")
    if not MIN_AMOUNT <= quantized <= MAX_AMOUNT:
        raise InvalidAmount(f"amount {amount} is not between {MIN_AMOUNT} and {MAX_AMOUNT}")
    return quantized
