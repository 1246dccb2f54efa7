"""The tests' URLs (``tests/conftest.py``'s ``TESTAPP_URLS``): the test app's views, Django
Ninja's APIs, the edge views and the composition views (DRF's among them where DRF is
installed), and the matrix views, which mix in DRF's, where DRF is installed."""

from __future__ import annotations

from django.apps import apps
from django.urls import include, path

from tests.testapp.ninja_api import api as ninja_api
from tests.testapp.ninja_api import whole as ninja_whole

urlpatterns = [
    path("t/", include("tests.testapp.urls")),
    path("n/", ninja_api.urls),
    path("nw/", ninja_whole.urls),
    path("e/", include("tests.testapp.edge_urls")),
    path("m/x/", include("tests.testapp.composition_urls")),
]

if apps.is_installed("rest_framework"):
    urlpatterns += [
        path("m/", include("tests.testapp.matrix_urls")),
    ]
