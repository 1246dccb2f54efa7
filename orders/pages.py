"""The shop's server-rendered pages of the orders app: log in, the orders, one order.

Session login with the demo users (``manage.py seed_demo``: alice and bob). The order
page shows what a payment did: the order's status, the balance and the ledger after.
Paying is the payments app's (``payments.pages``): orders never import payments.
"""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from accounts.selectors import ledger_entry_list
from accounts.services import account_get_or_create_for_user
from orders.selectors import order_get, order_list

LOGIN_URL = "shop:login"


class ShopLoginView(auth_views.LoginView):
    template_name = "shop/login.html"
    redirect_authenticated_user = True
    next_page = "shop:orders"


@login_required(login_url=LOGIN_URL)
def orders_page(request: HttpRequest) -> HttpResponse:
    """The customer's orders, newest first, with their balance."""
    user = request.user
    assert user.is_authenticated  # login_required
    account = account_get_or_create_for_user(user=user)
    orders = order_list(user=user)[:50]
    return render(request, "shop/orders.html", {"orders": orders, "account": account})


@login_required(login_url=LOGIN_URL)
def order_page(request: HttpRequest, pk: int) -> HttpResponse:
    """One of the customer's orders, with the balance and the ledger after it."""
    user = request.user
    assert user.is_authenticated  # login_required
    order = order_get(user=user, order_id=pk)
    if order is None:
        raise Http404("No such order.")
    account = account_get_or_create_for_user(user=user)
    ledger = ledger_entry_list(account_id=account.pk)[:20]
    return render(
        request, "shop/order.html", {"order": order, "account": account, "ledger": ledger}
    )
