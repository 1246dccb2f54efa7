"""HTTP API of the payments app: thin views over the services and selectors."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.http import HttpResponse
from django.utils.translation import gettext_lazy as _
from rest_framework import serializers, status
from rest_framework.exceptions import APIException, NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api_errors import api_error_for
from accounts.apis import account_api_error, request_user
from accounts.errors import AccountError
from accounts.serializer_fields import AmountField, IdentifierField
from config.parsers import JSONParser
from idempotency import CallInProgress, RequestInProgress, idempotent, idempotent_function
from idempotency.exceptions import ArgumentsMismatch
from orders.apis import get_order_or_404, order_api_error
from orders.errors import OrderError
from payments.authentication import GatewaySignatureAuthentication, IsPaymentGateway
from payments.errors import (
    CallbackAmountMismatch,
    InvalidPayNo,
    InvalidTradeNo,
    OrderNotPayable,
    PaymentConflict,
    PaymentError,
    TradeNoConflict,
)
from payments.models import GatewayPaymentStatus
from payments.selectors import payment_get, payment_list
from payments.services import (
    PAY_NO_MAX_LENGTH,
    PAY_NO_PATTERN,
    TRADE_NO_MAX_LENGTH,
    TRADE_NO_PATTERN,
    gateway_payment_record,
    payment_pay,
)

#: Largest order id (a signed 64-bit primary key).
MAX_ORDER_ID = 2**63 - 1
#: Seconds a repeated callback waits for a concurrent first one to finish, then replays it
#: (with the database store, duplicates wait on the record's unique index instead).
CALLBACK_WAIT_SECONDS = 10.0


class PaymentConflictError(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "payment_conflict"
    default_detail = _("This pay number was already used for a different payment.")


class OrderNotPayableError(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "order_not_payable"
    default_detail = _("Only orders in status CREATED can be paid.")


class InvalidPayNoError(APIException):
    status_code = status.HTTP_400_BAD_REQUEST
    default_code = "invalid_pay_no"
    default_detail = _("The pay number is not 1-60 characters of letters, digits and '_.:-'.")


class CallbackAmountMismatchError(APIException):
    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_code = "callback_amount_mismatch"
    default_detail = _("The notified amount is not the order's amount.")


class TradeNoConflictError(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "trade_no_conflict"
    default_detail = _("This trade number was already notified with different content.")


class InvalidTradeNoError(APIException):
    status_code = status.HTTP_400_BAD_REQUEST
    default_code = "invalid_trade_no"
    default_detail = _("The trade number is not 1-64 characters of letters, digits and '_.:-'.")


_API_ERRORS: dict[type[PaymentError], type[APIException]] = {
    PaymentConflict: PaymentConflictError,
    OrderNotPayable: OrderNotPayableError,
    InvalidPayNo: InvalidPayNoError,
    CallbackAmountMismatch: CallbackAmountMismatchError,
    TradeNoConflict: TradeNoConflictError,
    InvalidTradeNo: InvalidTradeNoError,
}


def payment_api_error(exc: PaymentError | OrderError | AccountError) -> APIException:
    """The API error (problem+json with a stable code) that answers a domain error."""
    if isinstance(exc, OrderError):
        return order_api_error(exc)
    if isinstance(exc, AccountError):
        return account_api_error(exc)
    return api_error_for(exc, _API_ERRORS)


class PaymentOutputSerializer(serializers.Serializer[Any]):
    pay_no = serializers.CharField()
    order_id = serializers.IntegerField()
    amount = serializers.DecimalField(max_digits=12, decimal_places=2)
    status = serializers.CharField()
    created_at = serializers.DateTimeField()


class OrderPayApi(APIView):
    """``POST /api/orders/{id}/pay/`` ``{pay_no}``: pay one of the caller's orders.

    ``201 Created`` with the payment. A repeat with the same pay number answers
    ``201`` with a byte-identical body and pays nothing again. Pay numbers are
    unique per user: another user's numbers are neither visible nor blocking.
    Errors: ``404`` (not the caller's order; checked first), ``409
    order-not-payable`` (not CREATED, e.g. paid under another number), ``409
    payment-conflict`` (the caller's number paid another order), ``409
    insufficient-funds``.
    """

    class InputSerializer(serializers.Serializer[Any]):
        pay_no = IdentifierField(PAY_NO_PATTERN, max_length=PAY_NO_MAX_LENGTH)

    OutputSerializer = PaymentOutputSerializer

    @idempotent(required=True)
    def post(self, request: Request, pk: int) -> Response:
        order = get_order_or_404(request, pk)  # anyone else's order: 404 before anything else
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            record, _created = payment_pay(
                user=request_user(request),
                order_id=order.pk,
                pay_no=serializer.validated_data["pay_no"],
            )
        except (PaymentError, OrderError, AccountError) as exc:
            raise payment_api_error(exc) from exc
        return Response(self.OutputSerializer(record).data, status=status.HTTP_201_CREATED)


class PaymentListApi(APIView):
    """``GET /api/payments/``: the caller's payments, newest first."""

    OutputSerializer = PaymentOutputSerializer

    def get(self, request: Request) -> Response:
        payments = payment_list(user=request_user(request))
        return Response(self.OutputSerializer(payments, many=True).data)


class PaymentDetailApi(APIView):
    """``GET /api/payments/{pay_no}/``: one of the caller's payments (404 for anyone else's)."""

    OutputSerializer = PaymentOutputSerializer

    def get(self, request: Request, pay_no: str) -> Response:
        # A malformed number names no payment (and never reaches the database).
        record = (
            payment_get(user=request_user(request), pay_no=pay_no)
            if PAY_NO_PATTERN.fullmatch(pay_no)
            else None
        )
        if record is None:
            raise NotFound(_("No such payment."))
        return Response(self.OutputSerializer(record).data)


class GatewayPaymentOutputSerializer(serializers.Serializer[Any]):
    trade_no = serializers.CharField()
    order_id = serializers.IntegerField()
    amount = serializers.DecimalField(max_digits=12, decimal_places=2)
    status = serializers.CharField()
    created_at = serializers.DateTimeField()


@idempotent_function(
    key="pay_callback:{trade_no}", scope="gateway", wait=CALLBACK_WAIT_SECONDS, mode="auto"
)
def gateway_callback_handle(
    *, trade_no: str, order_id: int, amount: Decimal, status: str
) -> dict[str, Any]:
    """Apply a gateway notification once per ``trade_no``; the answer's body.

    The first call's body is stored and every repeat returns it without running the
    service again; a repeat with other content raises ``ArgumentsMismatch``. An error
    stores nothing: a repeat runs the service again and meets the same state, so the
    same error (an order's amount never changes, and an order that left CREATED never
    returns to it).
    """
    payment = gateway_payment_record(
        trade_no=trade_no, order_id=order_id, amount=amount, status=status
    )
    return dict(GatewayPaymentOutputSerializer(payment).data)


def _same_callback(body: dict[str, Any], data: dict[str, Any]) -> bool:
    """Whether a stored answer belongs to a notification with this content."""
    return (body["order_id"], Decimal(body["amount"]), body["status"]) == (
        data["order_id"],
        data["amount"],
        data["status"],
    )


class GatewayCallbackApi(APIView):
    """``POST /api/payments/callback/`` ``{trade_no, order_id, amount, status}``.

    The payment gateway's notification of a trade, signed with the shared secret
    (HMAC-SHA256 of the raw body, hex, in ``X-Gateway-Signature``); no user. The
    gateway retries until it gets a 2xx, so each ``trade_no`` is applied once and
    **every repeat gets exactly the first answer**: same status, same bytes.

    * ``SUCCESS``: the order moves CREATED -> PAID (the gateway took the money;
      no balance is touched) and the trade is recorded: ``200`` with the trade.
    * ``FAILED``: the trade is recorded, the order is unchanged: ``200``.

    Errors (problem+json; nothing changes, and a repeat gets the same answer):
    ``401 gateway-signature-missing`` / ``gateway-signature-invalid``,
    ``413 callback-too-large``, ``400 validation-error`` / ``parse-error``,
    ``404 not-found`` (no such order),
    ``422 callback-amount-mismatch``, ``409 order-not-payable`` (paid from the
    balance or by another trade, or cancelled), ``409 trade-no-conflict`` (the
    trade was notified before with other content), and, only when a concurrent
    first notification outlasts the wait, ``409 idempotency-request-in-progress``
    with ``Retry-After``.
    """

    authentication_classes = [GatewaySignatureAuthentication]
    permission_classes = [IsPaymentGateway]
    parser_classes = [JSONParser]

    class InputSerializer(serializers.Serializer[Any]):
        trade_no = IdentifierField(TRADE_NO_PATTERN, max_length=TRADE_NO_MAX_LENGTH)
        order_id = serializers.IntegerField(min_value=1, max_value=MAX_ORDER_ID)
        amount = AmountField()
        status = serializers.ChoiceField(choices=GatewayPaymentStatus.choices)

    def post(self, request: Request) -> Response | HttpResponse:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            # mode="auto": with the database store the claim, the payment and the stored
            # answer commit together, and a concurrent repeat waits for them, then replays
            body = gateway_callback_handle(
                trade_no=data["trade_no"],
                order_id=data["order_id"],
                amount=data["amount"],
                status=data["status"],
            )
        except ArgumentsMismatch as exc:
            # this trade number was notified before with other content: refused, unrun
            raise payment_api_error(TradeNoConflict(data["trade_no"])) from exc
        except CallInProgress:
            return RequestInProgress(
                "A notification of this trade is still being processed; retry later."
            ).as_response()
        except (PaymentError, OrderError) as exc:
            raise payment_api_error(exc) from exc
        if not _same_callback(body, data):  # an answer stored before arguments counted
            raise payment_api_error(TradeNoConflict(data["trade_no"]))
        return Response(body, status=status.HTTP_200_OK)
