from __future__ import annotations

from django.urls import include, path

from tests.testapp.edge_views import EdgeViews

urlpatterns = [
    path("t/", include("tests.testapp.urls")),
    path("e/", include(EdgeViews.urlpatterns)),
    path("m/", include("tests.testapp.matrix_urls")),
]
