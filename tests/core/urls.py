from __future__ import annotations

from django.urls import include, path

urlpatterns = [
    path("t/", include("tests.testapp.urls")),
    path("m/", include("tests.testapp.matrix_urls")),
]
