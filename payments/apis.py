"""HTTP API of the payments app: thin views over the services and selectors."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy as _
from rest_framework import serializers, status
from rest_framework.exceptions import APIException, NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.apis import account_api_error, request_user
from accounts.errors import AccountError
from idempotency import idempotent
from orders.apis import order_api_error
from orders.errors import OrderError
from payments.errors import InvalidPayNo, OrderNotPayable, PaymentConflict, PaymentError
from payments.selectors import payment_get, payment_list
from payments.services import PAY_NO_MAX_LENGTH, PAY_NO_PATTERN, payment_pay


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


_API_ERRORS: dict[type[PaymentError], type[APIException]] = {
    PaymentConflict: PaymentConflictError,
    OrderNotPayable: OrderNotPayableError,
    InvalidPayNo: InvalidPayNoError,
}


def payment_api_error(exc: PaymentError | OrderError | AccountError) -> APIException:
    """The API error (problem+json with a stable code) that answers a domain error."""
    if isinstance(exc, OrderError):
        return order_api_error(exc)
    if isinstance(exc, AccountError):
        return account_api_error(exc)
    for cls in type(exc).__mro__:
        api_error = _API_ERRORS.get(cls)
        if api_error is not None:
            return api_error(detail=str(exc))
    return APIException(detail=str(exc))


class PaymentOutputSerializer(serializers.Serializer[Any]):
    pay_no = serializers.CharField()
    order_id = serializers.IntegerField()
    amount = serializers.DecimalField(max_digits=12, decimal_places=2)
    status = serializers.CharField()
    created_at = serializers.DateTimeField()


class OrderPayApi(APIView):
    """``POST /api/orders/{id}/pay/`` ``{pay_no}``: pay one of the caller's orders.

    ``201 Created`` with the payment. A repeat with the same pay number answers
    ``201`` with a byte-identical body and pays nothing again. Errors:
    ``404`` (not the caller's order), ``409 order-not-payable`` (not CREATED,
    e.g. paid under another number), ``409 payment-conflict`` (the number paid
    something else), ``409 insufficient-funds``.
    """

    class InputSerializer(serializers.Serializer[Any]):
        pay_no = serializers.RegexField(PAY_NO_PATTERN, max_length=PAY_NO_MAX_LENGTH)

    OutputSerializer = PaymentOutputSerializer

    @idempotent(required=True)
    def post(self, request: Request, pk: int) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            record, _created = payment_pay(
                user=request_user(request), order_id=pk, pay_no=serializer.validated_data["pay_no"]
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
