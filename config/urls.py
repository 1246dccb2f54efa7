"""URLs of the sample project."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from rest_framework.authtoken.views import obtain_auth_token

from idempotency.tokens import SubmitTokenIssueView
from orders.apis import ORDER_FORM_TOKEN_PURPOSE

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/auth/token/", obtain_auth_token, name="api-token"),
    # One-time submit tokens, only for the purposes the sample's forms use.
    path(
        "api/idempotency/tokens/",
        SubmitTokenIssueView.as_view(allowed_purposes=frozenset({ORDER_FORM_TOKEN_PURPOSE})),
        name="submit-token-issue",
    ),
    path("api/accounts/", include("accounts.urls")),
    path("api/orders/", include("orders.urls")),
    path("api/payments/", include("payments.urls")),
]

handler404 = "config.problems.not_found"
handler500 = "config.problems.server_error"
