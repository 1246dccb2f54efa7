"""HTTP API of the orders app: thin views over the services and selectors."""

from __future__ import annotations

from typing import Any, ClassVar

from django.utils.translation import gettext_lazy as _
from rest_framework import serializers, status
from rest_framework.exceptions import APIException, NotFound
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api_errors import api_error_for
from accounts.apis import request_user
from accounts.permissions import IsMerchant
from accounts.serializer_fields import AmountField, IdentifierField
from idempotency import idempotency_settings, idempotent
from idempotency.contrib.drf.tokens import SubmitTokenPermission
from orders.errors import (
    CancelRefused,
    IllegalTransition,
    InvalidRequestId,
    OrderError,
    OrderNotFound,
    OrderRequestConflict,
)
from orders.models import Order, OrderStatus
from orders.selectors import order_get, order_list
from orders.services import (
    REQUEST_ID_PATTERN,
    order_cancel,
    order_checkout,
    order_create,
    order_transition,
)

#: Purpose of the one-time submit tokens of the order form (``POST /api/orders/checkout/``).
ORDER_FORM_TOKEN_PURPOSE = "order-form"


class OrderRequestConflictError(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "order_request_conflict"
    default_detail = _("This request id already names a different order.")


class IllegalTransitionError(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "illegal_transition"
    default_detail = _("The order cannot move to that status from its current one.")


class InvalidRequestIdError(APIException):
    status_code = status.HTTP_400_BAD_REQUEST
    default_code = "invalid_request_id"
    default_detail = _("The request id is not 1-64 characters of letters, digits and '_.:-'.")


class OrderNotFoundError(NotFound):
    """One answer for an order that does not exist and for anyone else's order."""

    default_detail = _("No such order.")


class OrderNotRefundableError(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "order_not_refundable"
    default_detail = _("The order was paid through the payment gateway; refund it there.")


_API_ERRORS: dict[type[OrderError], type[APIException]] = {
    OrderRequestConflict: OrderRequestConflictError,
    IllegalTransition: IllegalTransitionError,
    InvalidRequestId: InvalidRequestIdError,
}


def order_api_error(exc: OrderError) -> APIException:
    """The API error (problem+json with a stable code) that answers a domain error."""
    if isinstance(exc, OrderNotFound):
        return OrderNotFoundError()  # never the id: the same words for every missing order
    if isinstance(exc, CancelRefused):
        return OrderNotRefundableError(detail=str(exc))
    return api_error_for(exc, _API_ERRORS)


def get_order_or_404(request: Request, order_id: int) -> Order:
    """One of the caller's orders; anyone else's is the same 404 as a missing one."""
    order = order_get(user=request_user(request), order_id=order_id)
    if order is None:
        raise OrderNotFoundError()
    return order


class OrderOutputSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    request_id = serializers.CharField()
    amount = serializers.DecimalField(max_digits=12, decimal_places=2)
    status = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    paid_at = serializers.DateTimeField(allow_null=True)


class OrderListCreateApi(APIView):
    """``GET /api/orders/``: the caller's orders, newest first.

    ``POST /api/orders/`` ``{request_id, amount}``: create an order once per
    request id. The first request and every repeat (same user and amount)
    answer ``201 Created`` with a byte-identical body: the order as it is now.
    A request id reused with another amount is a ``409 order-request-conflict``.
    """

    class InputSerializer(serializers.Serializer[Any]):
        request_id = IdentifierField(REQUEST_ID_PATTERN, max_length=64)
        amount = AmountField()

    OutputSerializer = OrderOutputSerializer

    def get(self, request: Request) -> Response:
        orders = order_list(user=request_user(request))
        return Response(self.OutputSerializer(orders, many=True).data)

    @idempotent
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            order, _created = order_create(user=request_user(request), **serializer.validated_data)
        except OrderError as exc:
            raise order_api_error(exc) from exc
        return Response(self.OutputSerializer(order).data, status=status.HTTP_201_CREATED)


class OrderCheckoutApi(APIView):
    """``POST /api/orders/checkout/`` ``{amount}``: create an order from the order form.

    The form fetched a one-time token first (``POST /api/idempotency/tokens/``
    ``{"purpose": "order-form"}``) and sends it back in ``X-Submit-Token``. The
    token is consumed atomically before anything else runs, so of two submissions
    of one form (a double click, a browser retry) exactly one creates an order:
    ``201 Created``; the other is ``409 submit-token-used``. A missing, unknown,
    expired or someone else's token is ``400 submit-token-invalid`` and creates
    nothing. A spent token stays spent even when the submission then fails
    validation: the form asks for a new one.
    """

    permission_classes = [IsAuthenticated, SubmitTokenPermission]  # the token's check last
    submit_token_purpose = ORDER_FORM_TOKEN_PURPOSE

    class InputSerializer(serializers.Serializer[Any]):
        amount = AmountField()

    OutputSerializer = OrderOutputSerializer

    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        form_token = request.headers[idempotency_settings.SUBMIT_TOKEN_HEADER].strip()
        try:
            order = order_checkout(
                user=request_user(request),
                form_token=form_token,
                amount=serializer.validated_data["amount"],
            )
        except OrderError as exc:
            raise order_api_error(exc) from exc
        return Response(self.OutputSerializer(order).data, status=status.HTTP_201_CREATED)


class OrderDetailApi(APIView):
    """``GET /api/orders/{id}/``: one of the caller's orders (404 for anyone else's)."""

    OutputSerializer = OrderOutputSerializer

    def get(self, request: Request, pk: int) -> Response:
        order = get_order_or_404(request, pk)
        return Response(self.OutputSerializer(order).data)


class OrderCancelApi(APIView):
    """``POST /api/orders/{id}/cancel/``: the customer cancels one of their orders.

    ``200 OK`` with the order. A PAID order's payment is refunded to the balance
    in the same transaction (a ``refund`` ledger entry ``rf_<pay_no>``), once, however
    many cancels race. Repeating a done cancel answers the same and refunds nothing.
    A SHIPPED or COMPLETED order cannot be cancelled: ``409 illegal-transition``; an
    order paid through the gateway: ``409 order-not-refundable`` (it stays PAID).
    """

    OutputSerializer = OrderOutputSerializer

    def post(self, request: Request, pk: int) -> Response:
        order = get_order_or_404(request, pk)
        try:
            order = order_cancel(order_id=order.pk)
        except OrderError as exc:
            raise order_api_error(exc) from exc
        return Response(self.OutputSerializer(order).data)


class OrderFulfilmentApi(APIView):
    """``POST /api/orders/{id}/<action>/``: staff or a merchant moves any order to
    :attr:`target`.

    A customer gets ``403 permission-denied`` before any order is looked up. ``200
    OK`` with the order; repeating a move that is done answers the same. A move the
    status table forbids is a ``409 illegal-transition``.
    """

    permission_classes = [IsAuthenticated, IsMerchant]
    target: ClassVar[str]
    OutputSerializer = OrderOutputSerializer

    def post(self, request: Request, pk: int) -> Response:
        try:
            order = order_transition(order_id=pk, to=self.target)
        except OrderError as exc:
            raise order_api_error(exc) from exc
        return Response(self.OutputSerializer(order).data)


class OrderShipApi(OrderFulfilmentApi):
    target = OrderStatus.SHIPPED


class OrderCompleteApi(OrderFulfilmentApi):
    target = OrderStatus.COMPLETED
