"""URLs of the sample project."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.parsers import FormParser, MultiPartParser

from config.parsers import JSONParser
from idempotency.tokens import SubmitTokenIssueView
from orders.apis import ORDER_FORM_TOKEN_PURPOSE

urlpatterns = [
    path("admin/", admin.site.urls),
    path(
        "api/auth/token/",
        # DRF's token view names its own parsers: the sample's JSON parser answers 400 for
        # JSON nested too deep to parse, where DRF's would fail with a 500
        ObtainAuthToken.as_view(parser_classes=[FormParser, MultiPartParser, JSONParser]),
        name="api-token",
    ),
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
