"""URLs of the shop's checkout (mounted at ``shop/``)."""

from __future__ import annotations

from django.urls import path

from payments.pages import CheckoutPayApi, checkout_form_page, checkout_page

app_name = "checkout"

urlpatterns = [
    path("checkout/", checkout_page, name="page"),
    path("checkout/pay/", CheckoutPayApi.as_view(), name="pay"),
    path("checkout/form/", checkout_form_page, name="form"),
]
