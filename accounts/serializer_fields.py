"""The one serializer field for money that every endpoint of the sample uses.

An amount travels as a JSON **string** of ASCII digits with at most two decimals:
``"10"``, ``"10.5"``, ``"10.50"``. Everything else is refused with a message that
names the rule: JSON numbers (floats lose cents), exponents (``"1e3"``),
underscores (``"1_000.00"``), signs, surrounding whitespace and non-ASCII digits
(``"１０.00"``), which Python's ``Decimal`` would all accept.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from django.utils.translation import gettext_lazy as _
from rest_framework import serializers

from accounts.money import CENT, MAX_AMOUNT, MIN_AMOUNT

#: ASCII digits only (``[0-9]``, never ``\d``, which matches every script's digits).
AMOUNT_PATTERN = re.compile(r"\A[0-9]{1,10}(?:\.[0-9]{1,2})?\Z")


class AmountField(serializers.Field[Decimal, str, str, Any]):
    """A positive amount of money between :data:`MIN_AMOUNT` and :data:`MAX_AMOUNT`."""

    default_error_messages = {
        "not_a_string": _('An amount is a JSON string such as "10.50", not a number.'),
        "invalid": _(
            'An amount is ASCII digits with at most two decimals, such as "10.50" '
            "(no sign, exponent, separators or spaces)."
        ),
        "min_value": _("An amount is at least {min_value}."),
        "max_value": _("An amount is at most {max_value}."),
    }

    def to_internal_value(self, data: Any) -> Decimal:
        if not isinstance(data, str):
            self.fail("not_a_string")
        if not AMOUNT_PATTERN.fullmatch(data):
            self.fail("invalid")
        amount = Decimal(data).quantize(CENT)
        if amount < MIN_AMOUNT:
            self.fail("min_value", min_value=MIN_AMOUNT)
        if amount > MAX_AMOUNT:
            self.fail("max_value", max_value=MAX_AMOUNT)
        return amount

    def to_representation(self, value: Decimal) -> str:
        return str(Decimal(value).quantize(CENT))


class IdentifierField(serializers.RegexField):
    """An identifier (a reference, a request id, a payment number): a JSON string that
    matches its pattern. DRF's ``CharField`` would turn the number ``0`` into ``"0"``;
    the schema says "string", and so does this field."""

    default_error_messages = {"not_a_string": _("An identifier is a JSON string.")}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("not_a_string")
        return str(super().to_internal_value(data))
