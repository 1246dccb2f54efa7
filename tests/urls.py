from __future__ import annotations

from django.urls import include, path

from tests.testapp.edge_views import EdgeViews
from tests.testapp.ninja_api import api as ninja_api

urlpatterns = [
    path("t/", include("tests.testapp.urls")),
    path("e/", include(EdgeViews.urlpatterns)),
    path("m/", include("tests.testapp.matrix_urls")),
    path("n/", ninja_api.urls),
]
