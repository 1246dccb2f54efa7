"""URLs of the shop's pages of the orders app (mounted at ``shop/``)."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from orders.pages import ShopLoginView, order_page, orders_page
from orders.urls import OrderIdConverter  # noqa: F401  (registers the order_id converter)

app_name = "shop"

urlpatterns = [
    path("", orders_page, name="orders"),
    path("login/", ShopLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(next_page="shop:login"), name="logout"),
    path("orders/<order_id:pk>/", order_page, name="order"),
]
