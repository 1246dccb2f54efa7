"""The shop's checkout (server-rendered; payments build on orders).

Two variants of one checkout, both creating the order and paying it from the balance
in one transaction (:func:`payments.services.checkout_pay`):

* ``checkout/``: the page's Pay button posts to ``checkout/pay/`` with an
  ``Idempotency-Key`` made once per checkout attempt and kept in ``sessionStorage``, so
  its retries (network error, timeout, ``Retry-After``) and a reload reuse it; the
  server replays the stored answer of the first attempt that got through.
* ``checkout/form/``: a classic HTML form with a one-time submit token in a hidden
  field, consumed in the checkout's transaction: a double submit creates one order, and
  the second submit gets a friendly page.
"""

from __future__ import annotations

import hashlib
import uuid
from decimal import Decimal
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from rest_framework import serializers, status
from rest_framework.authentication import SessionAuthentication
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.apis import request_user
from accounts.errors import AccountError
from accounts.serializer_fields import AmountField
from accounts.services import account_get_or_create_for_user
from idempotency import (
    StoreUnavailable,
    SubmitTokenInvalid,
    SubmitTokenUsed,
    consume_submit_token,
    idempotent,
    issue_submit_token,
)
from orders.errors import OrderError
from orders.models import Order
from orders.pages import LOGIN_URL
from payments.apis import payment_api_error
from payments.errors import PaymentError
from payments.services import CHECKOUT_REQUEST_ID_PREFIX, checkout_pay

#: Purpose of the order form's one-time submit tokens.
CHECKOUT_FORM_PURPOSE = "shop-checkout"
#: What the shop sells (the checkout's choice of amounts).
AMOUNTS = (Decimal("12.50"), Decimal("25.00"), Decimal("40.00"))


def form_checkout_id(token: str) -> str:
    """The checkout id of an order form's submission: a digest of its token."""
    return hashlib.sha256(f"shop-form\x00{token}".encode()).hexdigest()[:40]


@login_required(login_url=LOGIN_URL)
def checkout_page(request: HttpRequest) -> HttpResponse:
    return render(request, "shop/checkout.html", {"amounts": AMOUNTS})


class CheckoutPayApi(APIView):
    """``POST /shop/checkout/pay/`` ``{amount}`` with ``Idempotency-Key``: create and pay.

    ``201`` with the order and payment (and the balance after); a retry with the key
    replays it. The session's CSRF token is required (``X-CSRFToken``).
    """

    authentication_classes = [SessionAuthentication]
    schema = None  # the page's own endpoint, not part of the API's OpenAPI schema

    class InputSerializer(serializers.Serializer[Any]):
        amount = AmountField()

    @idempotent(required=True)
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        user = request_user(request)
        # the key's stable reference: the same on every retry of this checkout attempt
        context = getattr(request, "idempotency", None)  # None only with ENABLED off
        checkout_id = context.reference if context is not None else uuid.uuid4().hex
        try:
            order, record = checkout_pay(
                user=user, checkout_id=checkout_id, amount=serializer.validated_data["amount"]
            )
        except (PaymentError, OrderError, AccountError) as exc:
            raise payment_api_error(exc) from exc
        balance = account_get_or_create_for_user(user=user).balance
        body = {
            "order_id": order.pk,
            "status": order.status,
            "amount": str(order.amount),
            "pay_no": record.pay_no,
            "balance": str(balance),
        }
        return Response(body, status=status.HTTP_201_CREATED)


@login_required(login_url=LOGIN_URL)
def checkout_form_page(request: HttpRequest) -> HttpResponse:
    """GET: the form with a fresh one-time token. POST: spend it and check out, once."""
    user = request.user
    assert user.is_authenticated  # login_required
    if request.method != "POST":
        token = issue_submit_token(user_or_scope=user, purpose=CHECKOUT_FORM_PURPOSE)
        context = {"amounts": AMOUNTS, "submit_token": token}
        return render(request, "shop/checkout_form.html", context)
    token = request.POST.get("submit_token", "")
    try:
        amount = Decimal(request.POST.get("amount", ""))
        if amount not in AMOUNTS:
            raise ValueError(amount)
    except (ArithmeticError, ValueError):
        return render(request, "shop/checkout_refused.html", {"reason": "amount"}, status=400)
    try:
        with transaction.atomic():  # the token is spent only if the checkout commits
            consume_submit_token(token=token, user_or_scope=user, purpose=CHECKOUT_FORM_PURPOSE)
            order, _record = checkout_pay(
                user=user, checkout_id=form_checkout_id(token), amount=amount
            )
    except SubmitTokenUsed:
        first = Order.objects.filter(
            user=user, request_id=f"{CHECKOUT_REQUEST_ID_PREFIX}{form_checkout_id(token)}"
        ).first()
        return render(request, "shop/checkout_submitted.html", {"order": first}, status=409)
    except (SubmitTokenInvalid, StoreUnavailable):
        return render(request, "shop/checkout_refused.html", {"reason": "token"}, status=400)
    except (PaymentError, OrderError, AccountError) as exc:
        context = {"reason": "payment", "detail": str(exc)}
        return render(request, "shop/checkout_refused.html", context, status=409)
    return redirect("shop:order", pk=order.pk)
