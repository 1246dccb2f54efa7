"""HTTP API of the accounts app: thin views over the services and selectors."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.utils.translation import gettext_lazy as _
from rest_framework import serializers, status
from rest_framework.exceptions import APIException, NotAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api_errors import api_error_for
from accounts.errors import (
    AccountConflict,
    AccountError,
    AccountNotFound,
    BalanceLimitExceeded,
    InsufficientFunds,
    InvalidReference,
    LedgerReferenceConflict,
)
from accounts.selectors import ledger_entry_list
from accounts.serializer_fields import AmountField, IdentifierField
from accounts.services import REFERENCE_PATTERN, account_deposit, account_get_or_create_for_user
from idempotency import idempotent

if TYPE_CHECKING:
    from django.contrib.auth.models import User

#: Ledger references the API keeps for itself (payments deduct under ``pay_<pay_no>``,
#: refunds credit under ``rf_<pay_no>``).
RESERVED_REFERENCE_PREFIXES = ("pay_", "rf_")


class InsufficientFundsError(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "insufficient_funds"
    default_detail = _("The account balance is too low for this payment.")


class AccountConflictError(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "account_conflict"
    default_detail = _("The account changed concurrently too many times; try again.")


class LedgerReferenceConflictError(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "ledger_reference_conflict"
    default_detail = _("This reference was already used for a different balance change.")


class BalanceLimitExceededError(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "balance_limit_exceeded"
    default_detail = _("The deposit would exceed the largest balance an account can hold.")


class InvalidReferenceError(APIException):
    status_code = status.HTTP_400_BAD_REQUEST
    default_code = "invalid_reference"
    default_detail = _("The reference is not 1-64 characters of letters, digits and '_.:-'.")


class AccountNotFoundError(APIException):
    status_code = status.HTTP_404_NOT_FOUND
    default_code = "account_not_found"
    default_detail = _("The account does not exist.")


_API_ERRORS: dict[type[AccountError], type[APIException]] = {
    InsufficientFunds: InsufficientFundsError,
    AccountConflict: AccountConflictError,
    LedgerReferenceConflict: LedgerReferenceConflictError,
    BalanceLimitExceeded: BalanceLimitExceededError,
    InvalidReference: InvalidReferenceError,
    AccountNotFound: AccountNotFoundError,
}


def request_user(request: Request) -> User:
    """The authenticated caller (the views require authentication; this makes it explicit)."""
    user = request.user
    if not user.is_authenticated:
        raise NotAuthenticated()
    return user


def account_api_error(exc: AccountError) -> APIException:
    """The API error (problem+json with a stable code) that answers a domain error."""
    return api_error_for(exc, _API_ERRORS)


class LedgerEntryOutputSerializer(serializers.Serializer[Any]):
    reference = serializers.CharField()
    amount = serializers.DecimalField(max_digits=12, decimal_places=2)
    balance_after = serializers.DecimalField(max_digits=12, decimal_places=2)
    kind = serializers.CharField()
    created_at = serializers.DateTimeField()


class AccountMeApi(APIView):
    """``GET /api/accounts/me/``: the caller's account, opened empty on first use."""

    class OutputSerializer(serializers.Serializer[Any]):
        id = serializers.IntegerField()
        username = serializers.CharField(source="user.get_username")
        balance = serializers.DecimalField(max_digits=12, decimal_places=2)
        version = serializers.IntegerField()
        updated_at = serializers.DateTimeField()

    def get(self, request: Request) -> Response:
        account = account_get_or_create_for_user(user=request_user(request))
        return Response(self.OutputSerializer(account).data)


class AccountDepositApi(APIView):
    """``POST /api/accounts/me/deposit/`` ``{amount, reference?}``: add money once per reference.

    Answers ``201 Created`` with the ledger entry. A repeat with a reference that
    was already used for the same amount deposits nothing and answers ``201``
    again with a byte-identical body (the first entry), so a client that retries
    after a lost response cannot tell the two apart. The same reference with a
    different amount is a ``409 ledger-reference-conflict``. Without a
    reference the idempotency key names the deposit (``request.idempotency.reference``):
    the ledger then refuses a second credit under the same key even if the key's
    idempotency record is gone.
    """

    class InputSerializer(serializers.Serializer[Any]):
        amount = AmountField()
        reference = IdentifierField(REFERENCE_PATTERN, max_length=64, required=False)

        def validate_reference(self, value: str) -> str:
            if value.startswith(RESERVED_REFERENCE_PREFIXES):
                raise serializers.ValidationError(
                    _("References starting with 'pay_' or 'rf_' are reserved for payments.")
                )
            return value

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            # DRF skips an empty optional form field as if it were absent; an empty
            # reference is as invalid in a form as in JSON (what the schema says)
            data = self.initial_data
            if hasattr(data, "getlist") and "" in data.getlist("reference"):
                raise serializers.ValidationError(
                    {"reference": [_("This field may not be blank.")]}
                )
            return attrs

    OutputSerializer = LedgerEntryOutputSerializer

    @idempotent(required=True)
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        account = account_get_or_create_for_user(user=request_user(request))
        data = dict(serializer.validated_data)
        # No reference from the client: the idempotency key's stable reference, so the
        # ledger's unique (account, reference) stops a second credit even when the key's
        # record was lost (a lease-mode owner that died after this commit, a Redis restart).
        context = getattr(request, "idempotency", None)
        if context is not None:
            data.setdefault("reference", context.reference)
        try:
            entry = account_deposit(account_id=account.pk, **data)
        except AccountError as exc:
            raise account_api_error(exc) from exc
        return Response(self.OutputSerializer(entry).data, status=status.HTTP_201_CREATED)


class AccountLedgerApi(APIView):
    """``GET /api/accounts/me/ledger/``: the caller's ledger, newest first.

    Every balance change once: ``deposit`` (positive), ``deduction`` (a payment,
    negative, reference ``pay_<pay_no>``) and ``refund`` (a cancelled payment
    credited back, positive, reference ``rf_<pay_no>``), each with the balance after
    it. The amounts always add up to the balance: deposits - payments + refunds.
    """

    OutputSerializer = LedgerEntryOutputSerializer
    output_many = True  # a list of entries (the schema says so)

    def get(self, request: Request) -> Response:
        account = account_get_or_create_for_user(user=request_user(request))
        entries = ledger_entry_list(account_id=account.pk)
        return Response(self.OutputSerializer(entries, many=True).data)
