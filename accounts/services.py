"""Writes of the accounts app.

Every balance change is an optimistic, version-checked update::

    UPDATE account SET balance = <new>, version = version + 1
     WHERE id = <id> AND version = <read version> [AND balance >= <amount>]

judged by its row count, with a bounded retry when another writer got there
first, and a ledger row whose ``(account, reference)`` is unique. The update
and the ledger insert share one ``transaction.atomic()`` block, so a reference
that was already used rolls the update back: a change named by a reference
happens at most once, and a repeat returns the ledger entry of the first.

The new balance is written as a value computed in Python rather than as
``F("balance") - amount``: the version check already guarantees that the row
still holds the balance we read, and a literal keeps the arithmetic in exact
decimals on every backend (SQLite would do ``balance - amount`` in floating
point). ``balance_after`` of the ledger entry is the same exact value.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from accounts.errors import (
    AccountConflict,
    AccountNotFound,
    BalanceLimitExceeded,
    InsufficientFunds,
    InvalidReference,
    LedgerReferenceConflict,
)
from accounts.models import Account, LedgerEntry, LedgerEntryKind, ReconciliationRun
from accounts.money import CENT, MAX_AMOUNT, identifier_pattern, require_amount
from accounts.selectors import account_ledger_totals

if TYPE_CHECKING:
    from django.contrib.auth.models import User

#: Attempts of one balance change before giving up with :class:`AccountConflict`.
MAX_ATTEMPTS = 10
#: Random pause after the n-th lost race: up to ``BACKOFF_BASE * 2**n`` seconds, at most
#: ``BACKOFF_CAP`` ("full jitter"), so losers of one race do not collide again at once.
BACKOFF_BASE = 0.001
BACKOFF_CAP = 0.05

REFERENCE_PATTERN = identifier_pattern(64)

#: Mismatches kept in a reconciliation run's ``details`` (and logged one by one).
RECONCILE_DETAILS_LIMIT = 100

logger = logging.getLogger(__name__)


def account_get_or_create_for_user(*, user: User) -> Account:
    """The user's account, created empty (balance 0, version 0) on first use."""
    with transaction.atomic():
        account, _created = Account.objects.get_or_create(user=user)
    return account


def account_deduct(*, account_id: int, amount: Decimal, reference: str) -> LedgerEntry:
    """Take ``amount`` from the account, once per ``reference``.

    Raises :class:`InsufficientFunds` when the balance is too low,
    :class:`AccountConflict` when every bounded retry lost the version race and
    :class:`LedgerReferenceConflict` when ``reference`` names a different change.
    A repeat with the same reference and amount returns the first ledger entry.
    """
    amount = require_amount(amount)
    _require_reference(reference)
    return _change_balance(
        account_id=account_id, delta=-amount, reference=reference, kind=LedgerEntryKind.DEDUCTION
    )


def account_deposit(
    *, account_id: int, amount: Decimal, reference: str | None = None
) -> LedgerEntry:
    """Add ``amount`` to the account, once per ``reference`` (generated when omitted).

    A repeat with the same reference and amount returns the first ledger entry
    without depositing again; the same reference with another amount raises
    :class:`LedgerReferenceConflict`.
    """
    amount = require_amount(amount)
    if reference is None:
        reference = f"dep_{uuid.uuid4().hex}"
    _require_reference(reference)
    return _change_balance(
        account_id=account_id, delta=amount, reference=reference, kind=LedgerEntryKind.DEPOSIT
    )


def account_refund(*, account_id: int, amount: Decimal, reference: str) -> LedgerEntry:
    """Credit ``amount`` back to the account, once per ``reference``.

    The same version-checked update as a deposit, recorded as a ``refund`` ledger
    entry: a repeat with the same reference and amount returns the first entry.
    """
    amount = require_amount(amount)
    _require_reference(reference)
    return _change_balance(
        account_id=account_id, delta=amount, reference=reference, kind=LedgerEntryKind.REFUND
    )


def _require_reference(reference: str) -> None:
    if not isinstance(reference, str) or not REFERENCE_PATTERN.fullmatch(reference):
        raise InvalidReference(str(reference))


def _change_balance(
    *, account_id: int, delta: Decimal, reference: str, kind: LedgerEntryKind
) -> LedgerEntry:
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            with transaction.atomic():
                existing = _ledger_entry(account_id=account_id, reference=reference)
                if existing is not None:
                    return _same_change(existing, kind=kind, delta=delta)
                entry = _try_change(
                    account_id=account_id, delta=delta, reference=reference, kind=kind
                )
                if entry is not None:
                    return entry
        except IntegrityError:
            # A concurrent writer recorded this reference first. Leaving the
            # atomic block rolled our balance update back with the failed insert.
            existing = _ledger_entry(account_id=account_id, reference=reference)
            if existing is None:
                raise
            return _same_change(existing, kind=kind, delta=delta)
        # Lost the version race: someone changed the balance between our read
        # and our update. Pause a little (spreads the retries out) and re-read.
        _backoff(attempt)
    raise AccountConflict(account_id, MAX_ATTEMPTS)


def _backoff(attempt: int) -> None:
    time.sleep(random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2**attempt)))


def _try_change(
    *, account_id: int, delta: Decimal, reference: str, kind: LedgerEntryKind
) -> LedgerEntry | None:
    """One attempt: the ledger entry, or ``None`` when the version moved on."""
    row = Account.objects.filter(pk=account_id).values_list("balance", "version").first()
    if row is None:
        raise AccountNotFound(account_id)
    balance, version = row
    new_balance = balance + delta
    if new_balance < 0:
        raise InsufficientFunds(account_id, balance, -delta)
    if new_balance > MAX_AMOUNT:
        raise BalanceLimitExceeded(account_id, balance, delta)
    guard = Account.objects.filter(pk=account_id, version=version)
    if delta < 0:
        guard = guard.filter(balance__gte=-delta)
    updated = guard.update(balance=new_balance, version=F("version") + 1, updated_at=timezone.now())
    if updated != 1:
        return None
    return LedgerEntry.objects.create(
        account_id=account_id,
        amount=delta,
        balance_after=new_balance,
        reference=reference,
        kind=kind,
    )


def _ledger_entry(*, account_id: int, reference: str) -> LedgerEntry | None:
    return LedgerEntry.objects.filter(account_id=account_id, reference=reference).first()


def _same_change(existing: LedgerEntry, *, kind: LedgerEntryKind, delta: Decimal) -> LedgerEntry:
    if existing.kind != kind or existing.amount != delta:
        raise LedgerReferenceConflict(existing.reference, existing.kind, abs(existing.amount))
    return existing


def ledger_reconcile(*, details_limit: int = RECONCILE_DETAILS_LIMIT) -> ReconciliationRun:
    """Check every account's balance against the sum of its ledger; record the run.

    Changes no balance: a mismatch is a finding for a human (logged as a warning
    and kept in the run's ``details``, the first ``details_limit`` of them), never
    something to "fix" automatically. Not meant to run twice at once; the
    scheduled task :func:`accounts.tasks.reconcile_ledger` holds a lock around it.
    """
    started_at = timezone.now()
    checked = mismatched = 0
    details: list[dict[str, Any]] = []
    for account_id, balance, raw_total in account_ledger_totals().iterator(chunk_size=2000):
        checked += 1
        # exact on PostgreSQL; SQLite sums in floating point, so round back to cents
        ledger_total = Decimal(raw_total).quantize(CENT)
        if balance == ledger_total:
            continue
        mismatched += 1
        if len(details) < details_limit:
            logger.warning(
                "ledger mismatch: account %s holds %s but its ledger sums to %s",
                account_id,
                balance,
                ledger_total,
            )
            details.append(
                {
                    "account_id": account_id,
                    "balance": str(balance),
                    "ledger_total": str(ledger_total),
                }
            )
    if mismatched > len(details):
        logger.warning("ledger mismatch: %d more account(s) not listed", mismatched - len(details))
    with transaction.atomic():
        run = ReconciliationRun.objects.create(
            started_at=started_at,
            finished_at=timezone.now(),
            accounts_checked=checked,
            mismatches=mismatched,
            details=details,
        )
    return run
