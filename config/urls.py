"""URLs of the sample project."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.parsers import FormParser, MultiPartParser

from config.parsers import JSONParser
from idempotency.contrib.drf.tokens import SubmitTokenIssueView
from idempotency.contrib.prometheus import metrics_view
from orders.apis import ORDER_FORM_TOKEN_PURPOSE

urlpatterns = [
    # the root leads to the shop (the last URL runserver prints is this one)
    path("", RedirectView.as_view(pattern_name="shop:orders"), name="home"),
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
    path("api/orders/", include("payments.order_urls")),  # .../{id}/pay/: payments use orders
    path("api/payments/", include("payments.urls")),
    # The shop: server-rendered pages (session login), its checkout is the payments app's.
    path("shop/", include("orders.page_urls")),
    path("shop/", include("payments.page_urls")),
    # The OpenAPI schema and its docs page (Swagger UI, served locally).
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    # Prometheus metrics (keep it off the public internet, as usual for /metrics).
    path("metrics", metrics_view, name="metrics"),
]

handler404 = "config.problems.not_found"
handler500 = "config.problems.server_error"
