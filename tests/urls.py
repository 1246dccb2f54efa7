from __future__ import annotations

from django.urls import include, path

from tests.testapp.edge_views import EdgeViews
from tests.testapp.ninja_api import api as ninja_api
from tests.testapp.ninja_api import whole as ninja_whole

urlpatterns = [
    path("t/", include("tests.testapp.urls")),
    path("e/", include(EdgeViews.urlpatterns)),
    path("m/", include("tests.testapp.matrix_urls")),
    path("n/", ninja_api.urls),
    path("nw/", ninja_whole.urls),
]
