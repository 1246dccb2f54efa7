"""Domain errors of the accounts app (no HTTP here; the API maps them in ``apis.py``)."""

from __future__ import annotations

from decimal import Decimal


class AccountError(Exception):
    """Base class of every accounts error."""


class AccountNotFound(AccountError, LookupError):
    def __init__(self, account_id: int) -> None:
        super().__init__(f"Account {account_id} does not exist.")
        self.account_id = account_id


class InvalidReference(AccountError, ValueError):
    def __init__(self, reference: str) -> None:
        super().__init__(
            f"Reference {reference!r} is not 1-64 characters of letters, digits and '_.:-'."
        )
        self.reference = reference


class InsufficientFunds(AccountError):
    def __init__(self, account_id: int, balance: Decimal, amount: Decimal) -> None:
        super().__init__(f"Account {account_id} holds {balance}, which is less than {amount}.")
        self.account_id = account_id
        self.balance = balance
        self.amount = amount


class BalanceLimitExceeded(AccountError):
    def __init__(self, account_id: int, balance: Decimal, amount: Decimal) -> None:
        super().__init__(
            f"Depositing {amount} into account {account_id} (holding {balance}) "
            "would exceed the largest balance an account can hold."
        )
        self.account_id = account_id
        self.balance = balance
        self.amount = amount


class AccountConflict(AccountError):
    """The balance kept changing under us; every bounded retry lost the version race."""

    def __init__(self, account_id: int, attempts: int) -> None:
        super().__init__(
            f"Account {account_id} changed concurrently {attempts} times in a row; try again."
        )
        self.account_id = account_id
        self.attempts = attempts


class LedgerReferenceConflict(AccountError):
    """A reference that is already used by a different balance change."""

    def __init__(self, reference: str, kind: str, amount: Decimal) -> None:
        super().__init__(
            f"Reference {reference!r} was already used for a {kind} of {amount}; "
            "a reference names exactly one balance change."
        )
        self.reference = reference
        self.kind = kind
        self.amount = amount
