"""URLs of the submit-token view tests (``@pytest.mark.urls("tests.testapp.token_urls")``)."""

from __future__ import annotations

from django.urls import path

from idempotency.contrib.drf.tokens import SubmitTokenIssueView
from tests.testapp import token_views as views


class CheckoutOnlyIssueView(SubmitTokenIssueView):
    allowed_purposes = frozenset({"checkout"})


urlpatterns = [
    path("api/idempotency/tokens/", SubmitTokenIssueView.as_view()),
    path("api/idempotency/checkout-tokens/", CheckoutOnlyIssueView.as_view()),
    path("checkout/", views.checkout_view),
    path("async-checkout/", views.async_checkout_view),
    path("transfer/", views.TransferApi.as_view()),
    path("api-view/", views.api_function_view),
    path("orders/", views.OrderApi.as_view()),
    path("unnamed/", views.UnnamedPurposeApi.as_view()),
]
